"""`llamay ls`: the models in the store."""

from __future__ import annotations

import click

from llamay.errors import LlamayError
from llamay.store import list_models
from llamay.store.manifests import layers_of
from llamay.store.verify import intact


@click.command()
@click.option(
    "--verify",
    is_flag=True,
    help="Hash every blob and add a STATUS column (ok, or damaged: `llamay pull NAME` repairs "
    "it); exit 1 if any is damaged.",
)
def ls(verify: bool) -> None:
    """List the models in the store: NAME, SIZE, FAMILY, QUANT, MODIFIED (UTC)."""
    rows = [("NAME", "SIZE", "FAMILY", "QUANT", "MODIFIED", *(("STATUS",) if verify else ()))]
    damaged = []
    for entry in list_models():
        status: tuple[str, ...] = ()
        if verify:
            bad = [
                layer["digest"]
                for layer in layers_of(entry.manifest)
                if not intact(layer["digest"])
            ]
            status = ("damaged" if bad else "ok",)
            damaged += [entry.name] * bool(bad)
        rows.append(
            (
                entry.name,
                human_size(entry.size),
                entry.family or "-",
                entry.quant or "-",
                entry.modified.strftime("%Y-%m-%d %H:%M"),
                *status,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo(
            "  ".join(f"{cell:<{w}}" for cell, w in zip(row[:-1], widths, strict=True))
            + "  "
            + row[-1]
        )
    if damaged:
        raise LlamayError(
            f"{', '.join(damaged)}: blobs that do not match their sha256; pull again to repair"
        )


def human_size(size: int) -> str:
    """Bytes in decimal units, as Ollama shows them (`253 MB`)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
