"""`llamay pull NAME`: fetch a model into the store, with progress bars on a terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from llamay.store import pull as pull_model
from llamay.store.names import looks_like_path


@click.command()
@click.argument("name")
@click.option("--insecure", is_flag=True, help="Allow plain http (HOST[:PORT]/NS/NAME names only).")
def pull(name: str, insecure: bool) -> None:
    """Pull NAME into the store.

    \b
    NAME[:TAG], NS/NAME[:TAG]     the Ollama registry (library namespace, tag latest by default)
    HOST[:PORT]/NS/NAME[:TAG]     another Ollama-protocol registry
    hf.co/OWNER/REPO[:QUANT]      a GGUF file of a Hugging Face repository (Q4_K_M by default;
                                  $HF_ENDPOINT, $HF_TOKEN)
    https://.../FILE.gguf, PATH   that file

    An interrupted pull resumes where it stopped when run again. Piped, it prints nothing.
    """
    if not looks_like_path(name) and _is_file(name):  # a file here, named without ./
        name = str(Path(name).resolve())
    if not sys.stderr.isatty():
        pull_model(name, insecure=insecure)
        return
    bars = ProgressBars()
    try:
        entry = pull_model(name, insecure=insecure, progress=bars.update)
    finally:
        bars.close()
    click.echo(f"pulled {entry.name}", err=True)


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # too long a name, a NUL
        return False


class ProgressBars:
    """One tqdm bar per blob on stderr, fed by pull's progress events."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._bars: dict[str, object] = {}

    def update(self, event: dict) -> None:
        if "completed" not in event:
            return
        label, total, done = event["status"], event.get("total"), event["completed"] or 0
        bar = self._bars.get(label)
        if bar is None:
            bar = self._bars[label] = self._tqdm(
                desc=label, total=total, unit="B", unit_scale=True, unit_divisor=1024, leave=True
            )
        if total is not None and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
