"""Attention paths that give the same numbers at different speeds (issue 8): fused Q|K|V projection vs three
projections, and PyTorch's ``is_causal`` flag vs a materialised causal mask.

For each case both variants run on the same module and inputs, alternating (A, B, B, A, ...) so that a change
of machine load hits both; the median of ``--repeats`` timed windows is reported, and the outputs are checked
equal first. Cases:

* ``qkv_train``: one self-attention forward + backward, ``(batch, seq_len, d_model)`` input, causal; "fused"
  takes ``mha(x, x, x)`` (one product x [W^Q|W^K|W^V]), "separate" ``mha(x, x2, x2)`` with ``x2`` a view of
  ``x`` (a different tensor object, so the three ``nn.Linear`` calls run).
* ``qkv_decode``: one cached decoding step (one new token, cache of ``seq_len`` positions), forward only.
* ``causal_train``: forward + backward with ``is_causal=True`` (no mask tensor) vs ``attn_mask=causal_mask(n)``.

Usage (from the repository root)::

    flock -x /tmp/tm-cpu.lock .venv/bin/python benchmarks/attention_paths.py          # CPU, 2 threads
    python benchmarks/attention_paths.py --device cuda                                # on a GPU

Writes ``benchmarks/results/attention_paths_<device>.json`` with :func:`tmlib.analysis.machine.machine_info`.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from tmlib.model import KVCache, MultiHeadAttention, causal_mask
from tmlib.analysis import machine_info
from tmlib.utils import get_device

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = [(16, 64, 256, 4), (8, 128, 512, 8)]  # (batch, seq_len, d_model, n_heads)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(fn, steps, device) -> float:
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    _sync(device)
    return (time.perf_counter() - t) / steps


def compare(fn_a, fn_b, steps, repeats, device) -> dict:
    for _ in range(2):  # warm-up
        fn_a(), fn_b()
    a, b = [], []
    for r in range(repeats):
        order = ((fn_a, a), (fn_b, b)) if r % 2 == 0 else ((fn_b, b), (fn_a, a))
        for fn, out in order:
            out.append(_time(fn, steps, device))
    ma, mb = statistics.median(a), statistics.median(b)
    return {"ms_a": 1e3 * ma, "ms_b": 1e3 * mb, "speedup_a_over_b": mb / ma,
            "windows_ms_a": [1e3 * x for x in a], "windows_ms_b": [1e3 * x for x in b]}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--note", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = get_device(None if args.device == "auto" else args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    results = []
    for batch, n, d, h in SHAPES:
        torch.manual_seed(0)
        mha = MultiHeadAttention(d, h).to(device).train()
        x = torch.randn(batch, n, d, device=device, requires_grad=True)
        x_view = x.view_as(x)  # same values, another tensor object: the separate projections run
        mask = causal_mask(n, device=device)
        with torch.no_grad():
            fused = mha(x, x, x, is_causal=True)[0]
            separate = mha(x, x_view, x_view, is_causal=True)[0]
            explicit = mha(x, x, x, attn_mask=mask)[0]
        diff_qkv = (fused - separate).abs().max().item()
        diff_causal = (fused - explicit).abs().max().item()
        assert diff_qkv < 1e-4 and diff_causal < 1e-4, (diff_qkv, diff_causal)

        def train(key, **kw):
            def step():
                mha.zero_grad(set_to_none=True)
                mha(x, key, key, **kw)[0].sum().backward()
            return step

        shape = {"batch": batch, "seq_len": n, "d_model": d, "n_heads": h}
        qkv = compare(train(x, is_causal=True), train(x_view, is_causal=True), args.steps, args.repeats, device)
        causal = compare(train(x, is_causal=True), train(x, attn_mask=mask), args.steps, args.repeats, device)

        mha.eval()
        cache = KVCache()
        with torch.no_grad():
            mha(x.detach(), x.detach(), x.detach(), is_causal=True, cache=cache)
        k0, v0 = cache.k, cache.v
        token = torch.randn(batch, 1, d, device=device)
        token_view = token.view_as(token)

        def decode(key):
            def step():
                cache.k, cache.v = k0, v0  # the same cache of n positions every time
                with torch.no_grad():
                    mha(token, key, key, cache=cache, is_causal=True)
            return step

        dec = compare(decode(token), decode(token_view), args.steps * 5, args.repeats, device)
        results.append({"shape": shape, "max_abs_diff": {"fused_vs_separate": diff_qkv, "is_causal_vs_mask": diff_causal},
                        "qkv_train": {"a": "fused", "b": "separate", **qkv},
                        "qkv_decode": {"a": "fused", "b": "separate", **dec},
                        "causal_train": {"a": "is_causal", "b": "explicit mask", **causal}})
        for name in ("qkv_train", "qkv_decode", "causal_train"):
            r = results[-1][name]
            print(f"{shape} {name:12s} {r['a']}: {r['ms_a']:.3f} ms, {r['b']}: {r['ms_b']:.3f} ms, "
                  f"speed-up {r['speedup_a_over_b']:.2f}")
    out = {"benchmark": "attention paths: fused QKV vs separate projections; is_causal vs explicit causal mask",
           "machine": machine_info(), "threads": torch.get_num_threads() if device.type == "cpu" else None,
           "device": device.type, "steps_per_window": args.steps, "repeats": args.repeats, "clock": "wall",
           "command": " ".join(shlex.quote(a) for a in sys.argv), "note": args.note,
           "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]}, "results": results}
    path = Path(args.out) if args.out else RESULTS / f"attention_paths_{device.type}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
