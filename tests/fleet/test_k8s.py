"""deploy/k8s/llamay.yaml: valid against the Kubernetes schemas (kubernetes-validate, strict:
no unknown field), and saying what docs/deploy.md says: the flags it passes are
`llamay serve`'s, the drain fits in the pod's grace period, sessions are hashed on the header
the nginx config hashes on."""

from __future__ import annotations

from pathlib import Path

import pytest

kubernetes_validate = pytest.importorskip("kubernetes_validate")
yaml = pytest.importorskip("yaml")

from llamay.cli.serve import serve  # noqa: E402 - after the skips

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "deploy" / "k8s" / "llamay.yaml"
NGINX_CONF = REPO / "deploy" / "nginx" / "llamay.conf"


def _documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def _duration(text: str) -> float:
    return float(text[:-1]) if text.endswith("s") else float(text)


def test_every_document_is_valid_for_kubernetes() -> None:
    documents = _documents()
    assert {doc["kind"] for doc in documents} == {
        "PersistentVolumeClaim", "Deployment", "Service", "Ingress"
    }  # fmt: skip
    version = kubernetes_validate.utils.latest_version()
    for doc in documents:
        kubernetes_validate.validate(doc, version, strict=True)


def test_a_broken_document_is_caught() -> None:
    deployment = next(doc for doc in _documents() if doc["kind"] == "Deployment")
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            deployment, kubernetes_validate.utils.latest_version(), strict=True
        )


def test_the_deployment_runs_replicas_as_the_docs_say() -> None:
    deployment = next(doc for doc in _documents() if doc["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert command[:2] == ["llamay", "serve"]
    flags = dict(arg.split("=", 1) for arg in command[2:])
    known = {name for param in serve.params for name in param.opts}
    assert set(flags) <= known, set(flags) - known
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert flags["--state-dir"] == mounts["state"]
    assert flags["--replica-name"] == "$(POD_NAME)"
    assert pod["terminationGracePeriodSeconds"] > _duration(flags["--grace-period"]) + 3

    ingress = next(doc for doc in _documents() if doc["kind"] == "Ingress")
    hashed_on = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert hashed_on == "$http_x_llamay_session"
    assert hashed_on in NGINX_CONF.read_text()
