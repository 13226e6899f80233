"""WordPiece (`tokenizer.ggml.model = bert`): BERT-style embedding models, as llama.cpp's
llm_tokenizer_wpm.

Text is normalized and cut into words as BERT's basic tokenizer does (lower-cased and accents
stripped when the vocabulary asks, control characters dropped, punctuation and CJK ideographs
made words of their own), then each word, led by U+2581, is covered by the longest tokens from the
left.
"""

from __future__ import annotations

from llamay._core.tokenize import StringTable, wpm_encode
from llamay.tokenizer import unicode as uc
from llamay.tokenizer.vocab import Vocab

_SPACE = uc.SPACE.encode("utf-8")

# Ideograph ranges of BERT's _is_chinese_char, as llama.cpp copies them (the 0x2B920 bound
# follows Hugging Face's code).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class WpmEncoder:
    def __init__(self, vocab: Vocab, tokens: StringTable) -> None:
        self._tokens = tokens
        self._max_token_len = int(vocab.tokens.encoded_lengths().max())
        unknown = vocab.ids["unk"]
        self._unknown = -1 if unknown is None else unknown
        self._lowercase = vocab.lowercase
        self._strip_accents = vocab.strip_accents

    def encode(self, pieces: list[int | str]) -> list[int]:
        """Token ids of raw pieces (str) and special tokens (int) from the special-token cut."""
        out: list[int] = []
        for piece in pieces:
            if isinstance(piece, int):
                out.append(piece)
                continue
            words = [_SPACE + w.encode("utf-8", "surrogatepass") for w in self._words(piece)]
            out += wpm_encode(words, self._tokens, self._max_token_len, self._unknown)
        return out

    def _words(self, text: str) -> list[str]:
        words: list[str] = []
        word: list[str] = []
        for ch in text:
            cp = uc.nfd_first(ord(ch)) if self._strip_accents else ord(ch)
            flag = uc.category(cp)
            if cp in uc.WHITESPACE or cp in (0, 0xFFFD) or flag == uc.CONTROL:
                if cp in uc.WHITESPACE and word:
                    words.append("".join(word))
                    word = []
                continue
            if self._strip_accents and flag == uc.MARK:
                continue
            char = chr(uc.lower(cp) if self._lowercase else cp)
            if flag == uc.PUNCTUATION or (cp < 0x7F and flag == uc.SYMBOL) or _is_cjk(cp):
                if word:
                    words.append("".join(word))
                    word = []
                words.append(char)
            else:
                word.append(char)
        if word:
            words.append("".join(word))
        return words


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)
