"""llama-server's request bodies, declared once (fields.py), read into llamay's terms, and the
settings its answers echo.

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
from llamay.chat.spellings import OPENAI_TOOLS, SCHEMA_FORMAT
from llamay.engine import Model, ranges
from llamay.engine.sampling import SamplingParams
from llamay.errors import GrammarError
from llamay.server.concepts import Format, Gbnf, Tools
from llamay.server.errors import ApiError
from llamay.server.fields import (
    Anything,
    Custom,
    Field,
    Flag,
    Invalid,
    Kind,
    LogitBias,
    Number,
    Object,
    Refused,
    Shape,
    Stop,
    Text,
    param,
)

if TYPE_CHECKING:
    from llamay.server.state import ServerState

LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's seed that means "draw one"
# llamay's sampling chain, in llama.cpp's names (engine/sampling.py)
SAMPLERS = ["penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"]
_MAX_EXTRA_FILES = 1024
_MAX_PROMPTS = int(ranges.RANGES["n"].high)
_BIAS = Field("logit_bias", LogitBias())


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


def read_completion(model: Model, values: Mapping[str, Any]) -> Completion:
    """A /completion or /infill body's options (see Completion), read by its declaration
    (COMPLETION, INFILL), in the model's terms."""
    n_predict = values["n_predict"]
    n_probs = values["n_probs"]
    if n_probs and values["post_sampling_probs"]:
        raise ApiError(
            400,
            "post_sampling_probs is not supported: llamay gives each token's probability "
            "before sampling (n_probs alone)",
            "post_sampling_probs",
        )
    grammar = _grammar(values)
    bias = _logit_bias(model, values["logit_bias"])
    if values["ignore_eos"]:  # as llama.cpp: every end-of-generation token banned
        bias.update(dict.fromkeys(model.tokenizer.eog_ids, -100.0))
    sampling = COMPLETION.sampling(values)
    if n_predict >= 0:
        sampling["max_tokens"] = n_predict
    if bias:  # as OpenAI's are read: from -100 (a ban) to 100
        sampling["logit_bias"] = _BIAS.read({"logit_bias": bias}, {})
    if n_probs:
        sampling["logprobs"] = n_probs
    if grammar is not None:
        sampling["grammar"] = grammar
    stream = values["stream"]
    completion = Completion(
        n_predict=None if n_predict < 0 else n_predict,
        stream=stream,
        sampling=sampling,
        n_probs=n_probs,
        return_tokens=values["return_tokens"],
        id_slot=None if values["id_slot"] < 0 else values["id_slot"],
        n_indent=values["n_indent"],
        t_max_predict_ms=values["t_max_predict_ms"],
        response_fields=values["response_fields"],
        n_cmpl=values["n_cmpl"],
        timings_per_token=values["timings_per_token"],
        settings={},
    )
    completion.settings = generation_settings(
        model,
        sampling,
        n_predict,
        stream=stream,
        ignore_eos=values["ignore_eos"],
        grammar=grammar,
    )
    completion.settings["timings_per_token"] = completion.timings_per_token
    return completion


def _grammar(values: Mapping[str, Any]) -> Any:
    """The grammar of `grammar` (GBNF) or `json_schema` ({}: any JSON value); 400 naming the
    field it fails in."""
    gbnf, schema = values["grammar"], values["json_schema"]
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
    several = isinstance(value, list) and value
    if several and all(isinstance(p, (str, list, Mapping)) for p in value):
        if len(value) > _MAX_PROMPTS:
            raise ApiError(400, f"at most {_MAX_PROMPTS} prompts per request", "prompt")
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


def _extra(value: Any) -> list[tuple[str, str]]:
    """/infill's input_extra: {"filename", "text"} chunks of other files."""
    if not isinstance(value, list) or len(value) > _MAX_EXTRA_FILES:
        raise Invalid(
            f"{{name}} must be a list of at most {_MAX_EXTRA_FILES} "
            '{"filename": string, "text": string} objects'
        )
    chunks = []
    for chunk in value:
        filename = chunk.get("filename", "tmp") if isinstance(chunk, Mapping) else None
        content = chunk.get("text", "") if isinstance(chunk, Mapping) else None
        if not isinstance(filename, str) or not isinstance(content, str):
            raise Invalid('each input_extra chunk must be {"filename": string, "text": string}')
        chunks.append((filename, content))
    return chunks


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


# --- the request bodies, declared once -----------------------------------------------------------


@dataclass(frozen=True)
class _Absent(Kind):
    """A sampler llamay does not have: taken only at a value that leaves it off (`off`, the
    schema of those values)."""

    off: Mapping[str, Any]

    def read(self, value: Any, values: Mapping[str, Any]) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not _within(value, self.off)
        ):
            raise Invalid(
                "{name} asks for a sampler llamay does not have; leave it out (llamay samples "
                f"with {', '.join(SAMPLERS)})"
            )

    def schema(self) -> dict[str, Any]:
        return {"type": "number", **self.off}


def _within(value: float, off: Mapping[str, Any]) -> bool:
    return value == off["const"] if "const" in off else value <= off["maximum"]


class _Seed(Number):
    """llama.cpp's seed: -1 or 0xFFFFFFFF draws one."""

    def read(self, value: Any, values: Mapping[str, Any]) -> int | float | None:
        seed = super().read(value, values)
        return None if seed in (-1, LLAMA_DEFAULT_SEED) else seed


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise Invalid("{name} must be a list of field names")
    return value


def _samplers(value: Any) -> Any:
    if not isinstance(value, (str, list)):
        raise Invalid("{name} must be a list of sampler names")
    return value


