"""`llamay show MODEL [--json]`: a model's metadata and tensor table."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click
import numpy as np

from llamay import gguf
from llamay.store import resolve_model

# Arrays longer than this are summarised in the plain listing (the JSON always has them whole).
_SHOWN_ITEMS = 8


@click.command()
@click.argument("model")
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: metadata and tensors."
)
def show(model: str, as_json: bool) -> None:
    """Show MODEL's metadata and tensor table.

    Shapes are in GGUF order (fastest-varying dimension first); offsets are as stored in the file,
    relative to the start of its data section.
    """
    path = resolve_model(model)
    gg = gguf.read(path)
    tensors = [
        {"name": t.name, "type": t.type, "shape": list(t.shape), "offset": t.offset}
        for t in gg.tensors.values()
    ]
    if as_json:
        metadata = {key: gguf.plain_value(value) for key, value in gg.metadata.items()}
        click.echo(json.dumps({"metadata": metadata, "tensors": tensors}, ensure_ascii=False))
        return
    click.echo(f"file       {path}")
    click.echo(
        f"format     GGUF v{gg.version}, {len(gg.metadata)} metadata keys, {len(tensors)} tensors"
    )
    types = Counter(t["type"] for t in tensors)
    click.echo("types      " + ", ".join(f"{name} {n}" for name, n in types.most_common()))
    click.echo("\nmetadata")
    width = max((len(k) for k in gg.metadata), default=0)
    for key, value in gg.metadata.items():
        click.echo(f"  {key:<{width}}  {_summary(value)}")
    click.echo("\ntensors")
    width = max((len(t["name"]) for t in tensors), default=0)
    for t in tensors:
        shape = " x ".join(str(d) for d in t["shape"])
        click.echo(f"  {t['name']:<{width}}  {t['type']:<7}  {shape}")


def _summary(value: Any) -> str:
    if isinstance(value, (list, np.ndarray, gguf.StringArray)):
        items = gguf.plain_value(value[:_SHOWN_ITEMS])
        more = f", ... ({len(value)} items)" if len(value) > _SHOWN_ITEMS else ""
        return "[" + ", ".join(repr(v) for v in items) + more + "]"
    if isinstance(value, str) and (len(value) > 120 or "\n" in value):
        return repr(value[:117] + "...") if len(value) > 120 else repr(value)
    return repr(value)
