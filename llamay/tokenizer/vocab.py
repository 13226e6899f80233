"""A GGUF vocabulary, read the way llama.cpp's vocabulary loader reads it.

Everything a tokenizer needs besides its algorithm: the token texts and scores, each token's
attributes (normal, control, user-defined, byte...), the special ids with llama.cpp's defaults per
vocabulary type, the add-BOS/EOS flags, the end-of-generation set (which llama.cpp partly derives
from token texts), the order in which special tokens are matched in text, and for BPE the merges
and the pre-tokenizer settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llamay._core.tokenize import StringTable
from llamay.errors import TokenizerError
from llamay.gguf import StringArray
from llamay.tokenizer.pretokenizers import PreSettings, pre_settings


class Attr:
    """The bits of llama_token_attr (plain ints: vocabularies hold 250k+ of them)."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    NORMALIZED = 1 << 6
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8
    SINGLE_WORD = 1 << 9


# tokenizer.ggml.token_type values (llama_token_type) to attributes.
_ATTR_BY_TOKEN_TYPE = {
    1: Attr.NORMAL,
    2: Attr.UNKNOWN,
    3: Attr.CONTROL,
    4: Attr.USER_DEFINED,
    5: Attr.UNUSED,
    6: Attr.BYTE,
}

# tokenizer.ggml.model -> the algorithm, for the models llama.cpp knows.
_KIND_BY_MODEL = {
    "llama": "spm",
    "gpt2": "bpe",
    "whitespace": "bpe",
    "hybriddna": "bpe",
    "gemma4": "bpe",
    "bert": "wpm",
    "t5": "ugm",
    "rwkv": "rwkv",
    "plamo2": "plamo2",
    "test": "test",
}
SUPPORTED_MODELS = ("llama", "gpt2", "gemma4", "bert")

# Default special ids per algorithm, before the GGUF's own keys (llama.cpp's defaults).
_DEFAULT_IDS: dict[str, dict[str, int]] = {
    "spm": {"bos": 1, "eos": 2, "unk": 0},
    "bpe": {"bos": 11, "eos": 11},
    "wpm": {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103},
    "gemma4": {},
}

_SPECIAL_ID_KEYS = (
    ("bos", "bos_token_id"),
    ("eos", "eos_token_id"),
    ("eot", "eot_token_id"),
    ("eom", "eom_token_id"),
    ("unk", "unknown_token_id"),
    ("sep", "seperator_token_id"),  # sic: the GGUF key is spelled so
    ("pad", "padding_token_id"),
    ("mask", "mask_token_id"),
    ("fim_pre", "fim_pre_token_id"),
    ("fim_suf", "fim_suf_token_id"),
    ("fim_mid", "fim_mid_token_id"),
    ("fim_pad", "fim_pad_token_id"),
    ("fim_rep", "fim_rep_token_id"),
    ("fim_sep", "fim_sep_token_id"),
    ("fim_pre", "prefix_token_id"),  # deprecated spellings
    ("fim_suf", "suffix_token_id"),
    ("fim_mid", "middle_token_id"),
)

# Texts that llama.cpp takes for these roles when the GGUF names no id.
_ROLE_TEXTS = {
    "eot": (
        *("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"),
        *("<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>"),
        "<end_of_utterance>",
    ),
    "eom": ("<|eom_id|>",),
    "fim_pre": (
        *("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>"),
        *("▁<PRE>", "<|code_prefix|>", "<|prefix|>"),
    ),
    "fim_suf": (
        *("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>"),
        *("▁<SUF>", "<|code_suffix|>", "<|suffix|>"),
    ),
    "fim_mid": (
        *("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>"),
        *("▁<MID>", "<|code_middle|>", "<|middle|>"),
    ),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}

# Texts of tokens that end generation, whatever the GGUF says (llama.cpp's list).
_EOG_TEXTS = frozenset(
    {
        *("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>"),
        *("<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>"),
        *("_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>"),
        *("<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["),
    }
)
# gpt-oss: tokens llama.cpp always renders, whatever their type.
_ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


