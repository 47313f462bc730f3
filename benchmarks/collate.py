"""Benchmark: building one padded batch (tmlib.data.batch) before and after NumPy packing, µs per batch.

Three ways to turn tokenized examples into a :class:`tmlib.data.batch.Batch`, timed on the same batches:

* ``loop`` — the implementation before packing (``tmlib.data.collate`` until the split): one row at a time,
  three ``torch.as_tensor`` copies per sentence in a Python loop (kept here verbatim as the baseline);
* ``collate`` — :func:`tmlib.data.batch.collate` on the same list of ``(src_ids, tgt_ids)`` lists: the ids are
  flattened once with ``np.fromiter``, padded with one boolean-mask assignment per tensor, then
  ``torch.from_numpy``;
* ``collate_indices`` — :meth:`tmlib.data.batching.BatchIterator.collate_indices`, the training path: the examples
  are already packed in flat int32 arrays, so the batch is a vectorised gather and pad.

Batches hold sentences with source lengths uniform in [8, 20] and target lengths uniform in [7, 19] tokens
(Multi30k-like), as many as fit ``--tokens`` padded tokens (``batch × 20``): 100 sentences for 2,000 tokens,
1,250 for 25,000 (the paper's batch, §5.1). The three outputs are checked equal before timing. Each number is
the median over ``--repeats`` runs of ``--number`` calls, with one torch thread.

    python benchmarks/collate.py            # -> benchmarks/results/collate_cpu.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def loop_collate(examples, pad_id=0, bos_id=1, eos_id=2):
    """The row-at-a-time collate that tmlib used before: the baseline here, and the reference of
    tests/test_batching.py."""
    from tmlib.data import Batch

    b = len(examples)
    s_len = max(len(s) for s, _ in examples)
    t_len = max(len(t) for _, t in examples) + 1
    src = torch.full((b, max(s_len, 1)), pad_id, dtype=torch.int64)
    tgt_in = torch.full((b, t_len), pad_id, dtype=torch.int64)
    tgt_out = torch.full((b, t_len), pad_id, dtype=torch.int64)
    n_tokens = 0
    for i, (s, t) in enumerate(examples):
        src[i, : len(s)] = torch.as_tensor(s, dtype=torch.int64)
        tgt_in[i, 0] = bos_id
        tgt_in[i, 1 : len(t) + 1] = torch.as_tensor(t, dtype=torch.int64)
        tgt_out[i, : len(t)] = torch.as_tensor(t, dtype=torch.int64)
        tgt_out[i, len(t)] = eos_id
        n_tokens += len(t) + 1
    return Batch(src, tgt_in, tgt_out, n_tokens)


def examples_for(tokens: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    n = tokens // 20
    return [(rng.integers(4, 8000, int(a)).tolist(), rng.integers(4, 8000, int(b)).tolist())
            for a, b in zip(rng.integers(8, 21, n), rng.integers(7, 20, n))]


def median_us(fn, number: int, repeats: int) -> float:
    times = timeit.repeat(fn, number=number, repeat=repeats)
    return statistics.median(times) / number * 1e6


def main(argv=None) -> int:
    from tmlib.data import BatchIterator, collate
    from tmlib.machine import describe_machine, machine_info

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[2000, 25000], help="padded tokens per batch")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--note", default="")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "collate_cpu.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    results = []
    for tokens in args.tokens:
        ex = examples_for(tokens)
        it = BatchIterator(ex, max_tokens=tokens, vocab_size=8000)
        idx = list(range(len(ex)))
        ref, new, packed = loop_collate(ex), collate(ex), it.collate_indices(idx)
        for b in (new, packed):
            assert all(torch.equal(getattr(ref, k), getattr(b, k)) for k in ("src", "tgt_in", "tgt_out"))
            assert ref.n_tokens == b.n_tokens
        number = max(3, 200_000 // tokens)
        row = {"tokens": tokens, "sentences": len(ex), "src_shape": list(ref.src.shape),
               "tgt_shape": list(ref.tgt_in.shape), "calls_per_repeat": number,
               "us_per_batch": {"loop": median_us(lambda: loop_collate(ex), number, args.repeats),
                                "collate": median_us(lambda: collate(ex), number, args.repeats),
                                "collate_indices": median_us(lambda: it.collate_indices(idx), number, args.repeats)}}
        us = row["us_per_batch"]
        row["speedup_over_loop"] = {k: us["loop"] / us[k] for k in ("collate", "collate_indices")}
        results.append(row)
        print(f"{tokens:>6} tokens ({len(ex)} sentences): loop {us['loop']:9.1f} µs, collate {us['collate']:8.1f} µs, "
              f"collate_indices {us['collate_indices']:7.1f} µs")
    out = {"benchmark": "µs to build one padded Batch (src, tgt_in, tgt_out) on the CPU",
           "machine": machine_info(), "machine_line": describe_machine(), "torch_threads": 1,
           "command": "python benchmarks/collate.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "note": args.note, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
