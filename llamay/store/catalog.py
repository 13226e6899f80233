"""What the store holds, by name: list, describe, copy, remove, create."""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from llamay import gguf
from llamay.errors import LlamayError, ModelNotFound
from llamay.paths import llamay_home
from llamay.store import manifests
from llamay.store.blobs import blob_path, has_blob, import_file, put_bytes
from llamay.store.builtin import PACKAGED, PackagedModel, packaged_model_path
from llamay.store.locks import locked, store_lock
from llamay.store.manifests import LICENSE, MODEL, PARAMS, SYSTEM, TEMPLATE
from llamay.store.names import ModelName, parse

# llama.cpp's `general.file_type` values, as quantization labels.
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
}  # fmt: skip


@dataclass(frozen=True)
class ModelEntry:
    """A model in the store. `params`, `template`, `system`, `license` come from the Ollama
    layers of those types (a registry model's defaults; {} / None when it has none). `builtin`:
    the packaged model a built-in name that no manifest names stands for."""

    name: str
    path: Path  # the GGUF file
    size: int  # bytes, all layers
    family: str | None  # general.architecture
    quant: str | None  # Q4_K_M, F16...
    modified: datetime
    digest: str  # sha256 of the manifest, as Ollama reports it
    params: dict = field(default_factory=dict)
    template: str | None = None
    system: str | None = None
    license: str | None = None
    manifest: dict = field(default_factory=dict)
    builtin: PackagedModel | None = None


def list_models() -> list[ModelEntry]:
    """Every stored model, by name."""
    entries = []
    for name in manifests.stored_names():
        raw = manifests.read_manifest(name)
        if raw is not None:
            entries.append(_entry(name, raw))
    return sorted(entries, key=lambda entry: entry.name)


def builtin_models() -> list[ModelEntry]:
    """The built-in names that no manifest names and that load here (PackagedModel.loadable),
    described without assembling the file: `llamay ls` lists them beside the stored models."""
    entries = []
    for name, packaged in sorted(PACKAGED.items()):
        parsed = parse(name)
        if manifests.read_manifest(parsed) is not None or not packaged.loadable():
            continue
        raw = manifests.make_manifest([(MODEL, f"sha256:{packaged.sha256}", packaged.size)])
        entries.append(
            ModelEntry(
                name=str(parsed),
                path=packaged.path,
                size=packaged.size,
                family=packaged.family,
                quant=packaged.quant,
                modified=datetime.fromtimestamp(_made(packaged), tz=timezone.utc),
                digest=f"sha256:{hashlib.sha256(raw).hexdigest()}",
                manifest=json.loads(raw),
                builtin=packaged,
            )
        )
    return entries


def _made(packaged: PackagedModel) -> float:
    """When a built-in model's file was assembled, or else its packages installed."""
    try:
        made = packaged.path if packaged.assembled() else packaged.chunk_paths()[0]
        return made.stat().st_mtime
    except (OSError, ModelNotFound):
        return 0.0


def model_info(model: str) -> ModelEntry:
    """The stored model `model` names (a built-in name resolves even before it is pulled)."""
    name = parse(model)
    raw = manifests.read_manifest(name)
    if raw is not None:
        return _entry(name, raw)
    packaged = builtin_model(name)
    if packaged is not None:
        path = packaged_model_path(packaged)
        layers = [(MODEL, f"sha256:{packaged.sha256}", packaged.size)]
        return _entry(name, manifests.make_manifest(layers), modified=path.stat().st_mtime)
    raise _not_found(model)


def model_path(model: str) -> Path:
    """The GGUF file of a stored (or built-in) name, without describing the rest."""
    name = parse(model)
    raw = manifests.read_manifest(name)
    if raw is not None:
        return blob_path(manifests.model_layer(json.loads(raw))["digest"])
    packaged = builtin_model(name)
    if packaged is not None:
        return packaged_model_path(packaged)
    raise _not_found(model)


def remove(model: str) -> None:
    """Forget `model` and delete the blobs no other name uses."""
    name = parse(model)
    with locked(f"name:{name.key}"):
        raw = manifests.read_manifest(name)
        if raw is None:
            raise ModelNotFound(f"{model}: no such model in the store ({llamay_home()})")
        manifests.delete_manifest(name)
    delete_unused(blob["digest"] for blob in manifests.layers_of(json.loads(raw)))


def delete_unused(digests: Iterable[str]) -> None:
    """Delete the blobs among `digests` that no stored name references. A built-in model's
    file stays: the built-in name needs it with or without a manifest."""
    in_use = {f"sha256:{model.sha256}" for model in PACKAGED.values()}
    for other in manifests.stored_names():
        raw = manifests.read_manifest(other)
        if raw is not None:
            in_use.update(blob["digest"] for blob in manifests.layers_of(json.loads(raw)))
    for digest in set(digests) - in_use:
        blob_path(digest).unlink(missing_ok=True)


def copy(source: str, destination: str) -> ModelEntry:
    """Store `source`'s model under the name `destination` too (no blob is copied)."""
    raw = manifests.read_manifest(parse(source))
    if raw is None:
        raw = _manifest_bytes(model_info(source))
    name = parse(destination)
    with locked(f"name:{name.key}"):
        return store_manifest(name, raw)


