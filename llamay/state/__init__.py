"""The state engine: the only owner of KV bookkeeping. The page table and the KV cache
(kv_cache.py), contexts that share pages (context.py), the prefix tree, snapshots, the model
fingerprint, and the layout every backend's pages follow (layout.py)."""

from __future__ import annotations

from llamay.state.context import Context, Runner
from llamay.state.kv_cache import KVCache, PageList
from llamay.state.layout import KVLayout, ModelIdentity, PageStorage, parse_size

__all__ = [
    "Context",
    "KVCache",
    "KVLayout",
    "ModelIdentity",
    "PageList",
    "PageStorage",
    "Runner",
    "parse_size",
]
