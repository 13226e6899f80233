"""`llamay cp SOURCE DESTINATION`: another name for a stored model."""

from __future__ import annotations

import click

from llamay.store import copy


@click.command()
@click.argument("source")
@click.argument("destination")
def cp(source: str, destination: str) -> None:
    """Store SOURCE's model under the name DESTINATION too (the files are shared, not copied)."""
    copy(source, destination)
