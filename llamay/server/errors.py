"""Errors as each API family writes them, and reading a request's JSON body.

A route raises `ApiError` (or lets a LlamayError through); app.py renders it in the shape of the
family the request belongs to, chosen by its path. Client mistakes are 4xx, never 5xx: the
OpenAI and Anthropic SDKs retry a 5xx.
"""

from __future__ import annotations

import json
import math
from typing import Any

import falcon

from llamay.errors import (
    ContextOverflow,
    GrammarError,
    InvalidRequest,
    KVCacheFull,
    LlamayError,
    ModelNotFound,
)
from llamay.providers import ProviderError

# Seconds a client is told to wait when the KV cache is full: about a few generations' time.
_BUSY_RETRY_AFTER_S = 5
# OpenAI's error `type` for a status; Anthropic names its own types.
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"


class ApiError(Exception):
    """An answer other than success: an HTTP status and a message the client can act on;
    `param` names the offending field where there is one; `retry_after` is sent as the
    Retry-After header; `code` is OpenAI's machine-readable code (context_length_exceeded),
    which clients such as litellm key their fallbacks on."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        retry_after: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after  # seconds, for a 429 or 503 (the SDKs retry those)


def from_exception(error: Exception) -> ApiError:
    """The ApiError for anything a route raised: llamay's own errors are the client's (a model
    name, a prompt, a schema), anything else is the server's."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, ModelNotFound):
        return ApiError(404, str(error), "model")
    if isinstance(error, ProviderError):  # the upstream failed, not the client
        return ApiError(502, str(error))
    if isinstance(error, KVCacheFull):  # busy, not wrong: the SDKs retry a 503
        return ApiError(503, f"the server is busy: {error}", retry_after=_BUSY_RETRY_AFTER_S)
    if isinstance(error, ContextOverflow):
        return ApiError(400, str(error), "messages", code=CONTEXT_LENGTH_EXCEEDED)
    if isinstance(error, InvalidRequest):
        return ApiError(400, str(error), error.param)
    if isinstance(error, (GrammarError, LlamayError)):
        return ApiError(400, str(error))
    if isinstance(error, falcon.HTTPError):
        status = int(str(error.status).split()[0])
        return ApiError(status, error.description or error.title or str(error.status))
    return ApiError(500, f"internal error: {type(error).__name__}: {error}")


def family_of(req: falcon.Request) -> str:
    """Which API family a request belongs to: "anthropic", "ollama", "native" or "openai"."""
    path = req.path
    if path.startswith("/v1/messages") or (
        path.startswith("/v1/models") and req.get_header("anthropic-version")
    ):
        return "anthropic"
    if path.startswith("/api/"):
        return "ollama"
    if path.startswith("/llamay/"):
        return "native"
    return "openai"


def error_body(family: str, error: ApiError) -> dict[str, Any]:
    """The JSON body of an error in `family`'s shape."""
    if family == "anthropic":
        kind = _ANTHROPIC_TYPES.get(error.status, "api_error")
        message = error.message
        if error.code == CONTEXT_LENGTH_EXCEEDED:  # Anthropic's wording, which clients match
            message = f"prompt is too long: {message}"
        return {"type": "error", "error": {"type": kind, "message": message}}
    if family == "ollama":
        return {"error": error.message}
    kind = _OPENAI_TYPES.get(error.status, "server_error")
    message = error.message
    if error.code == CONTEXT_LENGTH_EXCEEDED:  # OpenAI's wording, which clients match
        message = f"This model's maximum context length is smaller than the prompt: {message}"
    body = {"message": message, "type": kind, "param": error.param, "code": error.code}
    return {"error": body}


# Deeper than any request needs (a JSON schema of a few levels, tool arguments): the code that
# walks a body (schemas, templates) recurses, and must not meet a RecursionError.
MAX_JSON_DEPTH = 64


def read_json(req: falcon.Request, limit: int) -> dict[str, Any]:
    """The request's body as a JSON object: 415 when it is sent as another type (a form,
    text/plain: what a page may send cross-site without a preflight), 413 past `limit` bytes,
    400 if it is not a JSON object of finite numbers and Unicode strings nested at most
    MAX_JSON_DEPTH deep. A body without a Content-Type is read as JSON, as Ollama does (litellm
    and curl scripts send none); a browser's cross-site request carries an Origin, which the
    guard checks (guard.py)."""
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media not in ("application/json", ""):
        raise ApiError(
            415,
            f"send the body as JSON with 'Content-Type: application/json' "
            f"(this request says {req.content_type!r})",
        )
    if req.content_length is not None and req.content_length > limit:
        raise ApiError(413, f"the request body is larger than the server's limit ({limit} bytes)")
    raw = req.bounded_stream.read(limit + 1)
    if len(raw) > limit:
        raise ApiError(413, f"the request body is larger than the server's limit ({limit} bytes)")
    try:
        body = json.loads(raw, parse_constant=_non_finite, parse_float=_finite_float)
    except _NotFinite as error:
        raise ApiError(400, f"the request body holds {error}: numbers must be finite") from None
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, not {type(body).__name__}")
    _check_values(body)
    return body


class _NotFinite(Exception):
    """NaN, Infinity, or a number too large for a float (1e400): JSON has no such numbers."""


def _non_finite(text: str) -> float:
    raise _NotFinite(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text if len(text) <= 40 else text[:40] + "...")
    return value


def _check_values(body: dict[str, Any]) -> None:
    """400 for a body nested deeper than MAX_JSON_DEPTH or holding a lone surrogate (a string
    that is not Unicode text: "\\udc80" escapes one): walked without recursion."""
    todo: list[tuple[Any, int]] = [(body, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ApiError(400, f"the request body is nested more than {MAX_JSON_DEPTH} deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key)
                todo.append((item, depth + 1))


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ApiError(
                400,
                f"the request body holds a lone surrogate (U+{ord(text[error.start]):04X}) in a "
                "string: strings must be Unicode text",
            ) from None
