"""A small real HTTP server on loopback speaking just enough of OpenAI's chat/completions and
Anthropic's messages (plain and streamed) to stand upstream of llamay's remote providers.

Its model answers "you said: " and the last user message, one word per streamed event; the
model "broken" answers HTTP 500 with an error message; the model "slow" streams the same answer
200 times over, an event every 50 ms (an answer to interrupt); a request without the expected key
(when one is set) gets 401. Every request is recorded for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Upstream:
    server: ThreadingHTTPServer
    key: str | None = None
    requests: list[Recorded] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer_to(body: dict[str, Any]) -> list[str]:
    """The words of the answer, each with the space before it."""
    last = body["messages"][-1]["content"]
    words = f"you said: {last}".split(" ")
    return [words[0]] + [" " + word for word in words[1:]]


def start_upstream(key: str | None = None) -> Upstream:
    upstream: Upstream

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            headers = {name.lower(): value for name, value in self.headers.items()}
            upstream.requests.append(Recorded(self.path, headers, body))
            anthropic = self.path == "/v1/messages"
            if self.path not in ("/v1/chat/completions", "/v1/messages"):
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            given = headers.get("x-api-key") if anthropic else headers.get("authorization")
            wanted = upstream.key if anthropic else f"Bearer {upstream.key}"
            if upstream.key is not None and given != wanted:
                return self._json(401, {"error": {"message": "invalid api key"}})
            if body["model"] == "broken":
                return self._json(500, {"error": {"message": "the upstream broke"}})
            words = answer_to(body) * (200 if body["model"] == "slow" else 1)
            limit = body.get("max_tokens")
            finish = "length" if limit is not None and limit < len(words) else "stop"
            words = words[:limit]
            if not body.get("stream"):
                return self._json(
                    200, _anthropic(words, finish) if anthropic else _openai(words, finish)
                )
            events = (
                _anthropic_events(words, finish) if anthropic else _openai_events(words, finish)
            )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for event in events:
                try:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client stopped reading: what interrupting an answer does
                if body["model"] == "slow":
                    time.sleep(0.05)

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    upstream = Upstream(ThreadingHTTPServer(("127.0.0.1", 0), Handler), key)
    threading.Thread(target=upstream.server.serve_forever, args=(0.02,), daemon=True).start()
    return upstream


def _openai(words: list[str], finish: str) -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(words)},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": len(words)},
    }


def _anthropic(words: list[str], finish: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "".join(words)}],
        "stop_reason": "end_turn" if finish == "stop" else "max_tokens",
        "usage": {"input_tokens": 7, "output_tokens": len(words)},
    }


def _sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def _openai_events(words: list[str], finish: str) -> list[str]:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
    chunks += [
        {"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return [_sse(chunk) for chunk in chunks] + [": keep-alive\n\n", _sse("[DONE]")]


def _anthropic_events(words: list[str], finish: str) -> list[str]:
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 7}}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    events += [
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
        )
        for w in words
    ]
    stop = "end_turn" if finish == "stop" else "max_tokens"
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop},
                "usage": {"output_tokens": len(words)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [_sse(data, event) for event, data in events]
