"""Pre-tokenizers: where a BPE vocabulary cuts text into words before merging, as llama.cpp does.

A GGUF names its pre-tokenizer in `tokenizer.ggml.pre`. llama.cpp maps that name to a kind (a
list of regexes applied one after the other, each cutting the pieces the previous one left) and
to a few flags (`PreSettings`). The regexes below are llama.cpp's own, in its syntax, and they run
the way llama.cpp runs them, quirks included:

- A pattern that uses \\p{...} runs on the "collapsed" text, where every non-ASCII codepoint is one
  character standing for its class, and each \\p{...} becomes that character plus the ASCII members
  of the class. So \\p{Lu} matches every letter, lower case too, and `[^a-z]` matches every
  non-ASCII letter. Other patterns run on the text with non-ASCII whitespace made a vertical tab.
- Character classes are ASCII-only (\\s, \\d, \\b), as in std::regex in the C locale.
- Text that no match covers becomes a piece of its own.
- Two patterns are not regexes at all in llama.cpp but hand-written splitters, and are here too:
  Kimi-K2's and the digit grouping of AFMoE (which Tiny Aya's digit regex also runs through).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from llamay.errors import TokenizerError
from llamay.tokenizer import unicode as uc

# --- llama.cpp's patterns -----------------------------------------------------------------------

_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_NEWLINE_RUNS = r"[^\n]+|[\n]+"
_CJK_KANA = r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
_CJK_HANGUL = r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_ASCII_PUNCT_THEN_LETTERS = r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
_BLOOM = r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
_CASED_WORDS = (  # GPT-4o's words: upper-case run then lower-case run, by the lookahead trick
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+" + _CONTRACTIONS + "?"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*" + _CONTRACTIONS + "?"
)
_LU_LL_WORDS = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    + _CONTRACTIONS
    + r"?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    + _CONTRACTIONS
    + "?"
)
_PUNCT_SYMBOL_WORDS = (
    _ASCII_PUNCT_THEN_LETTERS + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"
)
# Hand-written splitters in llama.cpp, named by the pattern text that selects them there.
_KIMI_K2 = r"\p{Han}+"
_AFMOE_DIGITS = r"\p{AFMoE_digits}"
_TINY_AYA_DIGITS = r"\d{1,3}(?=(?:\d{3})*\b)"

# Each kind of pre-tokenizer (llama.cpp's LLAMA_VOCAB_PRE_TYPE_*, lower case): its patterns.
KINDS: dict[str, tuple[str, ...]] = {
    "default": (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"),
    "llama3": (_LLAMA3,),
    "dbrx": (_LLAMA3,),
    "smaug": (_LLAMA3,),
    "chatglm4": (_LLAMA3,),
    "jais2": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)"
        r"|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
    ),
    "deepseek_llm": (
        r"[\r\n]",
        r"\s?[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
        r"\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
        r"\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5"
        r"\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a"
        r"\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d"
        r"\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3"
        r"\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
        r"\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
        r"\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
        r"\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf"
        r"\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
        r"\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
        r"\U000118a0-\U000118df\U0001e900-\U0001e943]+",
        r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        r"\s+$",
        _CJK_HANGUL,
        r"\p{N}+",
    ),
    "deepseek_coder": (r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK_HANGUL, r"\p{N}"),
    "deepseek3_llm": (
        r"\p{N}{1,3}",
        _CJK_KANA,
        _PUNCT_SYMBOL_WORDS + r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "spark2_5": (
        r"\p{N}{1,3}",
        _CJK_KANA,
        _PUNCT_SYMBOL_WORDS + r"|[\r\n]|\s+(?!\S)|\s+",
        r"\p{N}",
    ),
    "youtu": (
        r"[\uac00-\ud7a3\u3131-\u318e]+"
        r"|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+"
        r"|[\u3105-\u312f]+|" + _CJK_KANA,
        _LU_LL_WORDS + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "falcon": (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]"),
    "starcoder": (r"\p{N}", _GPT2),
    "gpt2": (_GPT2,),
    "qwen2": (_QWEN2,),
    "qwen35": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "bloom": (_BLOOM,),
    "viking": (_BLOOM, r"\p{N}"),
    "tekken": (
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
        r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
        r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "chameleon": (
        r"<sentinel:[0-9]+>",
        r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        r"([\t\n]|    |  )",
        r"\p{N}",
        r"[\p{P}!-/:-@\[-`{-~]",
        _GPT2,
    ),
    "gpt4o": (_CASED_WORDS + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",),
    "granite_emb_multi": (
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+"
        + _CONTRACTIONS
        + r"?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*"
        + _CONTRACTIONS
        + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "tiny_aya": (
        _TINY_AYA_DIGITS,
        _LU_LL_WORDS + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "kimi_k2": (_KIMI_K2,),
    "superbpe": (r"\p{N}+", r"(?=(\d{3})+(?!\d))"),
    "bailingmoe": (
        r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "seed_coder": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
    ),
    "ufakzeka": (
        r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "afmoe": (
        _AFMOE_DIGITS,
        r"[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f"
        r"\u2f00-\u2fdf\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f"
        r"\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+",
        _PUNCT_SYMBOL_WORDS + r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "laguna": (_NEWLINE_RUNS, _QWEN2),
    "exaone_moe": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "gemma4": (_NEWLINE_RUNS,),
    "mmbert": (_NEWLINE_RUNS,),
    "sarvam_moe": (_NEWLINE_RUNS,),
    "minicpm5": (
        r"\p{N}{1,3}",
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "whitespace": (r"\S+",),
}
for _alias, _kind in {
    "hunyuan_dense": "deepseek3_llm",
    "joyai_llm": "deepseek3_llm",
    "hy_v4": "deepseek3_llm",
    "refact": "starcoder",
    "command_r": "starcoder",
    "smollm": "starcoder",
    "codeshell": "starcoder",
    "exaone": "starcoder",
    "minerva": "starcoder",
    "mellum2": "starcoder",
    "mpt": "gpt2",
    "olmo": "gpt2",
    "jais": "gpt2",
    "trillion": "gpt2",
    "granite_docling": "gpt2",
    "stablelm2": "qwen2",
    "hunyuan": "qwen2",
    "solar_open": "qwen2",
    "grok_2": "qwen2",
    "poro": "bloom",
    "gpt3_finnish": "bloom",
    "minimax_m2": "gpt4o",
}.items():
    KINDS[_alias] = KINDS[_kind]

# Kinds whose words stay raw UTF-8 (SentencePiece-style BPE) instead of GPT-2's byte alphabet.
RAW_UTF8_KINDS = frozenset({"gemma4", "mmbert", "sarvam_moe", "whitespace"})


# --- tokenizer.ggml.pre names -------------------------------------------------------------------


@dataclass(frozen=True)
class PreSettings:
    """What llama.cpp's vocabulary loader sets for one `tokenizer.ggml.pre` name."""

    kind: str
    clean_spaces: bool = True  # detokenize tidies " ," and the like (clean_up_tokenization_spaces)
    ignore_merges: bool = False  # a word that is itself a token is taken whole
    add_bos: bool = False  # default when the GGUF does not say
    escape_whitespaces: bool = False  # spaces become U+2581 before splitting
    no_bos_token: bool = False  # the vocabulary has no BOS at all


