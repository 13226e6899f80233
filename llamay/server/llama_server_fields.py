"""llama-server's request fields, read into llamay's terms, and the settings its answers echo.

The routes llama.cpp's server defines (/completion, /infill, /tokenize... llama_server.py)
name their model only where the server holds several: `model_for` takes the request's
`model`, else `--default-model`, else the one loaded model. A completion's fields become
`Completion`: model.generate's keyword arguments (each checked against the engine's range
table) and the options llama-server adds (n_probs, n_indent, t_max_predict_ms, id_slot,
response_fields...). Fields llamay has no use for are ignored, as llama-server ignores what it
does not know; one that asks for a sampler llamay does not have (mirostat, DRY, XTC, dynamic
temperature, top-n-sigma, LoRA adapters) is a 400 naming it, rather than sampling otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llamay import chat
from llamay.engine import Model, ranges
from llamay.engine.sampling import SamplingParams
from llamay.errors import GrammarError
from llamay.server import inference
from llamay.server.concepts import SCHEMA_FORMAT, Format, Gbnf
from llamay.server.errors import ApiError
from llamay.server.fields import Field

if TYPE_CHECKING:
    from llamay.server.state import ServerState

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's seed that means "draw one"
# llamay's sampling chain, in llama.cpp's names (engine/sampling.py)
SAMPLERS = ["penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"]
# Samplers llamay does not have: the field, and the values that leave it off
_ABSENT_SAMPLERS = {
    "mirostat": lambda v: v == 0,
    "dynatemp_range": lambda v: v == 0,
    "xtc_probability": lambda v: v == 0,
    "dry_multiplier": lambda v: v == 0,
    "top_n_sigma": lambda v: v <= 0,
}
_MAX_EXTRA_FILES = 1024
_GRAMMAR = Field("grammar", Gbnf(), feeds="output")
_JSON_SCHEMA = Field("json_schema", Format(SCHEMA_FORMAT), feeds="output")


def model_for(state: ServerState, name: Any) -> tuple[str, Model]:
    """The name and model a request means: `name` (its `model`), else the server's
    --default-model, else the one model loaded; 400 when none can be told apart."""
    if name is None:
        name = state.config.default_model
    if name is None:
        loaded = state.models.loaded()
        if len(loaded) != 1:
            held = f"{len(loaded)} models are loaded" if loaded else "no model is loaded yet"
            raise ApiError(
                400,
                f'name the model ("model": "NAME", or ?model=NAME): {held}, and the server '
                "was started without --default-model",
                "model",
            )
        name = loaded[0].name
    if not isinstance(name, str) or not name:
        raise ApiError(400, "model must be the name of a model, such as gemma3:270m", "model")
    return name, state.models.get(name)


# --- small readers -------------------------------------------------------------------------------


def flag(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false", name)
    return value


def integer(body: Mapping[str, Any], name: str, default: int, low: int, high: float) -> int:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        what = f"of at least {low}" if math.isinf(high) else f"from {low} to {high}"
        raise ApiError(400, f"{name} must be an integer {what}", name)
    return value


def number(body: Mapping[str, Any], name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ApiError(400, f"{name} must be a number of at least 0", name)
    return float(value)


def text(body: Mapping[str, Any], name: str, default: str = "") -> str:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string", name)
    return value


# --- /completion and /infill ---------------------------------------------------------------------


@dataclass
class Completion:
    """The options of a /completion or /infill request.

    `n_predict`: tokens to generate at most (None: until the model stops or the context is
    full; 0: only evaluate the prompt into the cache). `sampling`: model.generate's keyword
    arguments, checked. `n_probs`: each token's probability and its n most likely
    alternatives (`completion_probabilities`). `id_slot`: the slot to run in (None: any
    idle one; slots.py). `n_indent`: a line after the first whose indentation is less ends the
    answer, without that line. `t_max_predict_ms`: after this long generating, the answer ends
    at its next newline. `response_fields`: the answer's fields to keep (a/b: b of object a,
    under the key "a/b"). `n_cmpl`: completions per prompt. `settings`: the
    generation_settings the answer echoes."""

    n_predict: int | None
    stream: bool
    sampling: dict[str, Any]
    n_probs: int
    return_tokens: bool
    id_slot: int | None
    n_indent: int
    t_max_predict_ms: float
    response_fields: list[str] | None
    n_cmpl: int
    timings_per_token: bool
    settings: dict[str, Any]


def read_completion(model: Model, body: Mapping[str, Any]) -> Completion:
    """A /completion or /infill body's options (see Completion); 400 naming a field that is
    out of range or of the wrong kind."""
    _refuse_absent_samplers(body)
    n_predict = body.get("n_predict", body.get("max_tokens"))
    n_predict = integer({"n_predict": n_predict}, "n_predict", -1, -1, math.inf)
    n_probs = integer(body, "n_probs", 0, 0, int(ranges.RANGES["logprobs"].high))
    if n_probs and flag(body, "post_sampling_probs", False):
        raise ApiError(
            400,
            "post_sampling_probs is not supported: llamay gives each token's probability "
            "before sampling (n_probs alone)",
            "post_sampling_probs",
        )
    stream = flag(body, "stream", False)
    ignore_eos = flag(body, "ignore_eos", False)
    seed = body.get("seed")
    if seed in (-1, LLAMA_DEFAULT_SEED):
        seed = None
    grammar = _grammar(body)
    bias = _logit_bias(model, body.get("logit_bias"))
    if ignore_eos:  # as llama.cpp: every end-of-generation token banned
        bias.update(dict.fromkeys(model.tokenizer.eog_ids, -100.0))
    sampling = inference.sampling_kwargs(
        model,
        **{name: body.get(name) for name in ranges.SAMPLING if name != "seed"},
        seed=seed,
        max_tokens=None if n_predict < 0 else n_predict,
        stop=body.get("stop"),
        logit_bias=bias or None,
        logprobs=n_probs or None,
        grammar=grammar,
    )
    id_slot = integer(body, "id_slot", -1, -1, math.inf)
    fields = body.get("response_fields")
    if fields is not None and (
        not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)
    ):
        raise ApiError(400, "response_fields must be a list of field names", "response_fields")
    samplers = body.get("samplers")
    if samplers is not None and not isinstance(samplers, (str, list)):
        raise ApiError(400, "samplers must be a list of sampler names", "samplers")
    number(body, "t_max_prompt_ms", 0)  # accepted: the prompt is always evaluated whole
    for name in ("cache_prompt", "return_progress"):
        flag(body, name, True)  # accepted: prefix reuse is always on, and changes no bit
    completion = Completion(
        n_predict=None if n_predict < 0 else n_predict,
        stream=stream,
        sampling=sampling,
        n_probs=n_probs,
        return_tokens=flag(body, "return_tokens", False),
        id_slot=None if id_slot < 0 else id_slot,
        n_indent=integer(body, "n_indent", 0, 0, math.inf),
        t_max_predict_ms=number(body, "t_max_predict_ms", 0),
        response_fields=fields,
        n_cmpl=inference.check_n(body.get("n_cmpl", body.get("n"))),
        timings_per_token=flag(body, "timings_per_token", False),
        settings={},
    )
    completion.settings = generation_settings(
        model, sampling, n_predict, stream=stream, ignore_eos=ignore_eos, grammar=grammar
    )
    completion.settings["timings_per_token"] = completion.timings_per_token
    return completion


def _refuse_absent_samplers(body: Mapping[str, Any]) -> None:
    for name, off in _ABSENT_SAMPLERS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not off(value):
            raise ApiError(
                400,
                f"{name} asks for a sampler llamay does not have; leave it out (llamay samples "
                f"with {', '.join(SAMPLERS)})",
                name,
            )
    lora = body.get("lora")
    if lora not in (None, []):
        raise ApiError(400, "lora: llamay loads no LoRA adapters", "lora")


def _grammar(body: Mapping[str, Any]) -> Any:
    """The grammar of `grammar` (GBNF) or `json_schema` ({}: any JSON value); 400 naming the
    field it fails in."""
    gbnf, schema = _GRAMMAR.read(body, {}), _JSON_SCHEMA.read(body, {})
    if gbnf is not None and schema is not None:
        raise ApiError(400, "give grammar or json_schema, not both", "grammar")
    output = schema or gbnf
    if output is None:
        return None
    field = "json_schema" if schema is not None else "grammar"
    try:
        return output.grammar()
    except GrammarError as error:
        raise ApiError(400, f"{field}: {error}", field) from None


def _logit_bias(model: Model, value: Any) -> dict[int, float]:
    """llama-server's logit_bias: [[token, bias], ...] (a token id or a text, each of whose
    tokens gets the bias; `false` bans), or OpenAI's {"token id": bias}."""
    if value is None or value == [] or value == {}:
        return {}
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        pairs = [(p[0], p[1]) for p in value]
    else:
        raise ApiError(
            400, 'logit_bias must be [[token, bias], ...] or {"token": bias}', "logit_bias"
        )
    bias: dict[int, float] = {}
    for key, amount in pairs:
        if amount is False:
            amount = -100.0
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise ApiError(400, "a logit_bias must be a number, or false to ban", "logit_bias")
        if isinstance(key, str) and not key.lstrip("-").isdigit():
            tokens = model.tokenize(key, add_bos=False, special=False)
        else:
            try:
                tokens = [int(key)]
            except (TypeError, ValueError):
                raise ApiError(
                    400, f"logit_bias names {key!r}, not a token", "logit_bias"
                ) from None
        for token in tokens:
            bias[token] = float(amount)
    return bias