@dataclass(eq=False)
class Vocab:
    """A loaded vocabulary. Ids are None where llama.cpp has LLAMA_TOKEN_NULL."""

    model: str  # tokenizer.ggml.model
    kind: str  # "spm", "bpe" or "wpm"
    tokens: StringArray
    scores: np.ndarray  # float64, one per token
    attrs: list[int]  # Attr bits of each token
    ids: dict[str, int | None]  # special ids by role: bos, eos, eot, eom, unk, sep, pad, ...
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool  # SPM: a space before text that follows the start or a special token
    clean_spaces: bool  # detokenize tidies spaces before punctuation (BPE, WordPiece)
    lowercase: bool  # WordPiece: lower-case the text first
    strip_accents: bool  # WordPiece: drop accents (through the first codepoint of the NFD)
    pre: PreSettings | None  # BPE only
    table: StringTable  # a token's UTF-8 bytes to its id
    merges: StringArray = field(default_factory=lambda: StringArray.of([]))  # BPE, rank order
    eog: frozenset[int] = frozenset()
    special_order: list[int] = field(default_factory=list)  # longest text first

    @property
    def escape_whitespaces(self) -> bool:
        return self.kind in ("spm", "wpm") or (self.pre is not None and self.pre.escape_whitespaces)

    def token_id(self, text: str) -> int | None:
        return self.table.get(text.encode("utf-8", "surrogatepass"))


def load_vocab(metadata: dict[str, Any], where: str) -> Vocab:
    """The vocabulary of a GGUF's metadata; `where` names the file in error messages."""
    model = _get(metadata, "tokenizer.ggml.model", str, where)
    if model is None:
        raise TokenizerError(f"{where}: no vocabulary (tokenizer.ggml.model is missing)")
    if model in ("no_vocab", "none"):
        raise TokenizerError(
            f"{where}: the model has no vocabulary (tokenizer.ggml.model={model!r})"
        )
    kind = _KIND_BY_MODEL.get(model)
    if kind is None:
        raise TokenizerError(f"{where}: unknown tokenizer {model!r} (tokenizer.ggml.model)")
    if model not in SUPPORTED_MODELS:
        raise TokenizerError(
            f"{where}: the {model!r} tokenizer ({kind.upper()}) is not supported; llamay "
            "tokenizes SentencePiece ('llama'), BPE ('gpt2', 'gemma4') and WordPiece ('bert') "
            "vocabularies"
        )

    pre: PreSettings | None = None
    if kind == "bpe":
        pre = pre_settings("gemma4" if model == "gemma4" else metadata.get("tokenizer.ggml.pre"))
        add_bos, clean_spaces, add_space_prefix = pre.add_bos, pre.clean_spaces, False
    elif kind == "wpm":
        add_bos, clean_spaces, add_space_prefix = True, True, False
    else:
        add_bos, clean_spaces, add_space_prefix = True, False, True
    add_space_prefix = _get(
        metadata, "tokenizer.ggml.add_space_prefix", bool, where, add_space_prefix
    )

    tokens = _strings(metadata, "tokenizer.ggml.tokens", where)
    if tokens is None:
        raise TokenizerError(f"{where}: no tokenizer.ggml.tokens (the token list)")
    n = len(tokens)
    if (tokens.encoded_lengths() == 0).any():  # as llama.cpp: an empty token gets a placeholder
        tokens = StringArray.of(t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens))
    table = StringTable(tokens.blob, tokens.offsets)
    if table.first_duplicate is not None:
        first, again = table.first_duplicate
        raise TokenizerError(
            f"{where}: duplicate token {tokens[again]!r} in the vocabulary (ids {first} and "
            f"{again})"
        )
    scores = _scores(metadata, n, where)
    attrs = _attributes(metadata, n, where)
    merges = _merges(metadata, model, pre, where) if kind == "bpe" else StringArray.of([])

    defaults = _DEFAULT_IDS["gemma4" if model == "gemma4" else kind]
    ids: dict[str, int | None] = {role: None for role, _ in _SPECIAL_ID_KEYS}
    for role, value in defaults.items():
        ids[role] = value if value < n else None
    if pre is not None and pre.no_bos_token:
        ids["bos"] = None
    for role, key in _SPECIAL_ID_KEYS:
        value = metadata.get(f"tokenizer.ggml.{key}")
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < n:
            ids[role] = int(value)

    # BERT's normalizer: lower-casing on unless said otherwise, accent stripping as lower-casing
    lowercase = _get(metadata, "tokenizer.ggml.normalizer.lowercase", bool, where, True)
    strip_accents = _get(
        metadata, "tokenizer.ggml.normalizer.strip_accents", bool, where, lowercase
    )
    add_bos = _get(metadata, "tokenizer.ggml.add_bos_token", bool, where, add_bos)
    add_eos = _get(metadata, "tokenizer.ggml.add_eos_token", bool, where, False)
    if pre is not None and pre.kind == "gemma4":
        add_bos = True

    vocab = Vocab(
        model=model,
        kind=kind,
        tokens=tokens,
        scores=scores,
        attrs=attrs,
        ids=ids,
        add_bos=add_bos,
        add_eos=add_eos,
        add_space_prefix=add_space_prefix,
        clean_spaces=clean_spaces,
        lowercase=lowercase,
        strip_accents=strip_accents,
        pre=pre,
        table=table,
        merges=merges,
    )
    _find_roles_by_text(vocab)
    _mark_unused(vocab)
    vocab.eog = _end_of_generation(vocab)
    vocab.special_order = _special_order(vocab)
    _model_specific_attributes(vocab, metadata)
    vocab.attrs = vocab.attrs.tolist()  # an array while loading (bulk scans), a list after
    return vocab


