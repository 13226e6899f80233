"""The model store: resolving MODEL arguments to files, and (later) pulled models."""

from __future__ import annotations

from pathlib import Path

from llamay.errors import ModelNotFound
from llamay.store.builtin import PACKAGED, packaged_model_path
from llamay.store.paths import llamay_home

__all__ = ["llamay_home", "resolve_model"]


def resolve_model(model: str | Path) -> Path:
    """A MODEL argument (a .gguf path or a store name) to the path of its GGUF file."""
    text = str(model)
    path = Path(text).expanduser()
    if path.exists():
        if path.is_dir():
            raise ModelNotFound(f"{text}: is a directory, not a GGUF file")
        return path
    if text in PACKAGED:
        return packaged_model_path(PACKAGED[text])
    if text.endswith(".gguf") or text.startswith(("/", ".", "~")):
        raise ModelNotFound(f"{text}: no such file")
    known = ", ".join(sorted(PACKAGED))
    raise ModelNotFound(
        f"{text}: not a file and not a model in the store ({llamay_home()}); "
        f"built-in names: {known}"
    )