def generation_settings(
    model: Model,
    sampling: Mapping[str, Any],
    n_predict: int = -1,
    *,
    stream: bool = False,
    ignore_eos: bool = False,
    grammar: Any = None,
) -> dict[str, Any]:
    """The sampling settings as llama-server's answers echo them (`generation_settings`,
    /props, /slots): llamay's values, and the samplers it lacks as off."""
    defaults = SamplingParams()
    value = {name: sampling.get(name, getattr(defaults, name)) for name in ranges.SAMPLING}
    seed = value.pop("seed")
    bias = sampling.get("logit_bias") or {}
    return {
        "n_predict": n_predict,
        "seed": LLAMA_DEFAULT_SEED if seed is None else seed,
        **value,
        "dynatemp_range": 0.0,
        "dynatemp_exponent": 1.0,
        "top_n_sigma": -1.0,
        "xtc_probability": 0.0,
        "xtc_threshold": 0.1,
        "dry_multiplier": 0.0,
        "mirostat": 0,
        "stop": list(sampling.get("stop", [])),
        "max_tokens": n_predict,
        "n_keep": 0,
        "n_discard": 0,
        "ignore_eos": ignore_eos,
        "stream": stream,
        "logit_bias": [
            {"bias": b if math.isfinite(b) else False, "token": t} for t, b in bias.items()
        ],
        "n_probs": sampling.get("logprobs") or 0,
        "min_keep": 0,
        "grammar": grammar.gbnf if grammar is not None else "",
        "samplers": list(SAMPLERS),
        "timings_per_token": False,
        "post_sampling_probs": False,
        "lora": [],
    }