# --- the pieces of loading ----------------------------------------------------------------------


def _get(metadata: dict[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    if key not in metadata:
        return default
    value = metadata[key]
    if kind is bool and isinstance(value, (bool, np.bool_)):
        return bool(value)
    if kind is str and isinstance(value, str):
        return value
    raise TokenizerError(f"{where}: {key} has the wrong type ({type(value).__name__})")


def _strings(metadata: dict[str, Any], key: str, where: str) -> StringArray | None:
    """An array of strings of the metadata: as the GGUF reader gives it, or from a list."""
    value = metadata.get(key)
    if value is None or isinstance(value, StringArray):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return StringArray.of(value)
    raise TokenizerError(f"{where}: {key} must be a list of strings")


def _scores(metadata: dict[str, Any], n: int, where: str) -> np.ndarray:
    scores = metadata.get("tokenizer.ggml.scores")
    if scores is None:
        return np.zeros(n, dtype=np.float64)
    scores = np.asarray(scores)
    if scores.dtype not in (np.float32, np.int32) or scores.ndim != 1:
        raise TokenizerError(f"{where}: tokenizer.ggml.scores must be float32 or int32 numbers")
    if len(scores) < n:
        raise TokenizerError(f"{where}: {len(scores)} token scores for {n} tokens")
    # llama.cpp keeps scores as float; widening float32 (or an int32 cast to float) is exact.
    return scores[:n].astype(np.float32).astype(np.float64)


def _attributes(metadata: dict[str, Any], n: int, where: str) -> np.ndarray:
    types = metadata.get("tokenizer.ggml.token_type")
    if types is None:
        return np.full(n, Attr.NORMAL, dtype=np.int32)
    types = np.asarray(types)
    if types.dtype != np.int32 or types.ndim != 1:
        raise TokenizerError(f"{where}: tokenizer.ggml.token_type must be int32 numbers")
    if len(types) < n:
        raise TokenizerError(f"{where}: {len(types)} token types for {n} tokens")
    table = np.array([_ATTR_BY_TOKEN_TYPE.get(t, Attr.UNDEFINED) for t in range(8)], np.int32)
    return table[np.clip(types[:n], 0, 7)]  # 7 and above, like negatives, are undefined


def _merges(
    metadata: dict[str, Any], model: str, pre: PreSettings | None, where: str
) -> StringArray:
    merges = _strings(metadata, "tokenizer.ggml.merges", where)
    if merges is None:
        if pre is not None and pre.kind == "kimi_k2" and model != "gemma4":
            return StringArray.of([])  # Kimi-K2 vocabularies carry no merges
        raise TokenizerError(f"{where}: a BPE vocabulary without tokenizer.ggml.merges")
    return merges


def _find_roles_by_text(vocab: Vocab) -> None:
    """Roles the GGUF leaves unnamed, taken by token text. Where several texts are present,
    llama.cpp takes the first its hash map yields; the first in the list is taken here, which
    agrees for Llama 3, Qwen 2 and Phi-3 (the end-of-generation set is the same either way)."""
    for role, texts in _ROLE_TEXTS.items():
        if vocab.ids[role] is not None:
            continue
        found = next((i for i in map(vocab.token_id, texts) if i is not None), None)
        if found is not None:
            vocab.ids[role] = found
            vocab.attrs[found] |= Attr.CONTROL


def _mark_unused(vocab: Vocab) -> None:
    for i in np.flatnonzero(vocab.attrs & Attr.CONTROL).tolist():
        if "unused" in vocab.tokens[i]:
            vocab.attrs[i] |= Attr.UNUSED


def _end_of_generation(vocab: Vocab) -> frozenset[int]:
    ids = vocab.ids
    eog = {ids[role] for role in ("fim_pad", "fim_rep", "fim_sep") if ids[role] is not None}
    for text in _EOG_TEXTS:
        i = vocab.token_id(text)
        if i is not None:
            eog.add(i)
            vocab.attrs[i] |= Attr.CONTROL
    for text in _ALWAYS_RENDERED:
        i = vocab.token_id(text)
        if i is not None:
            vocab.attrs[i] = Attr.USER_DEFINED
    eog |= {ids[role] for role in ("eos", "eot", "eom") if ids[role] is not None}

    # gpt-oss and Solar Open end a message with <|end|> but not the generation.
    texts = {vocab.tokens[i]: i for i in eog}
    has_call = "<|call|>" in texts or "<|calls|>" in texts
    if "<|end|>" in texts and has_call and ("<|return|>" in texts or "<|flush|>" in texts):
        eog.discard(texts["<|end|>"])
        vocab.attrs[texts["<|end|>"]] = Attr.USER_DEFINED
    # Gemma 4 and PLaMo-2 use </s> as ordinary text.
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
        eog.discard(texts["</s>"])
        vocab.attrs[texts["</s>"]] = Attr.NORMAL
    return frozenset(eog)


def _special_order(vocab: Vocab) -> list[int]:
    """The tokens matched in text before tokenizing, longest text first (ties by id)."""
    kinds = Attr.CONTROL | Attr.USER_DEFINED | Attr.UNKNOWN
    special = np.flatnonzero(vocab.attrs & kinds).tolist()
    special.sort(key=lambda i: -len(vocab.tokens[i].encode("utf-8")))
    return special


def _model_specific_attributes(vocab: Vocab, metadata: dict[str, Any]) -> None:
    """Strip flags llama.cpp sets by model name, as GGUF files do not carry them."""
    name = str(metadata.get("general.name", "")).lower()
    pre_name = str(metadata.get("tokenizer.ggml.pre", ""))
    arch = str(metadata.get("general.architecture", ""))

    def set_flag(text: str, flag: Attr, on: bool) -> None:
        i = vocab.token_id(text)
        if i is not None:
            vocab.attrs[i] = vocab.attrs[i] | flag if on else vocab.attrs[i] & ~flag

    if any(s in pre_name for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code", "mmbert")) or any(
        s in arch for s in ("nomic-bert-moe", "jina-bert-v3")
    ):
        set_flag("<mask>", Attr.LSTRIP, True)
    elif "phi-3" in name or "phi3" in name:
        for i in vocab.special_order:
            vocab.attrs[i] |= Attr.RSTRIP
        set_flag("</s>", Attr.RSTRIP, True)
        for text in ("<unk>", "<s>", "<|endoftext|>"):
            set_flag(text, Attr.RSTRIP, False)
    elif "modern-bert" in name:
        set_flag("[MASK]", Attr.LSTRIP, True)
