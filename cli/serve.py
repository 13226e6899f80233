"""`llamay serve`: the HTTP server (OpenAI, Anthropic and Ollama APIs and llamay's own) on waitress."""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path

import click

from llamay.errors import LlamayError
from llamay.server.config import (
    DEFAULT_CHANNEL_TIMEOUT,
    DEFAULT_CONNECTION_LIMIT,
    DEFAULT_GRACE_PERIOD,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_HOST,
    DEFAULT_LEASE_TTL,
    DEFAULT_LEASE_WAIT,
    DEFAULT_MAX_CONTEXTS,
    DEFAULT_PORT,
    DEFAULT_SLOTS,
    ServerConfig,
)
from llamay.server.models import parse_keep_alive
from llamay.state import parse_size

from .engine_options import kv_type_option, lookup_option


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Requests served at once (their generations are batched together).",
)
@click.option(
    "--api-key",
    envvar="LLAMAY_API_KEY",
    help="Require this key on every request (`Authorization: Bearer KEY` or `x-api-key`). "
    "[env: LLAMAY_API_KEY]",
)
@click.option(
    "--insecure-no-key",
    is_flag=True,
    help="Listen beyond loopback without an API key (anyone who can reach the port may use it).",
)
@click.option("--kv-memory", help="KV cache budget of each loaded model, e.g. 2GiB.")
@click.option("-c", "--ctx-size", "n_ctx", type=click.IntRange(min=1), help="Tokens per context.")
@click.option("--model-threads", type=click.IntRange(min=1), help="CPU threads per forward step.")
@lookup_option
@kv_type_option()
@click.option(
    "--max-memory",
    help="Memory all loaded models may take together (weights + KV budget), e.g. 8GiB; "
    "the least recently used is unloaded to make room. [default: 3/4 of RAM]",
)
@click.option(
    "--keep-alive",
    default="5m",
    show_default=True,
    help="How long a model stays loaded after its last use (-1: forever).",
)
@click.option(
    "--models-dir",
    "model_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A directory whose .gguf files requests may name by path (repeatable).",
)
@click.option(
    "--alias",
    "aliases",
    multiple=True,
    metavar="NAME=MODEL",
    help="Serve MODEL under another name too, e.g. gpt-4o-mini=gemma3:270m (repeatable).",
)
@click.option(
    "--draft",
    "drafts",
    multiple=True,
    metavar="NAME=DRAFT",
    help="Speculate with model DRAFT (the same vocabulary) for requests to NAME, e.g. "
    "qwen2.5-coder:1.5b=qwen2.5-coder:0.5b (repeatable): the same tokens, fewer steps; its "
    "weights and KV cache count against --max-memory.",
)
@click.option(
    "--max-body",
    default="32MiB",
    show_default=True,
    help="Largest request body in bytes (or a size, e.g. 64MiB); larger ones get 413.",
)
@click.option(
    "--allow-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="A web origin (https://app.example, or '*') whose pages may call the server, with CORS "
    "(repeatable). Pages of other origins may not change anything.",
)
@click.option(
    "--context-ttl",
    default="10m",
    show_default=True,
    help="How long a context made over HTTP lives after its last use (-1: until deleted).",
)
@click.option(
    "--max-contexts",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CONTEXTS,
    show_default=True,
    help="Contexts made over HTTP that may be open at once; more get 429.",
)
@click.option(
    "--connection-limit",
    type=click.IntRange(min=1),
    default=DEFAULT_CONNECTION_LIMIT,
    show_default=True,
    help="Open connections at most (capped by the open-file limit).",
)
@click.option(
    "--channel-timeout",
    type=click.IntRange(min=1),
    default=DEFAULT_CHANNEL_TIMEOUT,
    show_default=True,
    help="Seconds an idle connection (no request in flight) is kept open.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    help="Seconds a request's headers may take to arrive after its first byte.",
)
@click.option(
    "--max-uploads",
    default="64GiB",
    show_default=True,
    help="Bytes of uploaded blobs (/api/blobs) no model uses yet that the store may hold.",
)
@click.option(
    "--upload-ttl",
    default="1h",
    show_default=True,
    help="How long an uploaded blob no model uses is kept before it is pruned.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A directory replicas share: every context made over HTTP is kept there as a snapshot "
    "too, and any replica restores it (docs/deploy.md).",
)
@click.option(
    "--replica-name",
    help="This replica's name in the state directory's leases (unique per replica). "
    "[default: HOST:PORT]",
)
@click.option(
    "--lease-ttl",
    default=f"{DEFAULT_LEASE_TTL:g}s",
    show_default=True,
    help="How long a context's lease lasts unrenewed: how long a dead replica's contexts wait.",
)
@click.option(
    "--lease-wait",
    default=f"{DEFAULT_LEASE_WAIT:g}s",
    show_default=True,
    help="How long a request waits for another replica's lease on its context before a 409.",
)
@click.option(
    "--grace-period",
    default=f"{DEFAULT_GRACE_PERIOD:g}s",
    show_default=True,
    help="After SIGTERM: how long requests may take to finish before streams are ended, every "
    "context is written and the server exits 0.",
)
@click.option(
    "--default-model",
    metavar="NAME",
    help="The model of a request that names none: llama-server's routes (/completion, "
    "/infill, /tokenize...), which editor plugins call without a model. [default: the one "
    "loaded model, if one is]",
)
@click.option(
    "--slots",
    type=click.IntRange(1, 64),
    default=DEFAULT_SLOTS,
    show_default=True,
    help="Slots per model for llama-server's routes: each remembers what its last request's "
    "context held, to save as a snapshot (docs/http-api.md).",
)
@click.option(
    "--slot-save-path",
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory POST /slots/ID?action=save writes slot snapshots to and "
    "action=restore reads them from. [default: none: both refused]",
)
def serve(
    host: str,
    port: int,
    threads: int,
    api_key: str | None,
    insecure_no_key: bool,
    kv_memory: str | None,
    n_ctx: int | None,
    model_threads: int | None,
    lookup: int,
    kv_type: str | None,
    max_memory: str | None,
    keep_alive: str,
    model_dirs: tuple[Path, ...],
    aliases: tuple[str, ...],
    drafts: tuple[str, ...],
    max_body: str,
    allowed_origins: tuple[str, ...],
    context_ttl: str,
    max_contexts: int,
    connection_limit: int,
    channel_timeout: int,
    header_timeout: float,
    max_uploads: str,
    upload_ttl: str,
    state_dir: Path | None,
    replica_name: str | None,
    lease_ttl: str,
    lease_wait: str,
    grace_period: str,
    default_model: str | None,
    slots: int,
    slot_save_path: Path | None,
) -> None:
    """Serve models over HTTP at http://127.0.0.1:11435 (OpenAI: /v1/chat/completions,
    Anthropic: /v1/messages, Ollama: /api/chat, ...). Models are loaded on first use."""
    from llamay.server import create_app
    from llamay.server.listen import create_server, run_until_drained
    from llamay.store.prune import clean_stale_temporaries

    if not api_key and not insecure_no_key and not _is_loopback(host):
        raise LlamayError(
            f"refusing to listen on {host} without an API key: anyone who can reach it could use "
            "the server; pass --api-key KEY (or set LLAMAY_API_KEY), or --insecure-no-key"
        )
    config = ServerConfig(
        host=host,
        port=port,
        threads=threads,
        api_key=api_key or None,
        kv_memory=_size(kv_memory, "--kv-memory") if kv_memory else None,
        n_ctx=n_ctx,
        model_threads=model_threads,
        lookup=lookup,
        kv_type=kv_type,
        memory_budget=_size(max_memory, "--max-memory") if max_memory else None,
        keep_alive=_duration(keep_alive, "--keep-alive"),
        max_body_bytes=_size(max_body, "--max-body"),
        model_dirs=model_dirs,
        aliases=dict(_pair(text, "--alias") for text in aliases),
        drafts=dict(_pair(text, "--draft") for text in drafts),
        allowed_origins=tuple(_origin(text) for text in allowed_origins),
        context_ttl=_duration(context_ttl, "--context-ttl"),
        max_contexts=max_contexts,
        connection_limit=connection_limit,
        channel_timeout=channel_timeout,
        header_timeout=header_timeout,
        max_uploads=_size(max_uploads, "--max-uploads"),
        upload_ttl=_duration(upload_ttl, "--upload-ttl"),
        state_dir=_state_dir(state_dir) if state_dir else None,
        replica_name=replica_name or None,
        lease_ttl=_positive(lease_ttl, "--lease-ttl"),
        lease_wait=_duration(lease_wait, "--lease-wait"),
        grace_period=_positive(grace_period, "--grace-period"),
        default_model=default_model or None,
        slots=slots,
        slot_save_path=_directory(slot_save_path, "--slot-save-path") if slot_save_path else None,
    )
    clean_stale_temporaries()  # what a server or pull killed with -9 left behind
    app = create_app(config)
    server = create_server(app, config)
    click.echo(f"llamay serving on http://{_url_host(host)}:{port}", err=True)
    run_until_drained(app, server)


def _size(text: str, option: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint=option) from None


def _duration(text: str, option: str) -> float:
    try:
        return parse_keep_alive(text, 0.0)
    except LlamayError as error:
        raise click.BadParameter(str(error), param_hint=option) from None


def _positive(text: str, option: str) -> float:
    seconds = _duration(text, option)
    if not 0 < seconds < float("inf"):
        raise click.BadParameter(f"{text!r} is not a positive duration", param_hint=option)
    return seconds


def _state_dir(path: Path) -> Path:
    """The state directory, made if missing; a clear error when it cannot be."""
    return _directory(path, "--state-dir")


def _directory(path: Path, option: str) -> Path:
    """A directory the server writes to, made if missing; a clear error when it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise LlamayError(f"{option} {path}: {error.strerror or error}") from None
    return path.resolve()


def _origin(text: str) -> str:
    if text != "*" and not re.fullmatch(r"https?://[^/\s]+", text.rstrip("/")):
        raise click.BadParameter(
            f"{text!r} is not an origin (scheme://host[:port], or '*')", param_hint="--allow-origin"
        )
    return text.rstrip("/")


def _pair(text: str, option: str) -> tuple[str, str]:
    """NAME=MODEL of --alias and --draft."""
    name, sep, model = text.partition("=")
    if not sep or not name or not model:
        raise click.BadParameter(f"{text!r} is not NAME=MODEL", param_hint=option)
    return name, model


def _is_loopback(host: str) -> bool:
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as error:
        raise LlamayError(f"cannot listen on {host}: {error.strerror}") from None
    return all(ipaddress.ip_address(address.split("%")[0]).is_loopback for address in addresses)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
