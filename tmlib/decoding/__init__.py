"""Decoding and scoring: greedy decoding, beam search, translating a corpus, and BLEU with sacreBLEU.
"""

from tmlib.decoding.metrics import bleu_scores
from tmlib.decoding.search import (
    TableModel, beam_search, default_max_lengths, greedy_decode, length_penalty_gnmt, translate_corpus
)

__all__ = [
    "TableModel", "beam_search", "bleu_scores", "default_max_lengths", "greedy_decode", "length_penalty_gnmt",
    "translate_corpus"
]
