"""`llamay rm NAME...`: remove models from the store."""

from __future__ import annotations

import click

from llamay.store import remove


@click.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
def rm(names: tuple[str, ...]) -> None:
    """Remove each NAME from the store, with the blobs no other name uses."""
    for name in names:
        remove(name)