def _names(kind: str, *names: str, **flags: bool) -> dict[str, PreSettings]:
    return dict.fromkeys(names, PreSettings(kind, **flags))


_NO_CLEAN = {"clean_spaces": False}

PRE_NAMES: dict[str, PreSettings] = {
    **_names("default", "default"),
    **_names("minicpm5", "minicpm5", ignore_merges=True),
    **_names(
        "llama3",
        *("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0"),
        *("lfm2", "jina-v5-nano"),
        ignore_merges=True,
        add_bos=True,
    ),
    **_names("deepseek_llm", "deepseek-llm", **_NO_CLEAN),
    **_names("deepseek_coder", "deepseek-coder", **_NO_CLEAN),
    **_names("deepseek3_llm", "deepseek-v3", **_NO_CLEAN),
    **_names("spark2_5", "spark2_5", **_NO_CLEAN),
    **_names("youtu", "youtu", clean_spaces=False, ignore_merges=True),
    **_names("falcon", "falcon"),
    **_names("mpt", "mpt"),
    **_names("starcoder", "starcoder"),
    **_names(
        "gpt2",
        *("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de"),
        *("a.x-4.0", "mellum", "modern-bert", "exaone4"),
    ),
    **_names("jais2", "jais-2"),
    **_names("gemma4", "gemma4", "granite-embed-multi-311m", escape_whitespaces=True),
    **_names("mmbert", "mmbert", escape_whitespaces=True),
    **_names("sarvam_moe", "sarvam-moe", escape_whitespaces=True, clean_spaces=False),
    **_names("gpt2", "jina-v1-en", "jina-v2-code", "roberta-bpe"),  # (+ a SEP for embeddings)
    **_names("whitespace", "whitespace"),
    **_names("refact", "refact"),
    **_names("command_r", "command-r", **_NO_CLEAN),
    **_names("qwen2", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", **_NO_CLEAN),
    **_names("qwen35", "qwen35", **_NO_CLEAN),
    **_names("stablelm2", "stablelm2"),
    **_names("olmo", "olmo"),
    **_names("dbrx", "dbrx"),
    **_names("smaug", "smaug-bpe"),
    **_names("poro", "poro-chat", **_NO_CLEAN),
    **_names("chatglm4", "chatglm-bpe", no_bos_token=True),
    **_names("chatglm4", "glm4", "glm5", no_bos_token=True, ignore_merges=True),
    **_names("viking", "viking", **_NO_CLEAN),
    **_names("jais", "jais"),
    **_names("tekken", "tekken", clean_spaces=False, ignore_merges=True, add_bos=True),
    **_names("smollm", "smollm", **_NO_CLEAN),
    **_names("codeshell", "codeshell"),
    **_names("bloom", "bloom"),
    **_names("gpt3_finnish", "gpt3-finnish"),
    **_names("exaone", "exaone"),
    **_names("exaone_moe", "exaone-moe"),
    **_names("chameleon", "chameleon", add_bos=True, clean_spaces=False),
    **_names("minerva", "minerva-7b"),
    **_names("qwen2", "megrez"),
    **_names("gpt4o", "gpt-4o", "llama4", "kanana2", "talkie", **_NO_CLEAN),
    **_names(
        "granite_emb_multi", "granite-embed-multi-97m", clean_spaces=False, ignore_merges=True
    ),
    **_names("tiny_aya", "tiny_aya", "cohere2moe", **_NO_CLEAN),
    **_names("superbpe", "superbpe", **_NO_CLEAN),
    **_names("trillion", "trillion", **_NO_CLEAN),
    **_names("granite_docling", "granite-docling", **_NO_CLEAN),
    **_names("bailingmoe", "bailingmoe", "bailingmoe2", "llada-moe", **_NO_CLEAN),
    **_names("seed_coder", "seed-coder", **_NO_CLEAN),
    **_names("hunyuan", "hunyuan", **_NO_CLEAN),
    **_names("hunyuan_dense", "hunyuan-dense", **_NO_CLEAN),
    **_names("hy_v4", "hy_v4", **_NO_CLEAN),
    **_names("joyai_llm", "joyai-llm", **_NO_CLEAN),
    **_names("kimi_k2", "kimi-k2", **_NO_CLEAN),
    **_names("ufakzeka", "ufakzeka", **_NO_CLEAN),
    **_names("grok_2", "grok-2", **_NO_CLEAN),
    **_names("afmoe", "afmoe", **_NO_CLEAN),
    **_names("laguna", "laguna", **_NO_CLEAN),
    **_names("minimax_m2", "minimax-m2", **_NO_CLEAN),
    **_names("solar_open", "solar-open", **_NO_CLEAN),
    **_names("mellum2", "mellum2"),
}


def pre_settings(name: str | None) -> PreSettings:
    """The settings of a `tokenizer.ggml.pre` name; a missing name means "default", as in llama.cpp."""
    if not name:
        return PRE_NAMES["default"]
    try:
        return PRE_NAMES[name]
    except KeyError:
        raise TokenizerError(
            f"unknown pre-tokenizer {name!r} (tokenizer.ggml.pre); llamay knows "
            f"{len(PRE_NAMES)} names, the same as llama.cpp"
        ) from None


# --- running the patterns ---------------------------------------------------------------------


class _Views:
    """The text, and lazily the two transformed copies that llama.cpp's regexes run on."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def collapsed(self) -> str:
        return self.text.translate(uc.COLLAPSED)

    @cached_property
    def wide(self) -> str:
        return self.text.translate(uc.WIDE)


# A step turns the piece lengths so far (in codepoints) into finer ones.
Step = Callable[[_Views, list[int]], list[int]]

# \p{...} escapes that the collapsed text can express, by the class they stand for.
_CATEGORY_ESCAPES = {
    r"\p{N}": uc.NUMBER,
    r"\p{L}": uc.LETTER,
    r"\p{P}": uc.PUNCTUATION,
    r"\p{M}": uc.MARK,
    r"\p{S}": uc.SYMBOL,
    r"\p{Lu}": uc.LETTER,
    r"\p{Ll}": uc.LETTER,
    r"\p{Lt}": uc.LETTER,
    r"\p{Lm}": uc.LETTER,
    r"\p{Lo}": uc.LETTER,
}
# The ASCII members of each class, which keep their own characters in the collapsed text.
_ASCII_MEMBERS = {
    uc.NUMBER: "0-9",
    uc.LETTER: "A-Za-z",
    uc.PUNCTUATION: r"!-#%-*,-/:-;?-@\[-\]_\{\}",
    uc.MARK: "",
    uc.SYMBOL: r"\$\+<->^`\|\~",
}


def _collapse_pattern(pattern: str) -> str:
    """Rewrite each \\p{...} as its class character plus ASCII members, inside [...] or as one."""
    out: list[str] = []
    inside = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        escaped = i > 0 and pattern[i - 1] == "\\"
        if ch == "[" and not escaped:
            inside = True
        elif ch == "]" and inside and not escaped:
            inside = False
        elif pattern.startswith("\\p{", i):
            close = pattern.find("}", i + 3)
            flag = _CATEGORY_ESCAPES.get(pattern[i : close + 1]) if close != -1 else None
            if flag is not None:
                members = uc.COLLAPSED_CLASS_CHAR[flag] + _ASCII_MEMBERS[flag]
                out.append(members if inside else f"[{members}]")
                i = close + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _regex_step(pattern: str) -> Step:
    collapsed = any(escape in pattern for escape in _CATEGORY_ESCAPES)
    if collapsed:
        pattern = _collapse_pattern(pattern)
    if pattern.endswith("$") and not pattern.endswith(r"\$"):
        pattern = pattern[:-1] + r"\Z"  # ECMAScript's $ never matches before a final newline
    regex = re.compile(pattern, re.ASCII)

    def step(views: _Views, lengths: list[int]) -> list[int]:
        text = views.collapsed if collapsed else views.wide
        out: list[int] = []
        start = 0
        for length in lengths:
            piece = text[start : start + length]
            done = 0
            for match in regex.finditer(piece):
                begin, end = match.span()
                if begin > done:
                    out.append(begin - done)
                out.append(end - begin)
                done = end
            if done < length:
                out.append(length - done)
            start += length
        return out

    return step


def _digit_groups(views: _Views, lengths: list[int]) -> list[int]:
    """llama.cpp's AFMoE splitter: a run of digits goes out in threes, the remainder first.

    Like llama.cpp it glues whatever non-digits precede a run to the run's first group (later
    patterns cut them apart again).
    """
    text = views.text
    out: list[int] = []
    start = 0
    for length in lengths:
        end = start + length
        emitted = pos = start
        while pos < end:
            if uc.category(ord(text[pos])) != uc.NUMBER:
                pos += 1
                continue
            run_start = pos
            while pos < end and uc.category(ord(text[pos])) == uc.NUMBER:
                pos += 1
            cut = run_start + (pos - run_start) % 3
            if cut == run_start:
                cut += 3
            while cut <= pos:
                out.append(cut - emitted)
                emitted = cut
                cut += 3
        if emitted < end:
            out.append(end - emitted)
        start = end
    return out


def _kimi_k2(views: _Views, lengths: list[int]) -> list[int]:
    """llama.cpp's hand-written Kimi-K2 splitter: Han runs, cased words without Han, digits in
    threes, then GPT-4o's punctuation and whitespace rules."""
    out: list[int] = []
    start = 0
    for length in lengths:
        out += _kimi_k2_piece(views.text, start, start + length)
        start += length
    return out


