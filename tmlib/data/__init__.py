"""Data: the Multi30k files, the shared BPE tokenizer, padded batches, token-count batching, the caption corpus
of chapter 13, and the toy copy task of chapter 8.
"""

from tmlib.data.batch import Batch, collate, pad_ids
from tmlib.data.batching import (BatchIterator, TokenBudgetBatches, encode_pairs, filter_by_length, length_batches,
                                 padding_fraction, token_batches)
from tmlib.data.captions import SentenceBatches, caption_corpus, lm_forward, loss_by_position
from tmlib.data.multi30k import (DataError, MULTI30K_FILES, MULTI30K_SHA256, MULTI30K_SIZES, MULTI30K_URL, SPLITS,
                                 check_multi30k, download_multi30k, load_multi30k, multi30k_dir)
from tmlib.data.tokenizer import BOS, BPETokenizer, EOS, PAD, SPECIAL_TOKENS, UNK, train_tokenizer
from tmlib.data.toy import copy_task_batch, reverse_pairs

__all__ = [
    # batch
    "Batch", "collate", "pad_ids",
    # batching
    "BatchIterator", "TokenBudgetBatches", "encode_pairs", "filter_by_length", "length_batches", "padding_fraction", "token_batches",
    # captions
    "SentenceBatches", "caption_corpus", "lm_forward", "loss_by_position",
    # multi30k
    "DataError", "MULTI30K_FILES", "MULTI30K_SHA256", "MULTI30K_SIZES", "MULTI30K_URL", "SPLITS", "check_multi30k",
    "download_multi30k", "load_multi30k", "multi30k_dir",
    # tokenizer
    "BOS", "BPETokenizer", "EOS", "PAD", "SPECIAL_TOKENS", "UNK", "train_tokenizer",
    # toy
    "copy_task_batch", "reverse_pairs",
]
