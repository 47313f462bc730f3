"""tmlib: the library of the course "Attention, executable", laid out like the paper.

* :mod:`tmlib.ref` — Part I's NumPy references (no torch import): softmax, attention, multi-head attention, the
  feed-forward network, layer normalisation, positional encoding, masks, the learning-rate schedule.
* :mod:`tmlib.model` — the Transformer in PyTorch, one paper section per module: attention (§3.2),
  feed-forward (§3.3), embeddings (§3.4), positional encoding (§3.5), the encoder-decoder (§3.1), its
  configuration and presets (Table 3), encoder-only and decoder-only models, and chapter 13's modern options.
* :mod:`tmlib.training` — the recipe of §5 (Adam, schedule, label smoothing), the training loop, checkpoints,
  data parallelism, and chapter 9's Multi30k experiment.
* :mod:`tmlib.data` — Multi30k, the BPE tokenizer, token-count batches, the caption corpus of chapter 13.
* :mod:`tmlib.decoding` — greedy decoding, beam search, translating a corpus, BLEU.
* :mod:`tmlib.analysis` — attention capture and head statistics, parameter/memory/FLOP counts, benchmarking.
* :mod:`tmlib.course` — the lecture's worked examples, exercise checks, quizzes and plots.
* Command lines: ``python -m tmlib.train`` and ``python -m tmlib.translate``. Shared helpers:
  :mod:`tmlib.utils` (seeding, devices, atomic writes), :mod:`tmlib.validation` (argument checks) and
  :mod:`tmlib.tolerance` (how far two correct floating-point computations may differ).

``import tmlib`` and ``import tmlib.ref`` do not import torch; the PyTorch subpackages do. On Python older than
3.10 (whose typing the library's annotations and command lines need) ``import tmlib`` stops with one line.
"""
import sys as _sys

if _sys.version_info < (3, 10):
    raise ImportError("tmlib needs Python 3.10 or newer (the course's environment is made for Python 3.11); this is "
                      "Python %d.%d: install the course with Python 3.11 (README: Run it locally)" % _sys.version_info[:2])

__version__ = "0.1.0"
