"""The model store: resolving MODEL arguments to files, pulling models, and what it holds.

Layout under $LLAMAY_HOME (see paths.py); names in names.py; `pull` in pulling.py.
"""

from __future__ import annotations

from pathlib import Path

from llamay.errors import ModelNotFound
from llamay.store.blobs import has_blob, import_blob
from llamay.store.catalog import (
    ModelEntry,
    copy,
    create,
    list_models,
    model_info,
    model_path,
    remove,
)

__all__ = [
    "ModelEntry",
    "copy",
    "create",
    "has_blob",
    "import_blob",
    "list_models",
    "model_info",
    "model_path",
    "pull",
    "remove",
    "resolve_model",
]


def resolve_model(model: str | Path) -> Path:
    """A MODEL argument (a .gguf path or a store name) to the path of its GGUF file."""
    text = str(model)
    try:
        path = Path(text).expanduser()
        exists = path.exists()
    except (OSError, ValueError, RuntimeError):  # too long, a NUL, ~user of no user
        exists = False
    if exists:
        if path.is_dir():
            raise ModelNotFound(f"{text}: is a directory, not a GGUF file")
        return path
    try:
        return model_path(text)  # a pulled name (a URL or a path pulled before counts too)
    except ModelNotFound:
        if "://" not in text and (text.endswith(".gguf") or text.startswith(("/", ".", "~"))):
            raise ModelNotFound(f"{text}: no such file") from None
        raise


def __getattr__(attribute: str):
    # `pull` brings in httpx; load it on first use rather than with every `import llamay`.
    if attribute == "pull":
        from llamay.store.pulling import pull

        return pull
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
