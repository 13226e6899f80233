"""Manifests: a name's list of layers (Ollama's v2 manifest JSON), at manifests/<name key>.

Registry pulls keep the registry's manifest byte for byte; Hugging Face, URL and local pulls get
one of the same shape, made here.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from llamay.errors import PullError
from llamay.paths import write_atomically
from llamay.store.blobs import check_digest
from llamay.store.names import ModelName, from_key
from llamay.store.paths import manifests_dir

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
MODEL = "application/vnd.ollama.image.model"
TEMPLATE = "application/vnd.ollama.image.template"
PARAMS = "application/vnd.ollama.image.params"
SYSTEM = "application/vnd.ollama.image.system"
LICENSE = "application/vnd.ollama.image.license"


def manifest_path(name: ModelName) -> Path:
    return manifests_dir().joinpath(*name.key)


def parse_manifest(raw: bytes, what: str) -> dict:
    """The manifest JSON, checked: layers with sha256 digests and sizes, exactly one GGUF layer."""
    try:
        manifest = json.loads(raw)
        blobs = [*layers_of(manifest)]
        for blob in blobs:
            check_digest(blob["digest"])
            if not isinstance(blob.get("size"), int) or blob["size"] < 0:
                raise ValueError
    except (ValueError, TypeError, KeyError, AttributeError, PullError):
        raise PullError(
            f"{what}: the registry sent a manifest that is not a valid v2 manifest"
        ) from None
    models = [layer for layer in manifest["layers"] if layer.get("mediaType") == MODEL]
    if len(models) != 1:
        raise PullError(f"{what}: the manifest has {len(models)} model layers, expected one")
    return manifest


def layers_of(manifest: dict) -> list[dict]:
    """Every blob a manifest references: its config (if any), then its layers."""
    config = manifest.get("config")
    return ([config] if config else []) + list(manifest["layers"])


def model_layer(manifest: dict) -> dict:
    return next(layer for layer in manifest["layers"] if layer["mediaType"] == MODEL)


def make_manifest(layers: list[tuple[str, str, int]]) -> bytes:
    """A v2 manifest for (media type, digest, size) layers."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "layers": [
            {"mediaType": media, "digest": digest, "size": size} for media, digest, size in layers
        ],
    }
    return json.dumps(manifest, indent=2).encode()


def write_manifest(name: ModelName, raw: bytes) -> None:
    write_atomically(manifest_path(name), lambda out: out.write(raw))


def read_manifest(name: ModelName) -> bytes | None:
    try:
        return manifest_path(name).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def stored_names() -> list[ModelName]:
    """Every name with a manifest."""
    root = manifests_dir()
    if not root.is_dir():
        return []
    names = []
    for path in root.rglob("*"):
        key = path.relative_to(root).parts
        if path.is_file() and not path.name.startswith(".") and len(key) in (2, 4):
            with contextlib.suppress(ValueError):
                names.append(from_key(key))
    return names


def delete_manifest(name: ModelName) -> None:
    path = manifest_path(name)
    path.unlink()
    # Leave no empty directories behind (rmdir refuses a directory that is not empty).
    for parent in path.parents:
        if parent == manifests_dir():
            break
        try:
            parent.rmdir()
        except OSError:
            break
