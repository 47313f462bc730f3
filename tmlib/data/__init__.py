"""Data: the Multi30k files, the shared BPE tokenizer, token-count batches, the caption corpus of chapter
12, and the toy copy task of chapter 8.
"""

from tmlib.data.batching import (
    Batch, BatchIterator, collate, encode_pairs, filter_by_length, length_batches, pad_ids, token_batches
)
from tmlib.data.captions import SentenceBatches, caption_corpus, lm_forward, loss_by_position
from tmlib.data.multi30k import (
    DataError, MULTI30K_FILES, MULTI30K_SHA256, MULTI30K_SIZES, MULTI30K_URL, SPLITS, check_multi30k,
    download_multi30k, load_multi30k, multi30k_dir
)
from tmlib.data.tokenizer import BOS, BPETokenizer, EOS, PAD, SPECIAL_TOKENS, UNK, train_tokenizer
from tmlib.data.toy import copy_task_batch

__all__ = [
    "BOS", "BPETokenizer", "Batch", "BatchIterator", "DataError", "EOS", "MULTI30K_FILES", "MULTI30K_SHA256",
    "MULTI30K_SIZES", "MULTI30K_URL", "PAD", "SPECIAL_TOKENS", "SPLITS", "SentenceBatches", "UNK",
    "caption_corpus", "check_multi30k", "collate", "copy_task_batch", "download_multi30k", "encode_pairs",
    "filter_by_length", "length_batches", "lm_forward", "load_multi30k", "loss_by_position", "multi30k_dir", "pad_ids",
    "token_batches", "train_tokenizer"
]
