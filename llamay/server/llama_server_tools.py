"""llama.cpp's server routes beside its completions: /tokenize, /detokenize, /apply-template,
/props, and the slots (/slots, /slots/{id_slot}?action=save|restore|erase; slots.py says what
a slot is in llamay). Each names its model as llama_server_fields.model_for says: `model` in
the body, `?model=` on a GET, else the server's default."""

from __future__ import annotations

import time
from typing import Any

import falcon

from llamay import chat
from llamay._version import __version__
from llamay.engine import Model
from llamay.server import slots
from llamay.server.errors import ApiError
from llamay.server.llama_server_fields import (
    APPLY_TEMPLATE,
    DETOKENIZE,
    SLOT_ACTION,
    TOKENIZE,
    generation_settings,
    model_for,
)
from llamay.server.slots import Slots
from llamay.server.state import Route, ServerState

_ACTIONS = ("save", "restore", "erase")


def add_routes(app: falcon.App, state: ServerState, table: Slots) -> None:
    app.add_route("/tokenize", _Tokenize(state))
    app.add_route("/detokenize", _Detokenize(state))
    app.add_route("/apply-template", _ApplyTemplate(state))
    app.add_route("/props", _Props(state, table))
    app.add_route("/slots", _Slots(state, table))
    app.add_route("/slots/{id_slot}", _SlotAction(state, table))


class _Tokenize(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = TOKENIZE.read(self.body(req))
        _, model = model_for(self.state, values["model"])
        ids = model.tokenize(
            chat.bounded_text(model, values["content"], truncate=False),
            add_bos=values["add_special"],
            special=values["parse_special"],
        )
        if not values["with_pieces"]:
            resp.media = {"tokens": ids}
            return
        resp.media = {"tokens": [{"id": token, "piece": _piece(model, token)} for token in ids]}


def _piece(model: Model, token: int) -> str | list[int]:
    """A token's text, or its bytes where they are not UTF-8 on their own (part of a
    character)."""
    raw = model.tokenizer.token_to_piece(token, special=True)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


class _Detokenize(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = DETOKENIZE.read(self.body(req))
        _, model = model_for(self.state, values["model"])
        tokens = values["tokens"]
        if any(token >= model.n_vocab for token in tokens):
            raise ApiError(
                400, f"tokens must be a list of token ids from 0 to {model.n_vocab - 1}", "tokens"
            )
        resp.media = {"content": model.tokenizer.detokenize(tokens, special=True)}


class _ApplyTemplate(Route):
    """The conversation as the model's chat template writes it, ready for the assistant's
    turn: what /completion is then given as its prompt."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = APPLY_TEMPLATE.read(self.body(req))
        _, model = model_for(self.state, values["model"])
        prompt = chat.render_chat(
            model,
            values["messages"],
            tools=values["tools"],
            template_kwargs=values["chat_template_kwargs"] or {},
        )
        resp.media = {"prompt": prompt}


class _Props(Route):
    def __init__(self, state: ServerState, table: Slots) -> None:
        super().__init__(state)
        self.slots = table

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        name, model = model_for(self.state, req.get_param("model"))
        tokenizer = model.tokenizer
        busy = any(slot.busy for slot in self.slots.table(model).slots)
        resp.media = {
            "default_generation_settings": {
                "id": 0,
                "id_task": -1,
                "n_ctx": model.n_ctx,
                "speculative": model.draft is not None,
                "is_processing": busy,
                "params": default_settings(model),
                "prompt": "",
                "next_token": {
                    "has_next_token": True,
                    "has_new_line": False,
                    "n_remain": -1,
                    "n_decoded": 0,
                },
            },
            "total_slots": self.slots.n_slots,
            "model_alias": name,
            "model_path": str(model.path),
            "modalities": {"vision": False, "audio": False},
            "chat_template": model.chat_template.source,
            "chat_template_caps": {},
            "bos_token": _text_of(model, tokenizer.bos_id),
            "eos_token": _text_of(model, tokenizer.eos_id),
            "build_info": f"llamay {__version__}",
            "is_sleeping": False,
        }


def default_settings(model: Model) -> dict[str, Any]:
    """The generation settings of a request that sets none."""
    return generation_settings(model, {})


def _text_of(model: Model, token: int | None) -> str:
    return "" if token is None else model.tokenizer.token_text(token)


class _Slots(Route):
    def __init__(self, state: ServerState, table: Slots) -> None:
        super().__init__(state)
        self.slots = table

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _, model = model_for(self.state, req.get_param("model"))
        table = self.slots.table(model)
        if req.get_param_as_bool("fail_on_no_slot") and all(s.busy for s in table.slots):
            raise ApiError(503, "no slot is idle", retry_after=1)
        defaults = default_settings(model)
        resp.media = [slot.describe(model, defaults) for slot in table.slots]


class _SlotAction(Route):
    """POST /slots/{id_slot}?action=save|restore|erase, `filename` in the body for the first
    two: a snapshot file in --slot-save-path."""

    def __init__(self, state: ServerState, table: Slots) -> None:
        super().__init__(state)
        self.slots = table

    def on_post(self, req: falcon.Request, resp: falcon.Response, id_slot: str) -> None:
        action = req.get_param("action")
        if action not in _ACTIONS:
            raise ApiError(400, f"action must be save, restore or erase, not {action!r}", "action")
        if not id_slot.isdigit() or len(id_slot) > 9:
            raise ApiError(400, f"{id_slot[:20]!r} is not a slot number", "id_slot")
        values = SLOT_ACTION.read(self.body(req) if req.content_length else {})
        _, model = model_for(self.state, values["model"] or req.get_param("model"))
        path = (
            None
            if action == "erase"
            else slots.slot_file(self.state.config.slot_save_path, values["filename"])
        )
        started = time.perf_counter()
        with self.slots.table(model).holding(int(id_slot)) as slot:
            if path is None:
                n_erased = len(slot.tokens)
                slot.drop_context()
                slot.tokens = []
                resp.media = {"id_slot": slot.id, "n_erased": n_erased}
                return
            if action == "save":
                written = slots.save(model, slot, path)
                resp.media = {
                    "id_slot": slot.id,
                    "filename": path.name,
                    "n_saved": len(slot.tokens),
                    "n_written": written,
                    "timings": {"save_ms": (time.perf_counter() - started) * 1000},
                }
                return
            read = slots.restore(model, slot, path)
            resp.media = {
                "id_slot": slot.id,
                "filename": path.name,
                "n_restored": len(slot.tokens),
                "n_read": read,
                "timings": {"restore_ms": (time.perf_counter() - started) * 1000},
            }
