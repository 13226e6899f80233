"""Stored responses: each one a context of the server's context registry (native.py).

A stored response's context holds the conversation up to and including its output, in KV. A
request with `previous_response_id` forks it (copy-on-write: two requests that continue one
response share its pages) and feeds only the tokens past the longest prefix that the fork
already holds, so it does not compute the conversation again. The registry counts it against
`--max-contexts`, and closes it after `--context-ttl` idle like any other context; it is listed
at `GET /llamay/v1/contexts` under its response id.

A stored response outlives the server, on one of two paths:

- With a state directory (`--state-dir DIR`, statedir.py), the registry keeps it as it keeps
  every context: `DIR/contexts/ID/snapshot.llamay`, written behind each answer, whose note
  carries the record (the response object, its conversation, its input items, its model), and
  the manifest. Any replica sharing DIR (or this one, restarted) restores it from there, record
  and KV in one file, so the two never disagree; the registry expires and deletes it.
- Without one, the server's contexts live in its memory only, and a stored response is also
  written to `$LLAMAY_HOME/responses/`: `ID.json` (the record) and `ID.llamay` (the context's
  snapshot, Context.save). A response asked for that the registry no longer holds, after a
  restart, is read from there (its context restored from the snapshot when it is continued);
  its files go with DELETE, or once unused for the TTL.

Either way a record read back is checked as hostile input (`Stored.from_json`): a damaged one is
a clear error, never a crash.
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
from llamay.server.contexts import ContextRegistry, Entry
from llamay.server.errors import ApiError
from llamay.server.native import fork_idle
from llamay.state import Context

# What a response id looks like (responses_items.item_id): anything else is never a file name.
_ID = re.compile(r"resp_[0-9a-f]{24}")
# More than any record a request within the body limit makes; a larger file is not read.
_MAX_RECORD = 256 * 1024 * 1024


# The key of a stored response's record in its context's note (Context.note).
_NOTE_KEY = "response"
_KIND = "response"  # the registry's kind of a stored response's context


@dataclass
class Stored:
    """What a stored response keeps besides its KV: the response object (its model, output,
    usage, created_at, previous_response_id), the conversation as chat messages through its
    output (its instructions not included: a continuation gives its own), its input as items
    (each with an id: GET .../input_items), and the name of its model."""

    response: dict[str, Any]
    conversation: list[dict[str, Any]]
    model_name: str
    input_items: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "response": self.response,
            "conversation": self.conversation,
            "input_items": self.input_items,
        }

    @classmethod
    def from_json(cls, data: Any, response_id: str) -> Stored:
        """The record of response `response_id` read back (a file, a snapshot's note: hostile
        input); ValueError saying what is wrong with it."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        response, conversation = data.get("response"), data.get("conversation")
        model, items = data.get("model"), data.get("input_items", [])
        if not isinstance(response, dict) or response.get("id") != response_id:
            raise ValueError(f"its response object is not that of {response_id}")
        if not isinstance(response.get("output"), list):
            raise ValueError("its response has no output list")
        for name, value in (("conversation", conversation), ("input_items", items)):
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ValueError(f"its {name} is not a list of objects")
        if not all(isinstance(m.get("role"), str) for m in conversation):
            raise ValueError("a message of its conversation has no role")
        if not all(isinstance(item.get("id"), str) for item in items):
            raise ValueError("an input item has no id")
        if not isinstance(model, str) or not model:
            raise ValueError("it names no model")
        return cls(response, conversation, model, items)


