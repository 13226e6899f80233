"""What a server is told at start: where it listens, who may call it, which models it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 11435
DEFAULT_MAX_BODY = 32 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    """The settings of one server; `llamay serve` fills it from its options.

    api_key: when set, every route requires it (`Authorization: Bearer KEY` or `x-api-key: KEY`).
    kv_memory: each loaded model's KV cache budget (bytes or a size such as "2GiB"); None: the
    engine's default. n_ctx: tokens per context (None: the engine's default). memory_budget: the
    bytes all loaded models may take together (weights + KV budget); the least recently used
    model is unloaded to make room for another. keep_alive: seconds a model stays loaded after
    its last use (negative: forever). model_dirs: directories under which a request may name a
    .gguf file by path; a path elsewhere is refused. aliases: request name -> model name.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    threads: int = 8
    api_key: str | None = None
    kv_memory: int | str | None = None
    n_ctx: int | None = None
    model_threads: int | None = None
    memory_budget: int | None = None
    keep_alive: float = 300.0
    max_body_bytes: int = DEFAULT_MAX_BODY
    model_dirs: tuple[Path, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
