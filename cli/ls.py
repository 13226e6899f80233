"""`llamay ls`: the models in the store."""

from __future__ import annotations

import click

from llamay.store import list_models


@click.command()
def ls() -> None:
    """List the models in the store: NAME, SIZE, FAMILY, QUANT, MODIFIED (UTC)."""
    rows = [("NAME", "SIZE", "FAMILY", "QUANT", "MODIFIED")]
    for entry in list_models():
        rows.append(
            (
                entry.name,
                human_size(entry.size),
                entry.family or "-",
                entry.quant or "-",
                entry.modified.strftime("%Y-%m-%d %H:%M"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo(
            "  ".join(f"{cell:<{w}}" for cell, w in zip(row[:-1], widths, strict=True))
            + "  "
            + row[-1]
        )


def human_size(size: int) -> str:
    """Bytes in decimal units, as Ollama shows them (`253 MB`)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
