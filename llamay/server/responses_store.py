"""Stored responses: each one a context of the server's context registry (native.py).

A stored response's context holds the conversation up to and including its output, in KV. A
request with `previous_response_id` forks it (copy-on-write: two requests that continue one
response share its pages) and feeds only the tokens past the longest prefix that the fork
already holds, so it does not compute the conversation again. The registry counts it against
`--max-contexts`, and closes it after `--context-ttl` idle like any other context; it is listed
at `GET /llamay/v1/contexts` under its response id.

Each stored response is also written to `$LLAMAY_HOME/responses/`: `ID.json` (the response
object and its conversation) and `ID.llamay` (the context's snapshot, Context.save). A response
asked for that the registry no longer holds, after a restart, is read from there (its context
restored from the snapshot when it is continued); its files go with DELETE, or once unused for
the TTL.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamay.engine import Model
from llamay.errors import LlamayError
from llamay.paths import llamay_home, write_atomically
from llamay.server.errors import ApiError
from llamay.server.native import ContextRegistry, Entry, fork_idle
from llamay.state import Context

# What a response id looks like (responses_items.item_id): anything else is never a file name.
_ID = re.compile(r"resp_[0-9a-f]{24}")


@dataclass
class Stored:
    """What a stored response keeps besides its KV: the response object, the conversation as
    chat messages through its output (its instructions not included: a continuation gives its
    own), and the name of its model."""

    response: dict[str, Any]
    conversation: list[dict[str, Any]]
    model_name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "response": self.response,
            "conversation": self.conversation,
        }

    @classmethod
    def from_json(cls, data: Any) -> Stored:
        if not isinstance(data, dict) or not isinstance(data.get("response"), dict):
            raise ValueError("not a stored response")
        return cls(data["response"], list(data["conversation"]), str(data["model"]))


class ResponseStore:
    """The stored responses of one server (thread-safe)."""

    def __init__(self, registry: ContextRegistry, folder: Path | None = None) -> None:
        self.registry = registry
        self.folder = folder if folder is not None else llamay_home() / "responses"
        self._restoring = threading.Lock()

    def check_room(self) -> None:
        """429 when the registry is full: asked before a response is generated."""
        self.registry.check_room()

    def put(self, stored: Stored, context: Context) -> None:
        """Keeps `context` as the response's state, in the registry and on disk."""
        response_id = stored.response["id"]
        entry = self.registry.add(stored.model_name, context, entry_id=response_id, meta=stored)
        self._sweep()
        try:
            self._write(entry)
        except OSError:
            # The disk refused: the response lives in memory only, as a native context would.
            self._unlink(response_id)

    def get(self, response_id: str) -> Stored:
        """The stored response `response_id` (404 in OpenAI's words if there is none)."""
        entry = self._entry(response_id)
        if entry is not None:
            return entry.meta
        stored = self._read(response_id)
        self._touch(response_id)
        return stored

    def fork(self, response_id: str, model: Model) -> tuple[Stored, Context]:
        """The response and a fork of its context, restored from its snapshot if the registry
        no longer holds it (after a restart)."""
        entry = self._entry(response_id) or self._restore(response_id, model)
        if entry.context.model is not model:
            raise ApiError(
                400,
                f"response {response_id} was made by {entry.model_name}, another model than "
                "this request's: continue it with its own model",
                "previous_response_id",
            )
        self._touch(response_id)
        return entry.meta, fork_idle(entry)

    def delete(self, response_id: str) -> None:
        entry = self._entry(response_id)
        on_disk = self._files(response_id)[0].exists() if _ID.fullmatch(response_id) else False
        if entry is None and not on_disk:
            raise _missing(response_id)
        if entry is not None:
            with contextlib.suppress(ApiError):  # expired meanwhile: gone all the same
                self.registry.remove(response_id)
                entry.context.close()
        self._unlink(response_id)

    # --- the registry ---

    def _entry(self, response_id: str) -> Entry | None:
        try:
            entry = self.registry.get(response_id)
        except ApiError:
            return None
        return entry if isinstance(entry.meta, Stored) else None

    def _restore(self, response_id: str, model: Model) -> Entry:
        stored = self._read(response_id)
        with self._restoring:  # one restore of a response at a time
            entry = self._entry(response_id)
            if entry is not None:
                return entry
            self.registry.check_room()
            try:
                context = model.restore(self._files(response_id)[1])
            except LlamayError as error:
                raise ApiError(
                    404,
                    f"response {response_id} is stored but its state is not usable on this "
                    f"server ({error}); send the whole conversation as input instead",
                    "previous_response_id",
                ) from None
            return self.registry.add(stored.model_name, context, entry_id=response_id, meta=stored)

    # --- the files ---

    def _files(self, response_id: str) -> tuple[Path, Path]:
        return self.folder / f"{response_id}.json", self.folder / f"{response_id}.llamay"

    def _write(self, entry: Entry) -> None:
        record, snapshot = self._files(entry.id)
        stored: Stored = entry.meta
        with entry.mutex:  # the registry cannot close it while it is written
            if entry.busy or entry.context.closed:
                return
            entry.context.save(snapshot, note={"model": entry.model_name, "response": entry.id})
        text = json.dumps(stored.to_json(), ensure_ascii=False).encode()
        write_atomically(record, lambda out: out.write(text))

    def _read(self, response_id: str) -> Stored:
        if not _ID.fullmatch(response_id):
            raise _missing(response_id)
        record = self._files(response_id)[0]
        if self._expired(record):
            self._unlink(response_id)
            raise _missing(response_id)
        try:
            return Stored.from_json(json.loads(record.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise _missing(response_id) from None
        except (OSError, ValueError, KeyError, TypeError):
            raise ApiError(
                404, f"response {response_id} is stored but its record is damaged", "response_id"
            ) from None

    def _expired(self, path: Path) -> bool:
        try:
            return time.time() - path.stat().st_mtime > self.registry.ttl
        except OSError:
            return False

    def _touch(self, response_id: str) -> None:
        """The files of a response in use are as fresh as its context in the registry."""
        if _ID.fullmatch(response_id):
            for path in self._files(response_id):
                with contextlib.suppress(OSError):
                    os.utime(path)

    def _unlink(self, response_id: str) -> None:
        if _ID.fullmatch(response_id):
            for path in self._files(response_id):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _sweep(self) -> None:
        """Removes the files of responses unused for the TTL (their contexts are gone too)."""
        with contextlib.suppress(OSError):
            for record in self.folder.glob("resp_*.json"):
                if self._expired(record) and self._entry(record.stem) is None:
                    self._unlink(record.stem)


def _missing(response_id: str) -> ApiError:
    return ApiError(
        404,
        f"No response found with id '{response_id}' (a response is kept while it is used, "
        "for the server's --context-ttl; only responses made with store: true are kept)",
        "response_id",
    )
