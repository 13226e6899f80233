"""`llamay verify [MODEL]`: the determinism checks, each PASS or FAIL with what it measured."""

from __future__ import annotations

import json
import time

import click

from llamay.errors import LlamayError
from llamay.system import kernels_line, system_info
from llamay.verify import run_checks

from .engine_options import draft_option, kv_type_option

BUILTIN = "built-in synthetic model"


@click.command()
@click.argument("model", required=False)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"model", "passed", "system", "checks": [{"name", "passed", "figure", ...}]}.',
)
@kv_type_option("the KV cache the checks run with")
@draft_option
def verify(model: str | None, as_json: bool, kv_type: str | None, draft: str | None) -> None:
    """Check that MODEL computes the same logits however it is run.

    The same tokens are evaluated with 1, 2 and all threads; alone and beside three other
    sequences; whole, in chunks and token by token; in forks and in cold contexts; before and
    after a snapshot round trip; and seeded generations are repeated. Every logit must match
    bit for bit, and on every kernel set this CPU runs. Without MODEL the checks run in seconds
    on a small synthetic model. With --draft, speculating with that draft model must give the
    same tokens as without it, greedy and seeded (on the built-in model this check runs with a
    synthetic draft). The first line names the kernel set and the CPU. Exits 1 if any check
    fails.
    """
    started = time.perf_counter()
    system = system_info()
    if not as_json:
        click.echo(kernels_line(system))
    checks = []
    if draft is not None and model is None:
        raise click.UsageError("--draft needs a MODEL (the built-in model has its own draft)")
    for check in run_checks(model, kv_type=kv_type, draft=draft):
        checks.append(check)
        if not as_json:
            status = "PASS" if check.passed else "FAIL"
            click.echo(f"{status}  {check.name:<44}  {check.figure}")
    failed = [check.name for check in checks if not check.passed]
    label = model or BUILTIN
    if as_json:
        report = {
            "model": label,
            "passed": not failed,
            "system": system,
            "checks": [check.as_json() for check in checks],
        }
        click.echo(json.dumps(report))
    else:
        seconds = time.perf_counter() - started
        click.echo(
            f"{len(checks) - len(failed)} of {len(checks)} checks passed ({label}, {seconds:.1f} s)"
        )
    if failed:
        raise LlamayError(f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}")
