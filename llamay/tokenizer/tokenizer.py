"""The tokenizer of a GGUF vocabulary: text to token ids and back, as llama.cpp does it."""

from __future__ import annotations

import functools

from llamay.errors import TokenizerError
from llamay.tokenizer.bpe import BpeEncoder
from llamay.tokenizer.detokenizer import Pieces, StreamDecoder, detokenize
from llamay.tokenizer.special import SpecialTokens
from llamay.tokenizer.spm import SpmEncoder
from llamay.tokenizer.vocab import Attr, Vocab
from llamay.tokenizer.wpm import WpmEncoder

_ENCODERS = {"spm": SpmEncoder, "bpe": BpeEncoder, "wpm": WpmEncoder}


class Tokenizer:
    """Tokenizes and detokenizes with one vocabulary (SentencePiece, BPE or WordPiece).

    Token ids agree with llama.cpp's llama_tokenize; pieces with its llama_token_to_piece.
    """

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._encoder = _ENCODERS[vocab.kind](vocab, vocab.table)
        self._special = SpecialTokens(vocab)
        self._pieces = Pieces(vocab)

    # --- what the engine needs to know -----------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        return len(self.vocab.tokens)

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The most characters of text one token stands for (at most its written length): a
        text of n characters has at least n / max_token_chars tokens, known without
        tokenizing it."""
        return max((len(text) for text in self.vocab.tokens), default=1) or 1

    @property
    def bos_id(self) -> int | None:
        return self.vocab.ids["bos"]

    @property
    def eos_id(self) -> int | None:
        return self.vocab.ids["eos"]

    @property
    def eot_id(self) -> int | None:
        return self.vocab.ids["eot"]

    @property
    def eog_ids(self) -> frozenset[int]:
        """The tokens that end generation (EOS, EOT, EOM, <|im_end|>, <end_of_turn>...)."""
        return self.vocab.eog

    @property
    def add_bos(self) -> bool:
        """Whether the vocabulary wants a BOS token before the text."""
        return self.vocab.add_bos

    @property
    def add_eos(self) -> bool:
        """Whether the vocabulary wants an EOS token after the text."""
        return self.vocab.add_eos

    def is_eog(self, token: int) -> bool:
        return token in self.vocab.eog

    def is_control(self, token: int) -> bool:
        return bool(self.vocab.attrs[token] & Attr.CONTROL)

    def token_text(self, token: int) -> str:
        """The token as the vocabulary writes it (e.g. "▁Hello", "<0x0A>", "<end_of_turn>")."""
        return self.vocab.tokens[token]

    # --- text to tokens ------------------------------------------------------------------------

    def tokenize(self, text: str, add_bos: bool = True, special: bool = True) -> list[int]:
        """Token ids of `text`.

        `add_bos`: add the tokens the vocabulary asks for around a text: BOS if it wants one,
        and EOS if it wants one; WordPiece always takes [CLS] before and [SEP] after (llama.cpp's
        add_special). `special`: recognise special tokens written in the text
        (`<start_of_turn>`...); user-defined tokens are recognised either way.
        """
        pieces = self._special.partition(text, parse_special=special)
        ids = self._encoder.encode(pieces)
        if add_bos and self.vocab.kind == "wpm":
            return [self._required("bos"), *ids, self._required("sep")]
        if add_bos and self.vocab.add_bos:
            ids.insert(0, self._required("bos"))
        if add_bos and self.vocab.add_eos:
            ids.append(self._required("eos"))
        return ids

    def _required(self, role: str) -> int:
        token = self.vocab.ids[role]
        if token is None:
            raise TokenizerError(
                f"the vocabulary asks for a {role.upper()} token (tokenizer.ggml.add_{role}_token) "
                f"but has none; tokenize with add_bos=False"
            )
        return token

    # --- tokens to text ------------------------------------------------------------------------

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        """The bytes of one token. Control tokens are empty unless `special`. A byte token is one
        byte, which may be part of a character: decode sequences, not pieces, or use `stream()`."""
        self._check(token)
        return self._pieces.piece(token, special)

    def detokenize(self, ids: list[int], special: bool = False) -> str:
        """The text of `ids`, so that `detokenize(tokenize(text)) == text` wherever llama.cpp
        round-trips it. For text that continues a prompt, use `stream()`."""
        for token in ids:
            self._check(token)
        return detokenize(self.vocab, self._pieces, ids, special)

    def stream(self, special: bool = False) -> StreamDecoder:
        """A decoder fed one token at a time that returns only complete characters."""
        return StreamDecoder(self._pieces, special)

    def _check(self, token: int) -> None:
        if not 0 <= token < len(self.vocab.tokens):
            raise TokenizerError(
                f"token id {token} is outside the vocabulary (0..{self.n_vocab - 1})"
            )
