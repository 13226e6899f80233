"""What a server is told at start: where it listens, who may call it, which models it serves,
and the bounds that keep one client from taking what the others need."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 11435
DEFAULT_MAX_BODY = 32 * 1024 * 1024
DEFAULT_CONTEXT_TTL = 600.0
DEFAULT_MAX_CONTEXTS = 64
DEFAULT_CONNECTION_LIMIT = 1000
DEFAULT_CHANNEL_TIMEOUT = 60
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_UPLOADS = 64 * 1024**3
DEFAULT_UPLOAD_TTL = 3600.0
DEFAULT_LEASE_TTL = 5.0
DEFAULT_LEASE_WAIT = 6.0
DEFAULT_GRACE_PERIOD = 25.0
DEFAULT_SLOTS = 4  # llama-server's default number of parallel slots


@dataclass(frozen=True)
class ServerConfig:
    """The settings of one server; `llamay serve` fills it from its options (docs/deploy.md).

    api_key: when set, every route requires it (`Authorization: Bearer KEY` or `x-api-key: KEY`),
    and the Host header is not checked. allowed_origins: web origins (`https://app.example`, or
    "*") whose pages may call the server, with CORS answers; other origins may only read.
    kv_memory: each loaded model's KV cache budget (bytes or a size such as "2GiB"); None: the
    engine's default. kv_type: the KV cache's element type (None: the
    model's default). lookup: prompt-lookup draft tokens
    per step for every generation (a speed setting: the tokens are the same). n_ctx: tokens per context (None: the engine's default). memory_budget: the
    bytes all loaded models may take together (weights + KV budget, unloaded models that open
    contexts still hold included); the least recently used model is unloaded to make room for
    another. keep_alive: seconds a model stays loaded after its last use (negative: forever).
    model_dirs: directories under which a request may name a .gguf file by path; any other
    path is refused before it is opened. aliases: request name -> model name. drafts: request
    name -> the draft model generations of that model speculate with.
    context_ttl: seconds a context made over HTTP lives after its last use; max_contexts: how
    many such contexts may be open at once (429 past it). connection_limit, channel_timeout
    (seconds an idle connection is kept) and header_timeout (seconds a request's headers may
    take to arrive): waitress's, as `llamay serve` runs it. max_uploads: bytes of uploaded blobs
    (/api/blobs) that no model uses yet which the store may hold (413 past it); upload_ttl:
    seconds such a blob is kept before it is pruned.
    state_dir: a directory replicas share; every context made over HTTP is a snapshot there too,
    and any replica restores it (docs/deploy.md). replica_name: this replica in leases and
    manifests (None: host:port); unique per replica. lease_ttl: seconds a context's lease lasts
    unrenewed (the time a dead replica's contexts stay locked); lease_wait: seconds a request
    waits for another replica's lease before its 409. grace_period: seconds a SIGTERM gives
    requests to finish before streams are ended and every context is written.
    default_model: the model of a request that names none (llama-server's routes: /completion,
    /infill, /tokenize...; editor plugins send no model). slots: the slots each model keeps
    for those routes (slots.py); slot_save_path: the directory their snapshots are saved to
    and restored from (None: saving and restoring are refused).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    threads: int = 8
    api_key: str | None = None
    allowed_origins: tuple[str, ...] = ()
    kv_memory: int | str | None = None
    n_ctx: int | None = None
    model_threads: int | None = None
    lookup: int = 0
    kv_type: str | None = None
    memory_budget: int | None = None
    keep_alive: float = 300.0
    max_body_bytes: int = DEFAULT_MAX_BODY
    model_dirs: tuple[Path, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    drafts: dict[str, str] = field(default_factory=dict)
    context_ttl: float = DEFAULT_CONTEXT_TTL
    max_contexts: int = DEFAULT_MAX_CONTEXTS
    connection_limit: int = DEFAULT_CONNECTION_LIMIT
    channel_timeout: int = DEFAULT_CHANNEL_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    max_uploads: int = DEFAULT_MAX_UPLOADS
    upload_ttl: float = DEFAULT_UPLOAD_TTL
    state_dir: Path | None = None
    replica_name: str | None = None
    lease_ttl: float = DEFAULT_LEASE_TTL
    lease_wait: float = DEFAULT_LEASE_WAIT
    grace_period: float = DEFAULT_GRACE_PERIOD
    default_model: str | None = None
    slots: int = DEFAULT_SLOTS
    slot_save_path: Path | None = None

    def replica(self) -> str:
        """This replica's name: replica_name, or host:port (host:pidN on an ephemeral port)."""
        if self.replica_name:
            return self.replica_name
        return f"{socket.gethostname()}:{self.port or f'pid{os.getpid()}'}"
