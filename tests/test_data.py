"""Tests of tmlib.data, the compatibility module: every name it always had is still there, and is the very
object of the module that defines it (tmlib.multi30k, tmlib.tokenizer, tmlib.batching)."""
import pytest

pytest.importorskip("torch")

from tmlib import batching, data, multi30k, tokenizer  # noqa: E402

# the names of tmlib.data before it was split (notebooks and the training code import them from here)
ORIGINAL = ["MULTI30K_URL", "MULTI30K_FILES", "MULTI30K_SHA256", "MULTI30K_SIZES", "SPLITS", "DataError",
            "load_multi30k", "multi30k_dir", "download_multi30k", "PAD", "BOS", "EOS", "UNK", "SPECIAL_TOKENS",
            "BPETokenizer", "train_tokenizer", "Batch", "collate", "encode_pairs", "filter_by_length",
            "token_batches", "BatchIterator"]


def test_every_original_name_is_exported():
    assert set(ORIGINAL) <= set(data.__all__)


def test_names_are_the_defining_modules_objects():
    modules = (multi30k, tokenizer, batching)
    for name in data.__all__:
        owners = [m for m in modules if name in m.__all__]
        assert len(owners) == 1, name
        assert getattr(data, name) is getattr(owners[0], name), name
    public = set().union(*(m.__all__ for m in modules))
    assert public == set(data.__all__)  # and nothing public of the three is missing


def test_star_import():
    namespace = {}
    exec("from tmlib.data import *", namespace)
    assert set(ORIGINAL) <= set(namespace)
