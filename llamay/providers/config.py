"""Reading `$LLAMAY_HOME/config.toml`: which model names are served by a remote provider.

The file is optional; without it every name is local and nothing leaves the machine. It is read
strictly: an unknown key, a wrong type or a model name claimed twice is an error naming the file,
because a typo here would otherwise send a request somewhere it was not meant to go (or keep one
local that was meant to go out).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llamay.errors import LlamayError
from llamay.paths import llamay_home

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

APIS = ("openai", "anthropic")
_KEYS = {"name", "api", "base_url", "api_key_env", "models"}


class ProviderError(LlamayError):
    """A bad provider configuration, or a remote provider that failed to answer."""


@dataclass(frozen=True)
class ProviderConfig:
    """One `[[providers]]` entry."""

    name: str
    api: str  # one of APIS
    base_url: str  # as the API's official SDK takes it: with /v1 for openai, without for anthropic
    api_key_env: str | None
    models: dict[str, str]  # local name -> the upstream's model name


def config_path() -> Path:
    return llamay_home() / "config.toml"


def load_providers(path: Path | None = None) -> list[ProviderConfig]:
    """The providers configured in `path` (default: $LLAMAY_HOME/config.toml); [] without a file."""
    path = config_path() if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderError(f"{path}: cannot be read: {exc}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProviderError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(document) - {"providers"})
    if unknown:
        raise ProviderError(
            f"{path}: unknown top-level key {unknown[0]!r} (expected [[providers]])"
        )
    entries = document.get("providers", [])
    if not isinstance(entries, list):
        raise ProviderError(f"{path}: 'providers' must be an array of tables ([[providers]])")
    providers = [_provider(path, index, entry) for index, entry in enumerate(entries)]
    _check_unique_models(path, providers)
    return providers


def _provider(path: Path, index: int, entry: Any) -> ProviderConfig:
    where = f"{path}: providers[{index}]"
    if not isinstance(entry, dict):
        raise ProviderError(f"{where} must be a table")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ProviderError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})"
        )
    for key in ("name", "api", "base_url", "models"):
        if key not in entry:
            raise ProviderError(f"{where}: missing {key!r}")
    name = _string(where, entry, "name")
    where = f"{path}: provider {name!r}"
    api = _string(where, entry, "api")
    if api not in APIS:
        raise ProviderError(f"{where}: api must be one of {', '.join(APIS)}, not {api!r}")
    base_url = _string(where, entry, "base_url").rstrip("/")
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ProviderError(
            f"{where}: base_url must be an http:// or https:// URL, not {base_url!r}"
        )
    api_key_env = _string(where, entry, "api_key_env") if "api_key_env" in entry else None
    models = entry["models"]
    if not isinstance(models, dict) or not all(
        isinstance(local, str) and isinstance(upstream, str) and local and upstream
        for local, upstream in models.items()
    ):
        raise ProviderError(
            f"{where}: models must map local names to upstream model names, "
            '{ "local-name" = "upstream-name" }'
        )
    return ProviderConfig(name, api, base_url, api_key_env, dict(models))


def _string(where: str, entry: dict[str, Any], key: str) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value:
        raise ProviderError(f"{where}: {key} must be a non-empty string, not {value!r}")
    return value


def _check_unique_models(path: Path, providers: list[ProviderConfig]) -> None:
    owner: dict[str, str] = {}
    for provider in providers:
        for local in provider.models:
            if local in owner:
                raise ProviderError(
                    f"{path}: model {local!r} is listed by both provider {owner[local]!r} "
                    f"and provider {provider.name!r}"
                )
            owner[local] = provider.name
