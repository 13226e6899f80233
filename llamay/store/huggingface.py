"""Pulling a GGUF file from a Hugging Face repository: pick the file by its quantization label."""

from __future__ import annotations

import os
import re
from urllib.parse import quote

from llamay.errors import PullError
from llamay.store.download import Fetcher, Progress
from llamay.store.names import ModelName

DEFAULT_ENDPOINT = "https://huggingface.co"

# A quantization label in a file name (`gemma-3-270m-it-Q4_K_M.gguf`, `model.q8_0.gguf`,
# `ggml-model-f16.gguf`): the last one, set off by '-', '_' or '.'.
_LABEL = re.compile(r"(?i)(?<![A-Za-z0-9])(I?Q[0-9]+(?:_[A-Z0-9]+)*|BF16|F16|F32)(?=[-_.]|$)")
# Pieces of a split model and vision projectors are not models of their own.
_NOT_A_MODEL = re.compile(r"(?i)-\d{5}-of-\d{5}\.gguf$|mmproj")


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT


def hf_fetcher(name: ModelName, progress: Progress, committed: list[str]) -> Fetcher:
    token = os.environ.get("HF_TOKEN") or None
    hint = (
        "HF_TOKEN was refused" if token else "set HF_TOKEN to a token that can read the repository"
    )
    return Fetcher(str(name), token=token, auth_hint=hint, progress=progress, committed=committed)


def pull_huggingface(name: ModelName, fetcher: Fetcher) -> str:
    """Download the repository's GGUF file of the named quantization; returns its digest."""
    repo = f"{name.namespace}/{name.model}"
    fetcher.progress({"status": "pulling manifest"})
    files = _gguf_files(repo, fetcher)
    labels = {file: label for file in files if (label := quant_label(file))}
    matches = sorted((f for f, label in labels.items() if label == name.tag), key=len)
    if not matches:
        have = ", ".join(sorted(set(labels.values()))) or "none"
        raise PullError(f"{name}: {repo} has no {name.tag} GGUF file; its quantizations: {have}")
    url = f"{endpoint().rstrip('/')}/{repo}/resolve/main/{quote(matches[0])}"
    digest, size = fetcher.probe(url)
    return fetcher.blob(url, digest=digest, size=size)


def quant_label(file_name: str) -> str | None:
    """The quantization label of a GGUF file name, upper-cased; None if it has none."""
    if not file_name.lower().endswith(".gguf") or _NOT_A_MODEL.search(file_name):
        return None
    stem = file_name.rsplit("/", 1)[-1][: -len(".gguf")]
    labels = _LABEL.findall(stem)
    return labels[-1].upper() if labels else None


def _gguf_files(repo: str, fetcher: Fetcher) -> list[str]:
    """The repository's file names: the model API's `siblings`, or its file tree."""
    base = f"{endpoint().rstrip('/')}/api/models/{repo}"
    try:
        info = fetcher.request("GET", base).json()
        return [s["rfilename"] for s in info["siblings"]]
    except (PullError, ValueError, KeyError, TypeError) as exc:
        try:
            tree = fetcher.request("GET", f"{base}/tree/main?recursive=true").json()
            return [entry["path"] for entry in tree if entry.get("type", "file") == "file"]
        except (PullError, ValueError, KeyError, TypeError):
            if isinstance(exc, PullError):
                raise exc from None
            raise PullError(f"{repo}: {base} did not list the repository's files") from None