def create(
    model: str,
    *,
    from_: str | None = None,
    model_digest: str | None = None,
    template: str | None = None,
    system: str | None = None,
    params: dict | None = None,
    license: str | None = None,
) -> ModelEntry:
    """Store a model named `model`: the layers of `from_` (a stored name or a GGUF path) or the
    GGUF blob `model_digest` (see import_blob), with the given layers replacing theirs. Given
    both, `from_` (a stored name) gives the layers and `model_digest` the model: a quantized
    copy keeps its source's template and parameters."""
    if from_ is None and model_digest is None:
        raise LlamayError("create needs from_ (a model) or model_digest (a blob), or both")
    with store_lock(exclusive=False):  # what it stores stays until the manifest names it
        return _create(model, from_, model_digest, template, system, params, license)


def _create(
    model: str,
    from_: str | None,
    model_digest: str | None,
    template: str | None,
    system: str | None,
    params: dict | None,
    license: str | None,
) -> ModelEntry:
    layers = {}
    if from_ is not None and not Path(from_).expanduser().is_file():
        base = model_info(from_).manifest
        layers = {layer["mediaType"]: (layer["digest"], layer["size"]) for layer in base["layers"]}
    if model_digest is not None:
        if not has_blob(model_digest):
            raise ModelNotFound(f"blob {model_digest} is not in the store; upload it first")
        layers[MODEL] = (model_digest, blob_path(model_digest).stat().st_size)
    elif not layers:
        path = Path(from_).expanduser()
        layers = {MODEL: (import_file(path), path.stat().st_size)}
    texts = {TEMPLATE: template, SYSTEM: system, LICENSE: license}
    if params is not None:
        texts[PARAMS] = json.dumps(params)
    for media, text in texts.items():
        if text is not None:
            data = text.encode()
            layers[media] = (put_bytes(data), len(data))
    raw = manifests.make_manifest([(media, *layer) for media, layer in layers.items()])
    name = parse(model)
    with locked(f"name:{name.key}"):
        return store_manifest(name, raw)


def store_manifest(name: ModelName, raw: bytes) -> ModelEntry:
    """Give `name` the manifest `raw`, whose blobs are all stored; the caller holds the name's
    lock. Refuses a model layer that is not a GGUF file."""
    manifest = manifests.parse_manifest(raw, str(name))
    describe(manifests.model_layer(manifest)["digest"])
    manifests.write_manifest(name, raw)
    return _entry(name, raw)


def _entry(name: ModelName, raw: bytes, modified: float | None = None) -> ModelEntry:
    manifest = json.loads(raw)
    layers = {layer["mediaType"]: layer for layer in manifest["layers"]}
    model = layers[MODEL]
    try:
        family, quant = describe(model["digest"])
    except LlamayError:  # a blob deleted or damaged behind the store's back: still listed, to rm
        family, quant = None, None

    def text(media: str) -> str | None:
        path = blob_path(layers[media]["digest"]) if media in layers else None
        return path.read_text() if path is not None and path.is_file() else None

    params = json.loads(text(PARAMS) or "{}")
    if modified is None:
        modified = manifests.manifest_path(name).stat().st_mtime
    return ModelEntry(
        name=str(name),
        path=blob_path(model["digest"]),
        size=sum(blob["size"] for blob in manifests.layers_of(manifest)),
        family=family,
        quant=quant,
        modified=datetime.fromtimestamp(modified, tz=timezone.utc),
        digest=f"sha256:{hashlib.sha256(raw).hexdigest()}",
        params=params if isinstance(params, dict) else {},
        template=text(TEMPLATE),
        system=text(SYSTEM),
        license=text(LICENSE),
        manifest=manifest,
    )


@functools.lru_cache(maxsize=256)
def describe(digest: str) -> tuple[str | None, str | None]:
    """(family, quantization) of GGUF blob `digest`. Blobs never change, so this is cached."""
    gg = gguf.read(blob_path(digest))
    family = gg.metadata.get("general.architecture")
    quant = _FILE_TYPES.get(gg.metadata.get("general.file_type"))
    if quant is None:
        # No file type recorded: name it after the commonest type among the weight matrices.
        types = Counter(t.type for t in gg.tensors.values() if len(t.shape) >= 2)
        quant = types.most_common(1)[0][0] if types else None
    return family, quant


def builtin_model(name: ModelName) -> PackagedModel | None:
    """The built-in model `name` is, if it is one."""
    for builtin_name, packaged in PACKAGED.items():
        if parse(builtin_name) == name:
            return packaged
    return None


def _manifest_bytes(entry: ModelEntry) -> bytes:
    return json.dumps(entry.manifest, indent=2).encode()


def _not_found(model: str) -> ModelNotFound:
    known = ", ".join(sorted(PACKAGED))
    return ModelNotFound(
        f"{model}: not a file and not a model in the store ({llamay_home()}); "
        f"pull it with `llamay pull {model}` (built-in names: {known})"
    )
