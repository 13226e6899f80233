"""llamay's HTTP server: OpenAI, Anthropic and Ollama compatible APIs and llamay's own.

`create_app` is imported on first use, so that `llamay` commands other than `serve` (which
read only the config) do not load the web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llamay.server.config import ServerConfig

if TYPE_CHECKING:
    from llamay.server.app import create_app

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from llamay.server.app import create_app

        return create_app
    raise AttributeError(f"module 'llamay.server' has no attribute {name!r}")
