"""Decoding and scoring: greedy decoding, beam search, translating a corpus, BLEU with sacreBLEU, and a
next-token table for worked examples.
"""

from tmlib.decoding.beam import beam_search, length_penalty_gnmt
from tmlib.decoding.corpus import screen_sources, translate_corpus
from tmlib.decoding.greedy import default_max_lengths, greedy_decode
from tmlib.decoding.metrics import bleu_scores
from tmlib.decoding.table import TableModel

__all__ = [
    "beam_search", "length_penalty_gnmt",  # beam
    "translate_corpus", "screen_sources",  # corpus
    "default_max_lengths", "greedy_decode",  # greedy
    "bleu_scores",  # metrics
    "TableModel",  # table
]
