"""`llamay ls`: the models in the store, and the built-in ones that load here."""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from llamay.errors import LlamayError
from llamay.store import list_models
from llamay.store.builtin import chunks_intact
from llamay.store.catalog import ModelEntry, builtin_models
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
    """List the models in the store, and the built-in ones that load here (their file assembled,
    or their package installed): NAME, SIZE, FAMILY, QUANT, MODIFIED (UTC)."""
    rows = [("NAME", "SIZE", "FAMILY", "QUANT", "MODIFIED", *(("STATUS",) if verify else ()))]
    damaged = []
    hashed = functools.cache(intact)  # a blob two names share is hashed once
    for entry in sorted([*list_models(), *builtin_models()], key=lambda e: e.name):
        status: tuple[str, ...] = ()
        if verify:
            ok = _intact(entry, hashed)
            status = ("ok" if ok else "damaged",)
            damaged += [entry.name] * (not ok)
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


def _intact(entry: ModelEntry, intact_blob: Callable[[str], bool]) -> bool:
    """Whether every blob of `entry` hashes to its name; a built-in model not assembled yet is
    checked in the packages it is assembled from."""
    if entry.builtin is not None and not entry.builtin.assembled():
        return chunks_intact(entry.builtin)
    return all(intact_blob(layer["digest"]) for layer in layers_of(entry.manifest))


def human_size(size: int) -> str:
    """Bytes in decimal units, as Ollama shows them (`253 MB`)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
