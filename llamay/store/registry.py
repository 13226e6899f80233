"""Pulling from an Ollama-protocol registry (the Docker registry v2 API with Ollama media types)."""

from __future__ import annotations

from llamay.store.download import Fetcher
from llamay.store.manifests import MANIFEST_TYPE, OCI_MANIFEST_TYPE, layers_of, parse_manifest
from llamay.store.names import ModelName


def pull_registry(name: ModelName, fetcher: Fetcher, *, insecure: bool) -> bytes:
    """Download every blob of `name`'s manifest into the store; returns the manifest's bytes."""
    scheme = "http" if insecure else name.scheme
    base = f"{scheme}://{name.host}/v2/{name.namespace}/{name.model}"
    fetcher.progress({"status": "pulling manifest"})
    accept = f"{MANIFEST_TYPE}, {OCI_MANIFEST_TYPE}"
    response = fetcher.request("GET", f"{base}/manifests/{name.tag}", headers={"Accept": accept})
    manifest = parse_manifest(response.content, str(name))
    for blob in layers_of(manifest):
        fetcher.blob(f"{base}/blobs/{blob['digest']}", digest=blob["digest"], size=blob["size"])
    return response.content
