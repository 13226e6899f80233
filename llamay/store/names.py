"""Model names: what `llamay pull NAME` accepts, and the one key each is stored under.

| written                            | kind       | stored as                        |
|------------------------------------|------------|----------------------------------|
| `NAME[:TAG]`, `NS/NAME[:TAG]`      | registry   | registry.ollama.ai/NS/NAME/TAG   |
| `HOST[:PORT]/NS/NAME[:TAG]`        | registry   | HOST[:PORT]/NS/NAME/TAG          |
| `hf.co/OWNER/REPO[:QUANT]`         | huggingface| hf.co/OWNER/REPO/QUANT           |
| `https://…/FILE.gguf`, a file path | url, file  | the URL, the absolute path       |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from llamay.errors import ModelNotFound

DEFAULT_REGISTRY = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
HF_HOST = "hf.co"
DEFAULT_QUANT = "Q4_K_M"

# One path component each: these become directory names, so nothing like `..` gets through.
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?")
_HF_PREFIXES = ("hf.co/", "huggingface.co/")


@dataclass(frozen=True)
class ModelName:
    """A parsed name. Registry and Hugging Face names have host/namespace/model/tag; URL and file
    names have only `source` (the URL, or the absolute path)."""

    kind: str  # "registry" | "huggingface" | "url" | "file"
    host: str = ""
    namespace: str = ""
    model: str = ""
    tag: str = ""
    scheme: str = "https"
    source: str = ""

    def __str__(self) -> str:
        if self.kind in ("url", "file"):
            return self.source
        if self.kind == "huggingface":
            return f"{HF_HOST}/{self.namespace}/{self.model}:{self.tag}"
        if self.host == DEFAULT_REGISTRY:
            if self.namespace == DEFAULT_NAMESPACE:
                return f"{self.model}:{self.tag}"
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    @property
    def key(self) -> tuple[str, ...]:
        """The path components of the name's manifest under manifests/."""
        if self.kind in ("url", "file"):
            return (f"_{self.kind}s", _quote(self.source))
        return (self.host, self.namespace, self.model, self.tag)

    @property
    def custom_host(self) -> bool:
        """Named with an explicit HOST[:PORT] (the only names `--insecure` applies to)."""
        return self.kind == "registry" and self.host != DEFAULT_REGISTRY


def looks_like_path(text: str) -> bool:
    """Whether `text` is written as a file path (`/…`, `./…`, `~/…`, `….gguf`), by its spelling
    alone: nothing is looked up on disk."""
    text = text.strip()
    if re.match(r"(?i)https?://", text):
        return False
    return text.lower().endswith(".gguf") or text.startswith(("/", ".", "~"))


def parse(text: str) -> ModelName:
    """Parse a pull name; ModelNotFound says what is wrong with one that cannot be a name.

    By its spelling alone: a path is a name written as one (looks_like_path), whether or not
    the file exists (`llamay pull` makes a bare file name in the working directory a path
    first). Every part of the name must fit in a file name (255 bytes): names become paths."""
    _check_text(text)
    text = text.strip()
    if re.match(r"(?i)https?://", text):
        parts = urlsplit(text)
        if parts.path.lower().endswith(".gguf"):
            return _fits(ModelName("url", source=text), text)
        return _registry(parts.netloc + parts.path, text, scheme=parts.scheme.lower())
    lowered = text.lower()
    for prefix in _HF_PREFIXES:
        if lowered.startswith(prefix):
            return _huggingface(text[len(prefix) :], text)
    if looks_like_path(text):
        try:
            path = Path(text).expanduser()
        except RuntimeError:  # ~user of a user that does not exist
            raise ModelNotFound(
                f"{text}: no such file (no user {text[1:].split('/')[0]!r})"
            ) from None
        return _fits(ModelName("file", source=str(path.resolve())), text)
    return _fits(_registry(text, text, scheme="https"), text)


