"""Exporting the course's model to other libraries: a Hugging Face ``transformers`` MarianMT model (chapter 13)."""

from tmlib.export.marian import marian_config, marian_permutation, marian_tokenizer, to_marian

__all__ = [
    "marian_config", "marian_permutation", "marian_tokenizer", "to_marian",  # marian
]
