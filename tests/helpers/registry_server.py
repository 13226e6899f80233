"""A real model registry on loopback for the pull tests: the Ollama v2 layout and the Hugging Face
layout, served from files, with Range requests, a bearer-token challenge and failure modes.

    with RegistryServer(tmp_path / "registry") as server:
        server.add_ollama("library", "tiny", "1", {MODEL: gguf_bytes, PARAMS: b'{"stop": ["x"]}'})
        server.add_hf("owner", "repo", "tiny-Q4_K_M.gguf", gguf_bytes)
        server.host      # "127.0.0.1:PORT" (pull `{server.host}/library/tiny:1 --insecure`)
        server.endpoint  # "http://127.0.0.1:PORT" (for HF_ENDPOINT)

Modes: `server.drop_blobs = n` makes the next n responses with a file of SPOILABLE_BYTES or more
stop at the middle of the file and close the connection (a retry from there gets nothing before
the close); `server.wrong_bytes = True` serves every such file with one byte changed (same
length, same headers); `server.require_token = True` answers registry requests without the token
with Docker's 401 bearer challenge (`server.refuse_tokens = True`: and refuses to hand one out);
`server.hf_token = "..."` makes the Hugging Face routes demand it; `server.hf_siblings = False`
lists a repository's files only at /api/models/OWNER/REPO/tree/main; `server.answer_head = False`
answers every HEAD request with 501; `server.omit_length = True` sends files with no
Content-Length, ending each body by closing the connection (so a drop looks like a clean end).
`server.requests` records (method, path, headers) of every request, in order.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
TOKEN = "registry-token-123"
# Files at least this big (model layers, not the few bytes of a config or template) are the ones
# the failure modes spoil.
SPOILABLE_BYTES = 1024


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class RegistryServer:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.drop_blobs = 0
        self.wrong_bytes = False
        self.require_token = False
        self.refuse_tokens = False
        self.hf_token: str | None = None
        self.hf_siblings = True
        self.answer_head = True
        self.omit_length = False
        self._manifests: dict[str, Path] = {}  # "ns/name/tag" -> file
        self._hf: dict[str, dict[str, str]] = {}  # "owner/repo" -> file name -> digest
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._http.server_address[1]}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}"

    def __enter__(self) -> RegistryServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._http.shutdown()
        self._http.server_close()

    # --- content -------------------------------------------------------------------------------

    def add_blob(self, data: bytes) -> str:
        digest = digest_of(data)
        (self.root / "blobs" / digest.replace(":", "-")).write_bytes(data)
        return digest

    def add_ollama(self, namespace: str, name: str, tag: str, layers: dict[str, bytes]) -> dict:
        """Serve a model whose layers are {media type: bytes}; returns its manifest."""
        config = json.dumps({"model_format": "gguf"}).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "digest": self.add_blob(config),
                "size": len(config),
            },
            "layers": [
                {"mediaType": media, "digest": self.add_blob(data), "size": len(data)}
                for media, data in layers.items()
            ],
        }
        path = self.root / "manifests" / namespace / name / tag
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest))
        self._manifests[f"{namespace}/{name}/{tag}"] = path
        return manifest

    def add_hf(self, owner: str, repo: str, file_name: str, data: bytes) -> str:
        """Serve `file_name` in the Hugging Face repository owner/repo; returns its digest."""
        digest = self.add_blob(data)
        self._hf.setdefault(f"{owner}/{repo}", {})[file_name] = digest
        return digest

    def blob_requests(self) -> list[dict[str, str]]:
        """The headers of every request for file bytes (registry blobs, HF files), in order."""
        return [
            headers
            for method, path, headers in self.requests
            if method == "GET" and ("/blobs/" in path or path.startswith("/cdn/"))
        ]

    # --- serving -------------------------------------------------------------------------------

    def _record(self, method: str, path: str, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append((method, path, headers))

    def _take_drop(self) -> bool:
        with self._lock:
            if self.drop_blobs > 0:
                self.drop_blobs -= 1
                return True
            return False


def _handler(server: RegistryServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self._route("GET")

        def do_HEAD(self) -> None:
            if not server.answer_head:
                return self._error(501)
            return self._route("HEAD")

        def _route(self, method: str) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            server._record(method, path, {k.lower(): v for k, v in self.headers.items()})
            if path == "/token":
                return self._error(401) if server.refuse_tokens else self._json({"token": TOKEN})
            if match := re.fullmatch(r"/v2/([^/]+)/([^/]+)/manifests/([^/]+)", path):
                if self._challenged():
                    return None
                manifest = server._manifests.get("/".join(match.groups()))
                if manifest is None:
                    return self._error(404)
                return self._bytes(manifest.read_bytes(), MANIFEST_TYPE, method)
            if match := re.fullmatch(r"/v2/[^/]+/[^/]+/blobs/(sha256:[0-9a-f]{64})", path):
                if self._challenged():
                    return None
                return self._file(match.group(1), method)
            if match := re.fullmatch(r"/api/models/([^/]+/[^/]+)(/tree/main)?", path):
                files = server._hf.get(match.group(1))
                if not self._hf_allowed():
                    return None
                if files is None:
                    return self._error(404)
                if match.group(2) is None and not server.hf_siblings:
                    return self._error(404)
                if match.group(2):
                    return self._json([{"type": "file", "path": name} for name in files])
                return self._json(
                    {"id": match.group(1), "siblings": [{"rfilename": name} for name in files]}
                )
            if match := re.fullmatch(r"/([^/]+/[^/]+)/resolve/main/(.+)", path):
                if not self._hf_allowed():
                    return None
                digest = server._hf.get(match.group(1), {}).get(match.group(2))
                if digest is None:
                    return self._error(404)
                # As the hub does: a redirect carrying the LFS sha256 and size, then a CDN.
                size = (server.root / "blobs" / digest.replace(":", "-")).stat().st_size
                self.send_response(302)
                self.send_header("Location", f"/cdn/{digest}")
                self.send_header("X-Linked-Etag", f'"{digest[7:]}"')
                self.send_header("X-Linked-Size", str(size))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if match := re.fullmatch(r"/cdn/(sha256:[0-9a-f]{64})", path):
                return self._file(match.group(1), method)
            if match := re.fullmatch(r"/files/(sha256:[0-9a-f]{64})/[^/]+\.gguf", path):
                return self._file(match.group(1), method)
            return self._error(404)

        def _challenged(self) -> bool:
            if not server.require_token or self.headers.get("Authorization") == f"Bearer {TOKEN}":
                return False
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate",
                f'Bearer realm="{server.endpoint}/token",service="test-registry",'
                'scope="repository:library/tiny:pull"',
            )
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def _hf_allowed(self) -> bool:
            if server.hf_token is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {server.hf_token}":
                return True
            self._error(401)
            return False

        def _file(self, digest: str, method: str) -> None:
            path = server.root / "blobs" / digest.replace(":", "-")
            if not path.is_file():
                return self._error(404)
            data = path.read_bytes()
            if server.wrong_bytes and len(data) >= SPOILABLE_BYTES:
                data = data[:-1] + bytes([data[-1] ^ 0xFF])
            etag = f'"{digest[7:]}"'
            start = 0
            range_header = self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            if range_header and (if_range is None or if_range == etag):
                start = int(re.fullmatch(r"bytes=(\d+)-", range_header).group(1))
                if start >= len(data):
                    return self._error(416)
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("ETag", etag)
            self.send_header("Accept-Ranges", "bytes")
            if server.omit_length:
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(len(data) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if method == "HEAD":
                return None
            body = data[start:]
            if len(data) >= SPOILABLE_BYTES and server._take_drop():
                self.wfile.write(body[: max(0, len(data) // 2 - start)])
                self.wfile.flush()
                time.sleep(0.05)  # let the client read the half before the connection goes
                self.close_connection = True
                return None
            self.wfile.write(body)
            return None

        def _bytes(self, data: bytes, content_type: str, method: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(data)

        def _json(self, value) -> None:
            self._bytes(json.dumps(value).encode(), "application/json", "GET")

        def _error(self, status: int) -> None:
            body = json.dumps({"errors": [{"code": str(status)}]}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler
