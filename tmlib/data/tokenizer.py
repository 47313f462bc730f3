"""One shared BPE vocabulary for German and English (HF ``tokenizers``), with the course's special tokens.

The paper (§5.1) encodes its EN-DE data with byte-pair encoding (Sennrich et al. 2016) into "a shared
source-target vocabulary of about 37000 tokens". :func:`train_tokenizer` learns such a vocabulary on the
training pairs with the Hugging Face ``tokenizers`` library; :class:`BPETokenizer` wraps it with the ids
of the special tokens and a few checks a translator needs on real input (a byte-order mark, blank lines,
text in a script the vocabulary never saw).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from tmlib.utils import atomic_write
from tmlib.validation import check_int

__all__ = ["PAD", "BOS", "EOS", "UNK", "SPECIAL_TOKENS", "BPETokenizer", "train_tokenizer"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
#: The special tokens, with ids 0, 1, 2, 3 in this order (``pad_id`` = 0).
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)

#: The ``Metaspace`` word-start marker: a space becomes ``▁`` glued to the next word.
_SPACE = "▁"
_BOM = "\ufeff"


def _clean(text) -> str:
    """``text`` without a leading UTF-8 byte-order mark (U+FEFF), which NFKC keeps and the vocabulary lacks."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text[1:] if text.startswith(_BOM) else text


class BPETokenizer:
    """A shared German–English BPE tokenizer (HF ``tokenizers``): NFKC, ``Metaspace`` (a space becomes ``▁`` glued to
    the next word) and punctuation split off, so ``decode(encode(s)) == s`` for seen characters and BLEU is computed on
    real text. Input is cleaned (a byte-order mark dropped; blank text encodes to ``[]``); text of an unseen script is
    ``<unk>`` (:meth:`unknown_fraction`). ``pad_id, bos_id, eos_id, unk_id`` = 0, 1, 2, 3.

    Raises:
        ValueError: (constructor) the special tokens do not have ids 0..3.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        ids = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if ids != [0, 1, 2, 3]:
            raise ValueError(f"special tokens {SPECIAL_TOKENS} must have ids 0..3, got {ids}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = ids
        self._space_id = tokenizer.token_to_id(_SPACE)  # the bare word-start piece, or None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no ``<bos>``/``<eos>``: :func:`tmlib.data.batching.collate` adds them).

        A leading byte-order mark is dropped; empty or whitespace-only text gives ``[]``.

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        text = _clean(text)
        return self.tokenizer.encode(text).ids if text.strip() else []

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` for many texts (parallel in Rust).

        Raises:
            TypeError: ``texts`` is a single ``str``, or an element is not a ``str``.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of texts, got a single str (use encode)")
        texts = [_clean(t) for t in texts]
        encodings = self.tokenizer.encode_batch(texts)
        return [e.ids if t.strip() else [] for t, e in zip(texts, encodings)]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of ``text`` (``▁`` marks the start of a word); ``[]`` for blank text."""
        text = _clean(text)
        return self.tokenizer.encode(text).tokens if text.strip() else []

    def unknown_fraction(self, ids: Iterable[int]) -> float:
        """The fraction of the pieces of ``ids`` that are ``<unk>``.

        Bare word-start markers ``▁`` carry no content (``"日本語"`` encodes to ``▁ <unk> <unk> <unk>``) and
        are not counted.

        Args:
            ids: token ids (ints, or a 1-D tensor/array), e.g. from :meth:`encode`.

        Returns:
            float in [0, 1]; 0.0 when no piece is left to count (e.g. blank text).
        """
        counted = [i for i in (int(i) for i in ids) if i != self._space_id]
        return sum(i == self.unk_id for i in counted) / len(counted) if counted else 0.0

    def is_all_unknown(self, text: str) -> bool:
        """True when ``text`` has content but none of it is in the vocabulary (every piece is ``<unk>``).

        Typically text in another script than the training data (Cyrillic, CJK, ...); a translator should
        warn instead of inventing a sentence. Blank text gives ``False`` (it has no content at all).
        """
        return self.unknown_fraction(self.encode(text)) == 1.0

    def decode(self, ids: Iterable[int]) -> str:
        """Plain text from ids: stops at the first ``<eos>``, drops ``<pad>``/``<bos>``, detokenizes.

        Args:
            ids: a sequence of ints or a 1-D integer tensor/array.
        """
        out = []
        for i in (int(i) for i in ids):
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(i)
        return self.tokenizer.decode(out, skip_special_tokens=False)

    def decode_batch(self, rows) -> list[str]:
        """:meth:`decode` for each row of a 2-D array/tensor or a list of id lists."""
        return [self.decode(r) for r in rows]

    def to_json(self) -> str:
        """The whole tokenizer as a JSON string (stored in checkpoints)."""
        return self.tokenizer.to_str()

    @classmethod
    def from_json(cls, text: str) -> "BPETokenizer":
        """Inverse of :meth:`to_json`."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text))

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON to ``path`` atomically (temporary file, then rename)."""
        with atomic_write(Path(path)) as tmp:
            tmp.write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BPETokenizer":
        """Read a tokenizer written by :meth:`save`."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


def train_tokenizer(pairs: Sequence[tuple[str, str]], vocab_size: int = 8000, min_frequency: int = 2
                    ) -> BPETokenizer:
    """A shared BPE vocabulary learned on both sides of the training pairs (one vocabulary, as the paper's EN-DE model,
    §5.1, which lets the model tie its embeddings; 8,000 ids keep Multi30k's frequent words whole). Deterministic.

    Raises:
        ValueError: ``vocab_size`` <= 4, ``min_frequency`` < 1.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    vocab_size = check_int(vocab_size, "vocab_size", minimum=len(SPECIAL_TOKENS) + 1)
    min_frequency = check_int(min_frequency, "min_frequency", minimum=1)
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=_SPACE, prepend_scheme="always"),
        pre_tokenizers.Punctuation(behavior="isolated"),
    ])
    tok.decoder = decoders.Metaspace(replacement=_SPACE, prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False)

    def texts():
        for de, en in pairs:
            yield de
            yield en

    tok.train_from_iterator(texts(), trainer=trainer, length=2 * len(pairs))
    return BPETokenizer(tok)
