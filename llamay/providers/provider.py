"""A remote model: chat requests sent to the provider that serves it, answers read as text."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx

from llamay.providers.config import ProviderConfig, ProviderError
from llamay.providers.sse import sse_events
from llamay.providers.wire import WIRES, Update, WireError, error_message

# Connecting should be quick; a long answer may take minutes between its first and last byte,
# and a slow model minutes before its first.
TIMEOUT = httpx.Timeout(600.0, connect=10.0)


class Reply(Iterator[str]):
    """The text of one answer, as deltas. Once iterated to its end, `finish_reason` ("stop",
    "length", ...) and the token counts `n_prompt` and `n_generated` hold what the upstream
    said (None where it said nothing)."""

    def __init__(self, updates: Iterator[Update], close: Callable[[], None]):
        self._updates = updates
        self._close = close
        self.finish_reason: str | None = None
        self.n_prompt: int | None = None
        self.n_generated: int | None = None

    def __next__(self) -> str:
        try:
            for update in self._updates:
                self.finish_reason = update.finish_reason or self.finish_reason
                if update.n_prompt is not None:
                    self.n_prompt = update.n_prompt
                if update.n_generated is not None:
                    self.n_generated = update.n_generated
                if update.text:
                    return update.text
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Drop the connection; reading an answer to its end does this too."""
        self._close()

    def __del__(self) -> None:
        self.close()


class Provider:
    """One local model name served by a configured provider (`llamay.providers.find`)."""

    def __init__(self, config: ProviderConfig, local_name: str):
        self.config = config
        self.name = local_name
        self.api = config.api
        self.upstream_model = config.models[local_name]
        self.url = config.base_url + WIRES[config.api].path

    def __repr__(self) -> str:
        return f"<llamay.Provider {self.name} -> {self.api} {self.url} {self.upstream_model}>"

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> Reply:
        """Send a conversation (`[{"role", "content"}]`, OpenAI's shape; a system message is
        moved where Anthropic wants it) and return the answer's text deltas: one item without
        `stream`, as the upstream sends them with it. `extra` goes into the request body as is
        (`top_p`, `seed`...; `stop` becomes `stop_sequences` for Anthropic); None values are
        left out, so are `max_tokens` and `temperature` when None (the upstream's defaults).

        The request is made here: a refused request, an HTTP error or an unreachable upstream
        raises ProviderError (the status and the upstream's message) before anything is
        returned; an error in the middle of a stream raises it from the iteration.
        """
        wire = WIRES[self.api]
        body = wire.body(self.upstream_model, messages, max_tokens, temperature, stream, extra)
        headers = {"content-type": "application/json"} | wire.headers(self._key())
        client = httpx.Client(timeout=TIMEOUT)
        try:
            request = client.build_request("POST", self.url, headers=headers, json=body)
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            client.close()
            raise ProviderError(f"{self._where()}: cannot reach the upstream: {exc}") from None

        def close() -> None:
            response.close()
            client.close()

        try:
            if response.status_code >= 400:
                response.read()
                raise ProviderError(
                    f"{self._where()}: HTTP {response.status_code}: {_message(response)}"
                )
            if stream:
                return Reply(self._streamed(response, wire), close)
            response.read()
            answer = wire.answer(_body_json(response))
        except (WireError, httpx.HTTPError) as exc:
            close()
            raise ProviderError(f"{self._where()}: {exc}") from None
        except BaseException:
            close()
            raise
        close()
        return Reply(iter([answer]), lambda: None)

    def _streamed(self, response: httpx.Response, wire: Any) -> Iterator[Update]:
        try:
            for name, data in sse_events(response.iter_lines()):
                update = wire.event(name, data)
                if update is not None:
                    yield update
                    if update.done:
                        return
        except (WireError, httpx.HTTPError) as exc:
            raise ProviderError(f"{self._where()}: {exc}") from None

    def _key(self) -> str | None:
        variable = self.config.api_key_env
        if variable is None:
            return None
        key = os.environ.get(variable)
        if not key:
            raise ProviderError(
                f"provider {self.config.name!r} takes its key from ${variable}, which is not set"
            )
        return key

    def _where(self) -> str:
        return f"provider {self.config.name!r} ({self.url})"


def _body_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise WireError(f"an answer that is not JSON: {response.text[:200]!r}") from None


def _message(response: httpx.Response) -> str:
    try:
        return error_message(response.json())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text.strip()[:300] or response.reason_phrase
