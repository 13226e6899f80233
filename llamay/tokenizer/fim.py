"""Fill-in-the-middle prompts: the tokens that ask a code model for the text between a prefix
and a suffix.

A FIM model learned markers around the two sides: `[PRE] prefix [SUF] suffix [MID]`, after
which it writes the middle and ends with an end-of-generation token. The markers are the
vocabulary's `fim_pre`, `fim_suf` and `fim_mid` roles, which the vocabulary loader takes from
`tokenizer.ggml.fim_*_token_id` or, in files without those keys (Qwen2.5-Coder's), recognises
by their text (`<|fim_prefix|>`, `<fim-prefix>`, `<PRE>`...; vocab.py).

Models with `fim_rep` and `fim_sep` (`<|repo_name|>`, `<|file_sep|>`) also learned the
repository-level format, other files of the project first:

    [REP]myproject\\n [SEP]other.py\\n <its text> ... [SEP]filename\\n [PRE] prefix [SUF] suffix [MID]

as llama.cpp's server writes it. Without those tokens, other files go before `[PRE]` as plain
text, each under a `--- NAME ---` line.

The texts are tokenized with special tokens not parsed: code that spells `<|fim_middle|>`
stays text. What does not fit the context loses the prefix's start, then the suffix's end,
then the other files' start, in whole blocks of `DROP_BLOCK` tokens: while a file is edited
near its cursor, what is kept keeps its first tokens, so the prefix cache still holds them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llamay.errors import ContextOverflow, InfillUnsupported
from llamay.tokenizer.tokenizer import Tokenizer

REPO_NAME = "myproject"  # the project and file names llama.cpp's server writes
FILE_NAME = "filename"
# Tokens are dropped from a side that does not fit in multiples of this: a small edit does not
# move where a kept side starts, and its cached pages stay usable.
DROP_BLOCK = 64
# Room kept for the middle when the request sets no limit.
DEFAULT_RESERVE = 256

_NAMES = {"fim_pre": "prefix", "fim_suf": "suffix", "fim_mid": "middle"}


@dataclass(frozen=True)
class FimTokens:
    """A vocabulary's fill-in-the-middle markers (None where it has none)."""

    pre: int | None
    suf: int | None
    mid: int | None
    pad: int | None
    rep: int | None
    sep: int | None

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> FimTokens:
        ids = tokenizer.vocab.ids
        roles = ("fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep")
        return cls(*(ids[role] for role in roles))

    @property
    def missing(self) -> list[str]:
        """The markers a FIM prompt needs that the vocabulary lacks: "prefix", "suffix",
        "middle"."""
        found = {"fim_pre": self.pre, "fim_suf": self.suf, "fim_mid": self.mid}
        return [_NAMES[role] for role, token in found.items() if token is None]

    @property
    def repo_level(self) -> bool:
        """Whether the model learned the repository-level format."""
        return self.rep is not None and self.sep is not None


def supports_infill(tokenizer: Tokenizer) -> bool:
    return not FimTokens.of(tokenizer).missing


def require_fim(tokenizer: Tokenizer, name: str) -> FimTokens:
    """The model's FIM markers, or InfillUnsupported naming what model `name` lacks."""
    fim = FimTokens.of(tokenizer)
    if fim.missing:
        missing = fim.missing
        what = " and ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1 else missing)
        raise InfillUnsupported(
            f"Infill is not supported by this model: {name} has no fill-in-the-middle {what} "
            f"token{'s' if len(missing) > 1 else ''} (neither tokenizer.ggml.fim_pre_token_id, "
            "fim_suf_token_id, fim_mid_token_id nor a token such as <|fim_prefix|>, "
            "<|fim_suffix|>, <|fim_middle|> in its vocabulary); use a code model trained to "
            "fill in the middle, such as Qwen2.5-Coder"
        )
    return fim


