"""HTTP for pulls: one httpx client that answers bearer challenges, and resumable, verified blob
downloads.

A download goes to blobs/<key>.partial (key: the digest when it is known, else a hash of the URL),
so a later pull finds the bytes an interrupted one left and asks for the rest (`Range`, guarded by
`If-Range` with the validator the server gave the first time, kept beside the partial file).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from llamay.errors import PullError
from llamay.store.blobs import commit, has_blob, space_explained
from llamay.store.locks import locked
from llamay.store.paths import blobs_dir

Progress = Callable[[dict], None]

# A download that keeps failing without a new byte gives up after this many tries; the waits
# between tries double from BACKOFF_S.
ATTEMPTS = 4
BACKOFF_S = 0.25
_SHA256 = re.compile(r'(?:W/)?"?([0-9a-f]{64})"?')
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


def sha256_etag(headers: httpx.Headers) -> str | None:
    """The sha256 digest a server names in `X-Linked-Etag` (Hugging Face's LFS files) or `ETag`."""
    for header in ("x-linked-etag", "etag"):
        match = _SHA256.fullmatch(headers.get(header, "").strip())
        if match:
            return f"sha256:{match.group(1)}"
    return None


class Fetcher:
    """The HTTP side of one pull; `what` (the name) starts its error messages.

    `token`: sent as `Authorization: Bearer` (Hugging Face's HF_TOKEN). A 401 carrying a
    `WWW-Authenticate: Bearer realm=...` challenge (the Ollama/Docker registry protocol) is
    answered by fetching a token from the realm and retrying; `auth_hint` ends the error when the
    server refuses anyway. `progress` gets Ollama's pull events; `committed` collects the digests
    of the blobs stored.
    """

    def __init__(
        self,
        what: str,
        *,
        token: str | None = None,
        auth_hint: str = "",
        progress: Progress | None = None,
        committed: list[str] | None = None,
    ) -> None:
        self.what = what
        self.committed = committed if committed is not None else []  # digests this pull stored
        self.auth_hint = auth_hint
        self.progress = progress or (lambda event: None)
        self.client = httpx.Client(
            follow_redirects=True,
            timeout=httpx.Timeout(30.0, read=60.0),  # a stall this long counts as a drop
            headers={"User-Agent": "llamay"},
        )
        self._token = token

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- plain requests ------------------------------------------------------------------------

    def request(self, method: str, url: str, headers: dict | None = None) -> httpx.Response:
        """A whole response (status checked), after a bearer challenge if the server makes one."""
        with self._connection_errors(url):
            response = self._send(method, url, headers or {}, stream=False)
        self.check(response, url)
        return response

    def probe(self, url: str) -> tuple[str | None, int | None]:
        """(sha256 digest, size) of the file at `url`, as a HEAD request tells them; None where
        it does not. Hugging Face puts both on its redirect (`X-Linked-Etag`, `X-Linked-Size`),
        whose target may refuse a HEAD (a URL signed for GET): only same-host redirects are
        followed, and only while the digest is still unknown."""
        digest = size = None
        for _ in range(5):
            with self._connection_errors(url):
                response = self._send("HEAD", url, {}, stream=False, follow=False)
            if response.status_code in (405, 501):  # no HEAD here: the GET will tell
                break
            self.check(response, url)
            digest = digest or sha256_etag(response.headers)
            for header in ("x-linked-size", "content-length"):
                if size is None and response.headers.get(header, "").isdigit():
                    size = int(response.headers[header])
            target = response.next_request
            if digest or target is None or target.url.netloc != httpx.URL(url).netloc:
                break
            url = str(target.url)
        return digest, size

    def check(self, response: httpx.Response, url: str) -> None:
        status = response.status_code
        if status < 400:
            return
        if status == 404:
            raise PullError(f"{self.what}: not found ({url} answered 404)")
        if status in (401, 403):
            hint = f"; {self.auth_hint}" if self.auth_hint else ""
            raise PullError(f"{self.what}: access denied ({url} answered {status}){hint}")
        raise PullError(f"{self.what}: {url} answered {status} {response.reason_phrase}")

    def _send(
        self, method: str, url: str, headers: dict, *, stream: bool, follow: bool = True
    ) -> httpx.Response:
        response = self._once(method, url, headers, stream=stream, follow=follow)
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 401 and challenge.lower().startswith("bearer "):
            response.close()
            self._token = self._answer(challenge, url)
            response = self._once(method, url, headers, stream=stream, follow=follow)
        return response

    def _once(
        self, method: str, url: str, headers: dict, *, stream: bool, follow: bool
    ) -> httpx.Response:
        if self._token:
            headers = {**headers, "Authorization": f"Bearer {self._token}"}
        request = self.client.build_request(method, url, headers=headers)
        return self.client.send(request, stream=stream, follow_redirects=follow)

    def _answer(self, challenge: str, url: str) -> str:
        """A token from the challenge's realm (`realm`, `service`, `scope`, as Docker specifies)."""
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = params.pop("realm", None)
        if not realm:
            raise PullError(f"{self.what}: {url} asked for a token without naming where to get one")
        response = self.client.get(realm, params=params)
        self.check(response, realm)
        try:
            body = response.json()
            return body.get("token") or body["access_token"]
        except (ValueError, KeyError, AttributeError):
            raise PullError(f"{self.what}: {realm} answered without a token") from None

    @contextlib.contextmanager
    def _connection_errors(self, url: str):
        try:
            yield
        except httpx.TransportError as exc:
            hint = ""
            if url.startswith("https://") and "SSL" in str(exc):
                hint = " (a registry that speaks plain http needs --insecure)"
            raise PullError(f"{self.what}: cannot reach {_host(url)}: {exc}{hint}") from None

    # --- blobs ---------------------------------------------------------------------------------

    def blob(self, url: str, *, digest: str | None = None, size: int | None = None) -> str:
        """Download `url` into the store unless blob `digest` is there already; returns the digest.

        The bytes are verified against `digest`, or else against a sha256 the server names in its
        ETag; without either they are stored under the digest they hash to.
        """
        label = f"pulling {digest[7:19]}" if digest else f"pulling {_file_name(url)}"
        if digest and has_blob(digest):
            self.progress({"status": label, "digest": digest, "total": size, "completed": size})
            return digest
        key = (
            digest.replace(":", "-")
            if digest
            else "url-" + hashlib.sha256(url.encode()).hexdigest()
        )
        with locked(key):
            if digest and has_blob(digest):  # another pull stored it while this one waited
                return digest
            partial = blobs_dir() / f"{key}.partial"
            announced = self._download(url, partial, size, label, digest)
            self.progress({"status": "verifying sha256 digest"})
            try:
                actual = commit(partial, digest or announced, f"{self.what} ({_file_name(url)})")
                self.committed.append(actual)
            finally:
                _validator_path(partial).unlink(missing_ok=True)
        self.progress({"status": label, "digest": actual, "total": size, "completed": size})
        return actual

    def _download(
        self, url: str, partial: Path, size: int | None, label: str, digest: str | None
    ) -> str | None:
        """Fill `partial` with the whole body of `url`, resuming and retrying; returns the sha256
        the server announced in its ETag, if it did."""
        failures = 0
        while True:
            have = partial.stat().st_size if partial.exists() else 0
            try:
                return self._fetch_rest(url, partial, have, size, label, digest)
            except (httpx.TransportError, _ServerBusy) as exc:
                kept = partial.stat().st_size if partial.exists() else 0
                failures = 0 if kept > have else failures + 1
                if failures >= ATTEMPTS:
                    raise PullError(
                        f"{self.what}: the download from {_host(url)} kept failing ({exc}); "
                        f"{kept} bytes are kept, pull again to resume"
                    ) from None
                time.sleep(BACKOFF_S * 2 ** (failures - 1 if failures else 0))

    def _fetch_rest(
        self, url: str, partial: Path, have: int, size: int | None, label: str, digest: str | None
    ) -> str | None:
        headers = {}
        validator = _validator_path(partial)
        if have:
            headers["Range"] = f"bytes={have}-"
            if validator.exists():
                headers["If-Range"] = validator.read_text()
            elif digest is None:
                # Nothing to tell the old bytes belong to the same file: start over.
                headers.pop("Range")
                have = 0
        response = self._send("GET", url, headers, stream=True)
        try:
            if response.status_code == 416:  # the partial file is not a prefix of this one
                partial.unlink()
                raise _ServerBusy("the kept bytes did not fit the file; starting over")
            if response.status_code >= 500:
                raise _ServerBusy(f"{url} answered {response.status_code}")
            self.check(response, url)
            if response.status_code == 206 and not _range_starts_at(response, have):
                partial.unlink(missing_ok=True)
                raise _ServerBusy("the server sent another range than asked; starting over")
            if response.status_code != 206:
                have = 0  # a whole body: the server ignored the range, or the file changed
            total = _total(response, have) or size
            if total is not None and total - have > shutil.disk_usage(partial.parent).free:
                raise PullError(
                    f"{self.what}: needs {total - have} bytes but {partial.parent} has "
                    f"{shutil.disk_usage(partial.parent).free} free; free some space and pull again"
                )
            tag = response.headers.get("etag") or response.headers.get("last-modified")
            if tag and not tag.startswith("W/"):
                validator.write_text(tag)
            announced = sha256_etag(response.headers) or next(
                (sha256_etag(r.headers) for r in response.history if sha256_etag(r.headers)), None
            )
            self._write(response, partial, have, total, label, digest or announced)
            expected = size or total
            if expected is not None and partial.stat().st_size < expected:
                # A body with no length to hold it to, cut short: resume it like any other drop.
                raise _ServerBusy(f"{_host(url)} closed the connection early")
            return announced
        except PullError:
            if partial.exists() and not partial.stat().st_size:
                partial.unlink()
            raise
        finally:
            response.close()

    def _write(
        self,
        response: httpx.Response,
        partial: Path,
        have: int,
        total: int | None,
        label: str,
        digest: str | None,
    ) -> None:
        event = {"status": label, "digest": digest, "total": total, "completed": have}
        self.progress(event)
        try:
            with space_explained(partial), open(partial, "r+b" if have else "wb") as out:
                out.seek(have)
                out.truncate()
                for chunk in response.iter_bytes():
                    out.write(chunk)
                    event["completed"] += len(chunk)
                    self.progress(dict(event))
        except PullError:  # no space: these bytes are no use to anyone
            partial.unlink(missing_ok=True)
            _validator_path(partial).unlink(missing_ok=True)
            raise


class _ServerBusy(Exception):
    """A failure worth another try (a 5xx, a range that no longer fits)."""


def _validator_path(partial: Path) -> Path:
    return partial.with_name(partial.name + ".validator")


def _range_starts_at(response: httpx.Response, offset: int) -> bool:
    match = re.match(r"bytes (\d+)-", response.headers.get("content-range", ""))
    return bool(match) and int(match.group(1)) == offset


def _total(response: httpx.Response, have: int) -> int | None:
    match = re.match(r"bytes \d+-\d+/(\d+)", response.headers.get("content-range", ""))
    if response.status_code == 206 and match:
        return int(match.group(1))
    length = response.headers.get("content-length")
    return have + int(length) if length and length.isdigit() else None


def _host(url: str) -> str:
    return urlsplit(url).netloc


def _file_name(url: str) -> str:
    return urlsplit(url).path.rsplit("/", 1)[-1]