class ResponseStore:
    """The stored responses of one server (thread-safe); `folder` is where they are written
    when the registry has no state directory (the module docstring)."""

    def __init__(self, registry: ContextRegistry, folder: Path | None = None) -> None:
        self.registry = registry
        self.shared = registry.replication is not None  # the state directory keeps them
        self.folder = folder if folder is not None else llamay_home() / "responses"
        self._restoring = threading.Lock()

    def check_room(self) -> None:
        """429 when the registry is full: asked before a response is generated."""
        self.registry.check_room()

    def put(self, stored: Stored, context: Context) -> None:
        """Keeps `context` as the response's state, in the registry and on disk."""
        response_id = stored.response["id"]
        # The record rides in the snapshot's note: written with the KV, in one file.
        context.note = {_NOTE_KEY: stored.to_json()}
        entry = self.registry.add(
            stored.model_name, context, _KIND, entry_id=response_id, meta=stored
        )
        if self.shared:
            return  # the registry writes it to the state directory, behind the answer
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
        if self.shared:
            raise _missing(response_id)
        stored = self._read(response_id)
        self._touch(response_id)
        return stored

    def fork(self, response_id: str, model: Model) -> tuple[Stored, Context]:
        """The response and a fork of its context, restored from its snapshot if the registry
        no longer holds it (after a restart, or on another replica)."""
        entry = self._entry(response_id)
        if entry is None:
            if self.shared:
                raise _missing(response_id)
            entry = self._restore(response_id, model)
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
        on_disk = not self.shared and _ID.fullmatch(response_id) is not None
        on_disk = on_disk and self._files(response_id)[0].exists()
        if entry is None and not on_disk:
            raise _missing(response_id)
        if entry is not None:
            with contextlib.suppress(ApiError):  # expired meanwhile: gone all the same
                self.registry.remove(response_id)
                entry.context.close()
        self._unlink(response_id)

    # --- the registry ---

    def _entry(self, response_id: str) -> Entry | None:
        """The response's entry in the registry (which, with a state directory, restores it
        from there); None when it holds no such response."""
        if not _ID.fullmatch(response_id):
            return None  # never a path, nor another API's context
        try:
            entry = self.registry.get(response_id)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        if entry.meta is None and entry.kind == _KIND:
            # Restored by the registry from the state directory: the record is in the note.
            entry.meta = _from_note(response_id, entry.context.note)
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
            return self.registry.add(
                stored.model_name, context, _KIND, entry_id=response_id, meta=stored
            )

    # --- the files (without a state directory) ---

    def _files(self, response_id: str) -> tuple[Path, Path]:
        return self.folder / f"{response_id}.json", self.folder / f"{response_id}.llamay"

    def _write(self, entry: Entry) -> None:
        record, snapshot = self._files(entry.id)
        stored: Stored = entry.meta
        with entry.mutex:  # the registry cannot close it while it is written
            if entry.busy or entry.context.closed:
                return
            note = {"model": entry.model_name, _NOTE_KEY: stored.to_json()}
            entry.context.save(snapshot, note=note)
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
            with open(record, "rb") as source:
                data = source.read(_MAX_RECORD + 1)
            if len(data) > _MAX_RECORD:
                raise ValueError(f"larger than {_MAX_RECORD} bytes")
            return Stored.from_json(json.loads(data), response_id)
        except FileNotFoundError:
            raise _missing(response_id) from None
        except (OSError, ValueError, RecursionError) as error:
            raise _damaged(response_id, f"{record}: {error}") from None

    def _expired(self, path: Path) -> bool:
        try:
            return time.time() - path.stat().st_mtime > self.registry.ttl
        except OSError:
            return False

    def _touch(self, response_id: str) -> None:
        """The files of a response in use are as fresh as its context in the registry."""
        if not self.shared and _ID.fullmatch(response_id):
            for path in self._files(response_id):
                with contextlib.suppress(OSError):
                    os.utime(path)

    def _unlink(self, response_id: str) -> None:
        if not self.shared and _ID.fullmatch(response_id):
            for path in self._files(response_id):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _sweep(self) -> None:
        """Removes the files of responses unused for the TTL (their contexts are gone too)."""
        with contextlib.suppress(OSError):
            for record in self.folder.glob("resp_*.json"):
                if self._expired(record) and self._entry(record.stem) is None:
                    self._unlink(record.stem)


def _from_note(response_id: str, note: Any) -> Stored:
    """The record a stored response's snapshot carries in its note."""
    try:
        if not isinstance(note, dict):
            raise ValueError("the snapshot has no note")
        return Stored.from_json(note.get(_NOTE_KEY), response_id)
    except ValueError as error:
        raise _damaged(response_id, f"its snapshot's record: {error}") from None


def _damaged(response_id: str, why: str) -> ApiError:
    return ApiError(
        500,
        f"response {response_id} is stored but its record is damaged ({why}); send the whole "
        "conversation as input instead",
        "response_id",
    )


def _missing(response_id: str) -> ApiError:
    return ApiError(
        404,
        f"No response found with id '{response_id}' (a response is kept while it is used, "
        "for the server's --context-ttl; only responses made with store: true are kept)",
        "response_id",
    )
