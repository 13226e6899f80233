"""`llamay show MODEL [--json]`: a model's metadata and tensor table; `llamay show --system`: the
machine, and which kernel set runs on it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click
import numpy as np

from llamay import gguf
from llamay.store import resolve_model
from llamay.system import system_info

# Arrays longer than this are summarised in the plain listing (the JSON always has them whole).
_SHOWN_ITEMS = 8


@click.command()
@click.argument("model", required=False)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: metadata and tensors."
)
@click.option(
    "--system",
    is_flag=True,
    help="Show this machine instead: the CPU, its features, and the kernel sets it runs.",
)
def show(model: str | None, as_json: bool, system: bool) -> None:
    """Show MODEL's metadata and tensor table.

    Shapes are in GGUF order (fastest-varying dimension first); offsets are as stored in the file,
    relative to the start of its data section. With --system (and no MODEL): llamay's version,
    the CPU, the features its kernels use, the kernel sets this build carries, those the CPU
    runs, and the one a model loads with (the best, or LLAMAY_KERNELS) - what a bug report needs.
    """
    if system:
        if model is not None:
            raise click.UsageError("give either MODEL or --system")
        _show_system(as_json)
        return
    if model is None:
        raise click.UsageError("Missing argument 'MODEL' (or give --system).")
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


def _show_system(as_json: bool) -> None:
    info = system_info()
    if as_json:
        click.echo(json.dumps(info))
        return
    chosen = info["kernels"] or f"none: {info['kernels_error']}"
    if info["kernels"] and info["kernels_forced"]:
        chosen += " (LLAMAY_KERNELS)"
    elif info["kernels"]:
        chosen += " (the best this CPU runs)"
    rows = [
        ("llamay", info["llamay"]),
        ("python", info["python"]),
        ("os", f"{info['os']} {info['machine']}"),
        ("cpu", f"{info['cpu']} ({info['cpus']} CPUs for this process)"),
        ("features", " ".join(info["features"]) or "none that a kernel set uses"),
        ("built", ", ".join(info["kernel_sets"])),
        ("runs", ", ".join(info["runs"])),
        ("kernels", chosen),
    ]
    for name, value in rows:
        click.echo(f"{name:<9}  {value}")


def _summary(value: Any) -> str:
    if isinstance(value, (list, np.ndarray, gguf.StringArray)):
        items = gguf.plain_value(value[:_SHOWN_ITEMS])
        more = f", ... ({len(value)} items)" if len(value) > _SHOWN_ITEMS else ""
        return "[" + ", ".join(repr(v) for v in items) + more + "]"
    if isinstance(value, str) and (len(value) > 120 or "\n" in value):
        return repr(value[:117] + "...") if len(value) > 120 else repr(value)
    return repr(value)