def completion_prompts(model: Model, value: Any) -> list[list[int]]:
    """/completion's `prompt` as token ids: a string; token ids; tokens and strings mixed
    ([12, "text", 34]: BOS only when it begins with a string); {"prompt_string": ...}; or a
    list of such prompts. Text is tokenized with special tokens parsed, BOS where the model
    asks for it."""
    if value is None:
        raise ApiError(400, "prompt is required", "prompt")
    several = isinstance(value, list) and value
    if several and all(isinstance(p, (str, list, Mapping)) for p in value):
        if len(value) > inference.MAX_CHOICES:
            raise ApiError(400, f"at most {inference.MAX_CHOICES} prompts per request", "prompt")
        return [_one_prompt(model, p) for p in value]
    return [_one_prompt(model, value)]


def _one_prompt(model: Model, value: Any) -> list[int]:
    if isinstance(value, Mapping):
        if value.get("multimodal_data"):
            raise ApiError(400, "multimodal_data: llamay runs text models", "prompt")
        value = value.get("prompt_string")
    parts = [value] if isinstance(value, str) else value
    if not isinstance(parts, list) or not parts:
        raise ApiError(400, "prompt must be a string, token ids, or a list of them mixed", "prompt")
    ids: list[int] = []
    for position, part in enumerate(parts):
        if isinstance(part, str):
            bounded = chat.bounded_text(model, part, truncate=False)
            ids += model.tokenize(bounded, add_bos=position == 0, special=True)
        elif isinstance(part, int) and not isinstance(part, bool) and 0 <= part < model.n_vocab:
            ids.append(part)
        else:
            raise ApiError(
                400, f"prompt holds {part!r}: neither text nor a token id of the model", "prompt"
            )
    if not ids:
        raise ApiError(400, "the prompt is empty: there is nothing to continue", "prompt")
    return ids


def infill_parts(body: Mapping[str, Any]) -> tuple[str, str, str, list[tuple[str, str]]]:
    """/infill's input_prefix, input_suffix, prompt (the text already written after the
    prefix) and input_extra ({"filename", "text"} chunks of other files)."""
    extra = body.get("input_extra")
    chunks: list[tuple[str, str]] = []
    if extra is not None:
        if not isinstance(extra, list) or len(extra) > _MAX_EXTRA_FILES:
            raise ApiError(
                400,
                f"input_extra must be a list of at most {_MAX_EXTRA_FILES} "
                '{"filename": string, "text": string} objects',
                "input_extra",
            )
        for chunk in extra:
            filename = chunk.get("filename", "tmp") if isinstance(chunk, Mapping) else None
            content = chunk.get("text", "") if isinstance(chunk, Mapping) else None
            if not isinstance(filename, str) or not isinstance(content, str):
                raise ApiError(
                    400,
                    'each input_extra chunk must be {"filename": string, "text": string}',
                    "input_extra",
                )
            chunks.append((filename, content))
    return text(body, "input_prefix"), text(body, "input_suffix"), text(body, "prompt"), chunks


def project(answer: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """The answer cut to `response_fields` (a/b: field b of object a, kept as "a/b"), as
    llama-server does; every field without them."""
    if fields is None:
        return answer
    kept: dict[str, Any] = {}
    for path in fields:
        value: Any = answer
        for key in path.split("/"):
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            kept[path] = value
    return kept