# The longest name accepted at all, before it is parsed: far more than a URL or path needs.
_MAX_NAME = 4096
# Each part of a name is a file or folder name (NAME_MAX, 255 bytes), and the temporary file a
# manifest is written through adds some 30 bytes to it.
_MAX_PART_BYTES = 220


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ModelNotFound("a model name must be a non-empty string")
    if len(text) > _MAX_NAME:
        raise ModelNotFound(f"{text[:60]}...: a model name is at most {_MAX_NAME} characters")
    if "\x00" in text:
        raise ModelNotFound(f"{text[:60]!r}: a model name cannot contain a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ModelNotFound(f"{text[:60]!r}: a model name must be Unicode text") from None


def _fits(name: ModelName, original: str) -> ModelName:
    """`name`, if each part of the path its manifest gets fits in a file name."""
    for part in name.key:
        if len(part.encode()) > _MAX_PART_BYTES:
            raise ModelNotFound(
                f"{original[:80]}...: too long to be stored (each part of a name, and a URL or "
                f"a path once escaped, is at most {_MAX_PART_BYTES} bytes)"
            )
    return name


def from_key(key: tuple[str, ...]) -> ModelName:
    """The name stored under manifests/KEY (the inverse of ModelName.key)."""
    if len(key) == 2 and key[0] in ("_urls", "_files"):
        return ModelName(key[0][1:-1], source=_unquote(key[1]))
    host, namespace, model, tag = key
    kind = "huggingface" if host == HF_HOST else "registry"
    return ModelName(kind, host, namespace, model, tag)


def _registry(text: str, original: str, *, scheme: str) -> ModelName:
    path, tag = _split_tag(text, DEFAULT_TAG)
    parts = path.split("/")
    if len(parts) == 2 and _looks_like_host(parts[0]):
        parts = [parts[0], DEFAULT_NAMESPACE, parts[1]]
    if len(parts) == 1:
        parts = [DEFAULT_REGISTRY, DEFAULT_NAMESPACE, *parts]
    elif len(parts) == 2:
        parts = [DEFAULT_REGISTRY, *parts]
    if len(parts) != 3:
        raise ModelNotFound(
            f"{original}: not a model name (NAME[:TAG], NS/NAME[:TAG], HOST[:PORT]/NS/NAME[:TAG], "
            "hf.co/OWNER/REPO[:QUANT], a URL of a .gguf file or a path)"
        )
    host, namespace, model = parts
    if not _HOST.fullmatch(host):
        raise ModelNotFound(f"{original}: {host!r} is not a registry host")
    _check_parts(original, namespace, model, tag)
    return ModelName("registry", host.lower(), namespace, model, tag, scheme=scheme)


def _huggingface(text: str, original: str) -> ModelName:
    path, quant = _split_tag(text, DEFAULT_QUANT)
    parts = path.split("/")
    if len(parts) != 2:
        raise ModelNotFound(f"{original}: a Hugging Face name is hf.co/OWNER/REPO[:QUANT]")
    _check_parts(original, *parts, quant)
    return ModelName("huggingface", HF_HOST, parts[0], parts[1], quant.upper())


def _split_tag(text: str, default: str) -> tuple[str, str]:
    """`a/b:tag` -> (`a/b`, `tag`); a colon before the last slash is a port, not a tag."""
    head, colon, tail = text.rpartition(":")
    if colon and "/" not in tail:
        return head, tail
    return text, default


def _looks_like_host(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def _check_parts(original: str, *parts: str) -> None:
    for part in parts:
        if not _PART.fullmatch(part):
            raise ModelNotFound(
                f"{original}: {part!r} is not a valid name part (letters, digits, '.', '_', '-')"
            )


def _quote(source: str) -> str:
    """A URL or path as one file name, reversibly: '%' and '/' escaped."""
    return source.replace("%", "%25").replace("/", "%2F")


def _unquote(name: str) -> str:
    return name.replace("%2F", "/").replace("%25", "%")
