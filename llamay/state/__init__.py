"""The state engine: KV pages, contexts that share them, the prefix tree, snapshots."""

from __future__ import annotations

from llamay.state.pool import PagePool, parse_size

__all__ = ["PagePool", "parse_size"]