def _kimi_k2_piece(text: str, start: int, end: int) -> list[int]:
    def cp(pos: int) -> int:
        return ord(text[pos]) if start <= pos < end else -1

    def flags(pos: int) -> int:
        return uc.category(ord(text[pos])) if start <= pos < end else 0

    def space(pos: int) -> bool:
        return start <= pos < end and ord(text[pos]) in uc.WHITESPACE

    def letter(pos: int) -> bool:
        return flags(pos) == uc.LETTER and not uc.is_han(cp(pos))

    out: list[int] = []
    emitted = pos = start
    while pos < end:
        c = cp(pos)
        f = flags(pos)
        if uc.is_han(c):
            while uc.is_han(cp(pos)):
                pos += 1
        elif letter(pos) or (
            c not in (0x0D, 0x0A) and f not in (uc.LETTER, uc.NUMBER) and letter(pos + 1)
        ):
            if f != uc.LETTER:  # the optional leading non-letter
                pos += 1
            while letter(pos):
                pos += 1
            if cp(pos) == 0x27 and pos + 1 < end:  # an optional contraction
                nxt = chr(cp(pos + 1)).lower() if cp(pos + 1) < 128 else ""
                after = chr(cp(pos + 2)).lower() if pos + 2 < end and cp(pos + 2) < 128 else ""
                if nxt in ("s", "t", "m", "d"):
                    pos += 2
                elif nxt + after in ("re", "ve", "ll"):
                    pos += 3
        elif f == uc.NUMBER:
            run = pos
            while flags(pos) == uc.NUMBER:
                pos += 1
                if pos - run >= 3:
                    out.append(pos - emitted)
                    emitted = run = pos
        else:
            probe = pos + 1 if c == 0x20 else pos
            if flags(probe) not in (0, uc.LETTER, uc.NUMBER) and not space(probe):
                pos = probe
                while flags(pos) not in (0, uc.LETTER, uc.NUMBER) and not space(pos):
                    pos += 1
                while cp(pos) in (0x0D, 0x0A):
                    pos += 1
            else:
                run = pos
                newline_end = 0
                while space(run):
                    if cp(run) in (0x0D, 0x0A):
                        newline_end = run + 1
                    run += 1
                if newline_end:
                    pos = newline_end
                elif run - pos > 1 and run < end:
                    pos = run - 1
                else:
                    pos = max(run, pos + 1)
        if pos > emitted:
            out.append(pos - emitted)
            emitted = pos
    return out


_HAND_WRITTEN: dict[str, Step] = {
    _KIMI_K2: _kimi_k2,
    _AFMOE_DIGITS: _digit_groups,
    _TINY_AYA_DIGITS: _digit_groups,
}


class PreTokenizer:
    """Splits text into the words a BPE vocabulary merges, for one pre-tokenizer kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.byte_level = kind not in RAW_UTF8_KINDS
        self._steps = [_HAND_WRITTEN.get(p) or _regex_step(p) for p in KINDS[kind]]

    def split(self, text: str) -> list[str]:
        views = _Views(text)
        lengths = [len(text)]
        for step in self._steps:
            lengths = step(views, lengths)
        words = []
        start = 0
        for length in lengths:
            if length:
                words.append(text[start : start + length])
                start += length
        return words