def _token_ids(value: Any) -> list[int]:
    """Token ids (whether each is in the vocabulary is the model's to tell)."""
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    ):
        raise Invalid("{name} must be a list of token ids")
    return value


def _turns(value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise Invalid("{name} must be a non-empty list of chat turns")
    return value


_STRING = {"type": "string"}
_MILLISECONDS = Number(ranges.Range(float, 0, ranges.INF))
MODEL = Field(
    "model",
    Text(nonempty=True),
    "needed only where the server holds several models",
    invalid="model must be the name of a model, such as gemma3:270m",
)
# What /completion and /infill share: their generation options.
_OPTIONS = (
    MODEL,
    Field(
        "n_predict",
        Number(ranges.Range(int, -1, ranges.INF)),
        "tokens to generate at most (-1: no limit; 0: only fill the cache)",
        default=-1,
        also=("max_tokens",),
    ),
    *(Field(name, param(name)) for name in ranges.SAMPLING if name != "seed"),
    Field("seed", _Seed(ranges.RANGES["seed"], sampling=True), "-1: draw one"),
    Field("stop", Stop()),
    Field("stream", Flag(), "server-sent events as it is made", default=False),
    Field(
        "n_probs",
        Number(ranges.Range(int, 0, ranges.RANGES["logprobs"].high)),
        "each token's probability and its n most likely alternatives",
        default=0,
    ),
    Field("post_sampling_probs", Flag(), "not supported with n_probs", default=False),
    Field(
        "logit_bias",
        Anything({"type": ["array", "object"]}),
        '[[token or text, bias or false], ...] or {"token": bias}',
    ),
    Field("ignore_eos", Flag(), "ban every end-of-generation token", default=False),
    Field("grammar", Gbnf(), "GBNF the answer must be a sentence of", feeds="output"),
    Field("json_schema", Format(SCHEMA_FORMAT), "the answer's JSON schema", feeds="output"),
    Field("return_tokens", Flag(), "the generated token ids too", default=False),
    Field("cache_prompt", Flag(), "accepted: the prefix cache is always on", default=True),
    Field("return_progress", Flag(), "accepted: the prompt is evaluated whole", default=True),
    Field(
        "id_slot",
        Number(ranges.Range(int, -1, ranges.INF)),
        "the slot to run in (-1: an idle one)",
        default=-1,
    ),
    Field(
        "n_indent",
        Number(ranges.Range(int, 0, ranges.INF)),
        "a later line indented less ends the answer",
        default=0,
    ),
    Field("t_max_prompt_ms", _MILLISECONDS, "accepted: the prompt is evaluated whole", default=0),
    Field(
        "t_max_predict_ms",
        _MILLISECONDS,
        "after this long generating, the answer ends at its next newline",
        default=0,
    ),
    Field(
        "response_fields",
        Custom(_names, {"type": "array", "items": _STRING}),
        "the answer's fields to keep (a/b: b of object a)",
    ),
    Field("n_cmpl", param("n"), "completions per prompt", also=("n",)),
    Field(
        "samplers",
        Custom(_samplers, {"type": ["array", "string"]}),
        "accepted: llamay's chain is fixed",
    ),
    Field("timings_per_token", Flag(), "timings in every streamed event", default=False),
    Field("mirostat", _Absent({"const": 0})),
    Field("dynatemp_range", _Absent({"const": 0})),
    Field("xtc_probability", _Absent({"const": 0})),
    Field("dry_multiplier", _Absent({"const": 0})),
    Field("top_n_sigma", _Absent({"maximum": 0})),
    Field("lora", Refused("lora: llamay loads no LoRA adapters")),
)

COMPLETION = Shape(
    *_OPTIONS,
    Field(
        "prompt",
        Anything({"type": ["string", "array", "object"]}),
        'a string, token ids, both mixed, {"prompt_string"}, or a list of such prompts',
        required="prompt is required",
    ),
)

INFILL = Shape(
    *_OPTIONS,
    Field("input_prefix", Text(), "the code before the cursor", default=""),
    Field("input_suffix", Text(), "the code after the cursor", default=""),
    Field("prompt", Text(), "the text already written after the prefix", default=""),
    Field(
        "input_extra",
        Custom(
            _extra,
            {
                "type": "array",
                "items": {"type": "object", "properties": {"filename": _STRING, "text": _STRING}},
            },
        ),
        "other files of the repository, as context",
        default=[],
    ),
)

TOKENIZE = Shape(
    MODEL,
    Field(
        "content",
        Text(),
        "the text to tokenize",
        required="content is required: the text to tokenize",
        invalid="content is required: the text to tokenize",
    ),
    Field("add_special", Flag(), "BOS where the model asks for it", default=False),
    Field("parse_special", Flag(), "special tokens' text as those tokens", default=True),
    Field("with_pieces", Flag(), "each token with its text", default=False),
)

DETOKENIZE = Shape(
    MODEL,
    Field(
        "tokens",
        Custom(_token_ids, {"type": "array", "items": {"type": "integer", "minimum": 0}}),
        default=[],
    ),
)

APPLY_TEMPLATE = Shape(
    MODEL,
    Field(
        "messages",
        Custom(_turns, {"type": "array", "items": {"type": "object"}, "minItems": 1}),
        required="messages must be a non-empty list of chat turns",
    ),
    Field("tools", Tools(OPENAI_TOOLS)),
    Field("chat_template_kwargs", Object(), "the chat template's variables"),
)

SLOT_ACTION = Shape(
    MODEL,
    Field("filename", Anything(_STRING), "the snapshot's name under --slot-save-path"),
)