def fim_prompt(
    tokenizer: Tokenizer,
    prefix: str | Sequence[int],
    suffix: str,
    *,
    middle: str = "",
    extra: Sequence[tuple[str, str]] | None = None,
    n_ctx: int,
    reserve: int | None = None,
    name: str = "the model",
) -> list[int]:
    """The token ids asking for the text between `prefix` (text, or token ids) and `suffix`.

    `middle`: text already written after the prefix (llama-server's `prompt`), which the
    answer continues. `extra`: other files of the project as (filename, text), before the
    file being edited; None writes the single-file format, a sequence (even empty) the
    repository-level one where the model has it. The prompt leaves `reserve` tokens of the
    `n_ctx` context free for the answer (default DEFAULT_RESERVE, at most half of it),
    cutting what does not fit (the module docstring). InfillUnsupported (naming `name`)
    when the vocabulary has no FIM markers; ContextOverflow when the markers and `middle`
    alone leave no room.
    """
    fim = require_fim(tokenizer, name)

    def text(value: str) -> list[int]:
        return tokenizer.tokenize(value, add_bos=False, special=False) if value else []

    assert fim.pre is not None and fim.suf is not None and fim.mid is not None
    # Text beyond what a context could hold, known from its length alone, is cut before it is
    # tokenized: no 30 MB file is tokenized only to keep its last few thousand tokens.
    chars = (n_ctx + 1) * tokenizer.max_token_chars
    if len(middle) > chars:
        raise ContextOverflow(
            f"the infill prompt is {len(middle)} characters: more than a context of {n_ctx} "
            "tokens holds"
        )
    if isinstance(prefix, str) and len(prefix) > chars:
        # cut at a multiple of DROP_BLOCK characters, so that typing does not move the cut
        prefix = prefix[-(-(len(prefix) - chars) // DROP_BLOCK) * DROP_BLOCK :]
    suffix = suffix[:chars]
    if extra is not None:
        extra = _last_chars(extra, chars)
    pre = text(prefix) if isinstance(prefix, str) else [int(t) for t in prefix]
    suf, mid = text(suffix), text(middle)
    head = [tokenizer.bos_id] if tokenizer.add_bos and tokenizer.bos_id is not None else []
    room = n_ctx - _reserve(reserve, n_ctx) - len(head) - 3 - len(mid)
    if room < 0:
        raise ContextOverflow(
            f"the infill prompt's markers and its {len(mid)}-token prompt leave no room in a "
            f"context of {n_ctx} tokens; shorten the prompt or ask for fewer tokens"
        )
    if len(pre) + len(suf) > room:
        # the suffix gets a quarter of the room, more when the prefix leaves it more
        suf = suf[: min(len(suf), max(room // 4, room - len(pre)))]
        pre = pre[_dropped(len(pre), room - len(suf)) :]
    others = _others(fim, extra, text)
    others = others[_dropped(len(others), room - len(pre) - len(suf)) :]
    return [*head, *others, fim.pre, *pre, *mid, fim.suf, *suf, fim.mid]


def _last_chars(extra: Sequence[tuple[str, str]], chars: int) -> list[tuple[str, str]]:
    """The files nearest the current one (the list's end) that hold at most `chars`
    characters, the first of them cut to its end."""
    kept: list[tuple[str, str]] = []
    for filename, body in reversed(extra):
        if chars <= 0:
            break
        kept.append((filename, body[-chars:]))
        chars -= len(body)
    return kept[::-1]


def _reserve(reserve: int | None, n_ctx: int) -> int:
    wanted = DEFAULT_RESERVE if reserve is None or reserve < 0 else max(1, reserve)
    return min(wanted, max(1, n_ctx // 2))


def _dropped(n: int, keep: int) -> int:
    """How many of n tokens to drop from the front to keep at most `keep`: whole DROP_BLOCKs,
    or all of them."""
    if n <= keep:
        return 0
    blocks = -(-(n - max(keep, 0)) // DROP_BLOCK)
    return min(n, blocks * DROP_BLOCK)


def _others(
    fim: FimTokens,
    extra: Sequence[tuple[str, str]] | None,
    text: Callable[[str], list[int]],
) -> list[int]:
    """The other files' tokens (`text` tokenizes), in the repository-level format where the
    model has it."""
    if extra is None:
        return []
    if fim.rep is None or fim.sep is None:
        out: list[int] = []
        for filename, body in extra:
            out += text(f"\n\n--- {filename} ---\n\n{body}")
        return out
    out = [fim.rep, *text(f"{REPO_NAME}\n")]
    for filename, body in extra:
        out += [fim.sep, *text(f"{filename}\n"), *text(body)]
    return [*out, fim.sep, *text(f"{FILE_NAME}\n")]
