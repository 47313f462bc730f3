"""Data for the translation experiment: a compatibility module that re-exports three modules.

The data pipeline lives in three modules, one per job:

* :mod:`tmlib.multi30k` – the Multi30k task-1 files: offline copy (``TMLIB_DATA_DIR``) or download to the
  user cache with ``pooch``, sha256 and line-count checks, :func:`~tmlib.multi30k.load_multi30k`,
  :func:`~tmlib.multi30k.check_multi30k`, :class:`~tmlib.multi30k.DataError`;
* :mod:`tmlib.tokenizer` – the shared German–English BPE tokenizer (:class:`~tmlib.tokenizer.BPETokenizer`,
  :func:`~tmlib.tokenizer.train_tokenizer`, the special tokens);
* :mod:`tmlib.batching` – token-count batches with length bucketing, padded with NumPy
  (:class:`~tmlib.batching.Batch`, :func:`~tmlib.batching.collate`, :func:`~tmlib.batching.token_batches`,
  :class:`~tmlib.batching.BatchIterator` and its ``DataLoader``).

``from tmlib.data import X`` keeps working for every name below (the notebooks use it). To change module
state in a test (e.g. ``MULTI30K_URL``), patch the defining module, :mod:`tmlib.multi30k`.
"""
from __future__ import annotations

from .batching import (Batch, BatchIterator, collate, encode_pairs, filter_by_length, length_batches, pad_ids,
                       token_batches)
from .multi30k import (MULTI30K_FILES, MULTI30K_SHA256, MULTI30K_SIZES, MULTI30K_URL, SPLITS, DataError,
                       check_multi30k, download_multi30k, load_multi30k, multi30k_dir)
from .tokenizer import BOS, EOS, PAD, SPECIAL_TOKENS, UNK, BPETokenizer, train_tokenizer

__all__ = [
    "MULTI30K_URL",
    "MULTI30K_FILES",
    "MULTI30K_SHA256",
    "MULTI30K_SIZES",
    "SPLITS",
    "DataError",
    "load_multi30k",
    "check_multi30k",
    "multi30k_dir",
    "download_multi30k",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIAL_TOKENS",
    "BPETokenizer",
    "train_tokenizer",
    "Batch",
    "collate",
    "pad_ids",
    "encode_pairs",
    "filter_by_length",
    "token_batches",
    "length_batches",
    "BatchIterator",
]
