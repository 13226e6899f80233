"""Remote providers: model names that `$LLAMAY_HOME/config.toml` sends to an OpenAI-compatible or
Anthropic endpoint instead of running them here. Without that file nothing leaves the machine."""

from __future__ import annotations

from llamay.providers.config import ProviderConfig, ProviderError, config_path, load_providers
from llamay.providers.provider import Provider, Reply

__all__ = [
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "Reply",
    "config_path",
    "find",
    "load_providers",
]


def find(model_name: str) -> Provider | None:
    """The provider that serves `model_name`, or None when it is local (no config file, or no
    provider lists the name). The config file is read on each call, so edits apply at once."""
    for config in load_providers():
        if model_name in config.models:
            return Provider(config, model_name)
    return None
