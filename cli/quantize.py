"""`llamay quantize IN OUT TYPE`: the file llama-quantize writes, byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from llamay.errors import LlamayError
from llamay.gguf.quantize import Plan, QuantizeOptions, plan_file
from llamay.gguf.quantize import quantize as quantize_file
from llamay.store import resolve_model
from llamay.store.names import looks_like_path


@click.command()
@click.argument("source", metavar="IN")
@click.argument("destination", metavar="OUT")
@click.argument("type_name", metavar="TYPE")
@click.option(
    "--imatrix",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An importance matrix (llama.cpp's imatrix file: GGUF or legacy .dat).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Threads to quantize on (default: every core).",
)
@click.option(
    "--leave-output-tensor", is_flag=True, help="Keep output.weight as it is, unquantized."
)
@click.option("--output-tensor-type", metavar="T", help="The type of output.weight.")
@click.option("--token-embedding-type", metavar="T", help="The type of token_embd.weight.")
@click.option(
    "--pure", is_flag=True, help="Every quantized tensor TYPE's default type: no per-tensor mix."
)
@click.option(
    "--allow-requantize",
    is_flag=True,
    help="Quantize tensors that are quantized already (a second loss of quality).",
)
def quantize(
    source: str,
    destination: str,
    type_name: str,
    imatrix: Path | None,
    threads: int | None,
    leave_output_tensor: bool,
    output_tensor_type: str | None,
    token_embedding_type: str | None,
    pure: bool,
    allow_requantize: bool,
) -> None:
    """Quantize the model IN into OUT as TYPE: the tensor types and bytes llama-quantize
    writes for the same input (and importance matrix).

    \b
    IN   a .gguf file (F16, BF16 or F32) or a stored model name
    OUT  a .gguf path (anything spelled as a path: ./x, /x, ~/x, x.gguf),
         or a new name in the store, which keeps IN's template and parameters
    TYPE Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, Q8_0, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K,
         Q2_K_S (needs --imatrix), Q4_0, Q4_1, Q5_0, Q5_1, MXFP4_MOE, F16, BF16, F32
         (Q3_K, Q4_K, Q5_K: the _M mixes). i-quants are not written.

    OUT is written whole or not at all; Ctrl-C leaves nothing behind.
    """
    path = resolve_model(source)
    options = QuantizeOptions(
        type_name,
        imatrix=imatrix,
        pure=pure,
        leave_output_tensor=leave_output_tensor,
        output_tensor_type=output_tensor_type,
        token_embedding_type=token_embedding_type,
        allow_requantize=allow_requantize,
    )
    plan = plan_file(path, options)
    bar = _ProgressBar(plan) if sys.stderr.isatty() else None
    try:
        if looks_like_path(destination):
            written_to = Path(destination).expanduser()
            try:
                quantize_file(path, written_to, options, threads=threads, progress=bar, plan=plan)
            except OSError as error:  # name OUT, not its temporary file
                raise LlamayError(f"{written_to}: {error.strerror or error}") from None
            out, size = str(written_to), written_to.stat().st_size
        else:
            from llamay.store.quantized import store_quantized

            base = None if looks_like_path(source) or Path(source).is_file() else source
            entry = store_quantized(
                path, destination, options, base=base, threads=threads, progress=bar, plan=plan
            )
            out, size = entry.name, entry.path.stat().st_size
    except KeyboardInterrupt:
        click.echo(f"interrupted: {destination} was not written", err=True)
        sys.exit(130)
    finally:
        if bar is not None:
            bar.close()
    click.echo(
        f"quantized {source} to {out} ({plan.file_type.name}): "
        f"{_size(plan.source_bytes)} of tensors -> {_size(size)}",
        err=True,
    )


class _ProgressBar:
    """A tqdm bar over the input's tensor bytes, on stderr."""

    def __init__(self, plan: Plan) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            desc=plan.file_type.name,
            total=plan.source_bytes,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            leave=False,
        )

    def __call__(self, n: int) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._bar.close()


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"
