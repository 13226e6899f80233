"""`llamay prune`: remove what the store holds that no model needs."""

from __future__ import annotations

import click

from llamay.store.prune import prune as prune_store

from .ls import human_size


@click.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
def prune(dry_run: bool) -> None:
    """Remove the blobs no stored name uses (uploads never made into a model, layers of models
    since removed), unfinished downloads, and temporary files of killed processes. Refused
    while a pull or upload is running."""
    pruned = prune_store(dry_run=dry_run)
    for path in [*pruned.blobs, *pruned.partials, *pruned.temporaries]:
        click.echo(str(path))
    verb = "would free" if dry_run else "freed"
    count = len(pruned.blobs) + len(pruned.partials) + len(pruned.temporaries)
    click.echo(f"{count} files, {verb} {human_size(pruned.freed)}", err=True)
