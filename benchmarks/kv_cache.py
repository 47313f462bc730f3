"""KV-cache decoding: greedy-decoding time per sentence with and without the cache, and the cache's bytes.

Model: chapter 9's translator, ``make_model("cpu", 8000)`` (2 + 2 layers, d_model 256, 4 heads, d_ff 512),
untrained, evaluation mode.  To make every run produce exactly L tokens,
``eos_id`` is set to the vocabulary size, an id the model cannot predict (argmax ranges over 0 … V-1); the
script checks that both modes return L tokens and the same tokens.

* Time: :func:`tmlib.decoding.greedy.greedy_decode` with ``use_cache=True`` (one new position per step, earlier keys
  and values reused: O(t) work at step t) and ``use_cache=False`` (the whole prefix recomputed every step:
  O(t²) attention work and t positions through every layer and the output projection), for output lengths
  ``--lengths``, one sentence of ``--src-len`` tokens, timed in alternating order, median of ``--repeats``.
* Memory: the bytes of the tensors the :class:`tmlib.model.layers.DecoderCache` actually holds after L steps
  (``cache.self_attn[i].k/.v`` and ``cache.cross_attn[i].k/.v``, :func:`tmlib.analysis.benchmarking.decoder_cache_bytes`),
  next to the formula 2 × layers × d_model × bytes per token for self-attention plus the cross-attention
  memory 2 × layers × src_len × d_model × bytes once (:func:`tmlib.analysis.benchmarking.kv_cache_bytes`).

* Threads: 1 by default (``--threads`` overrides).  Decoding one sentence is latency-bound: a cached step makes
  about 600 operator calls on tensors of one query position, each a few microseconds of work, so a second thread
  has nothing to share and only adds an OpenMP fork/join barrier per call; on a shared 2-core virtual machine
  that barrier swung single calls from tens of microseconds to milliseconds.  The profile still times a cached
  step with 1 and 2 threads (and ``--threads``) side by side, ``s_per_token_by_threads``.

Usage::

    python benchmarks/kv_cache.py                # CPU, 1 thread -> results/kv_cache_cpu.json
    python benchmarks/kv_cache.py --threads 2    # both cores per operator call
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from common import add_common_arguments, clock_of, start, write_record
from tmlib.analysis import decoder_cache_bytes, kv_cache_bytes, time_call
from tmlib.decoding import greedy_decode
from tmlib.model import make_model

VOCAB = 8000


def build_model(device, seed: int = 0):
    """Chapter 9's model, the ``cpu`` preset (untrained, eval mode)."""
    torch.manual_seed(seed)
    model = make_model("cpu", VOCAB, pad_id=0)
    return model.to(device).eval()


def source(src_len: int, device, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, VOCAB, (1, src_len), generator=g).to(device)  # (1, src_len), no padding


def cache_after(model, src: torch.Tensor, n_tokens: int, bos_id: int = 1) -> dict:
    """Decode ``n_tokens`` positions greedily with an explicit cache; return the bytes it holds."""
    cache = model.new_cache()
    with torch.no_grad():
        memory = model.encode(src)  # (1, src_len, d_model)
        token = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (1, 1)
        for _ in range(n_tokens):
            logits = model.decode(token, memory, src, cache=cache)  # (1, 1, vocab)
            token = logits[:, -1].argmax(-1, keepdim=True)  # (1, 1)
    assert len(cache) == n_tokens, (len(cache), n_tokens)
    measured = decoder_cache_bytes(cache)
    ref = cache.self_attn[0].k
    return {"measured": measured, "dtype": str(ref.dtype), "k_shape_layer0": list(ref.shape)}


def profile_cached_step(model, src, n_tokens: int, eos_id: int, device, clock=time.perf_counter) -> dict:
    """Where the time of a cached decoding step goes: operators per step, the heaviest ones, Python overhead.

    Runs ``greedy_decode(use_cache=True)`` for ``n_tokens`` under ``torch.profiler`` (CPU activity) and, apart,
    times one step's output projection (the ``(1, d_model) x (d_model, vocab)`` product) on its own.
    """
    from torch.profiler import ProfilerActivity, profile

    run = lambda: greedy_decode(model, src, bos_id=1, eos_id=eos_id, max_len=n_tokens, use_cache=True)
    run()
    step_s = statistics.median(time_call(run, repeats=3, warmup=0, device=device, clock=clock)) / n_tokens
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    # self time of the operators that do the work (not the wrappers that only call others)
    total_self_us = sum(e.self_cpu_time_total for e in events)
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:6]
    threads = torch.get_num_threads()
    per_thread_count = {}
    for n_threads in sorted({1, 2, threads}):  # batch-1 steps are tiny: do more threads help or cost?
        torch.set_num_threads(n_threads)
        run()
        per_thread_count[str(n_threads)] = {
            mode: statistics.median(time_call(lambda: greedy_decode(model, src, bos_id=1, eos_id=eos_id,
                                                                    max_len=n_tokens, use_cache=mode == "with_cache"),
                                              repeats=3, warmup=0, device=device, clock=clock)) / n_tokens
            for mode in ("with_cache", "without_cache")}
    torch.set_num_threads(threads)
    h = torch.randn(1, 1, model.d_model, device=device)
    with torch.no_grad():
        proj = statistics.median(time_call(lambda: model.generator(h), repeats=5, warmup=2, min_seconds=0.01,
                                           device=device, clock=clock))
    return {
        "tokens": n_tokens,
        "s_per_step": step_s,
        "aten_calls_per_step": sum(e.count for e in events) / n_tokens,
        "operator_self_time_share": total_self_us * 1e-6 / (step_s * n_tokens),
        "top_operators": [{"op": e.key, "calls_per_step": e.count / n_tokens,
                           "share_of_operator_time": e.self_cpu_time_total / total_self_us} for e in top],
        "output_projection_s": proj,
        "s_per_token_by_threads": per_thread_count,
        "output_projection_share_of_step": proj / step_s,
        "note": "operator shares from a profiled run (the profiler adds overhead per operator); times measured "
                "without the profiler, with the --clock of the run",
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p, default_threads=1)  # batch-1 decoding: latency-bound, see the module docstring
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 25, 50, 100, 200], help="output tokens L")
    p.add_argument("--src-len", type=int, default=20, help="source tokens (Multi30k sentences: ~15)")
    p.add_argument("--repeats", type=int, default=3)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    device, t0 = start(args)
    if args.quick:
        args.lengths, args.repeats = [4, 8], 1
    model = build_model(device)
    src = source(args.src_len, device)
    eos_id = VOCAB  # never an argmax: every run generates exactly L tokens
    cfg = {"d_model": model.d_model, "n_heads": model.n_heads, "n_encoder_layers": len(model.encoder.layers),
           "n_decoder_layers": len(model.decoder.layers), "d_ff": model.encoder.layers[0].feed_forward.d_ff,
           "vocab_size": VOCAB, "parameters": sum(p.numel() for p in model.parameters())}

    timing = []
    for L in args.lengths:
        outs = {}

        def run(use_cache, L=L):
            outs[use_cache] = greedy_decode(model, src, bos_id=1, eos_id=eos_id, max_len=L, use_cache=use_cache)

        times = {True: [], False: []}
        run(True), run(False)  # warm-up
        for r in range(args.repeats):  # alternate the order so that a change of load hits both
            for use_cache in ((True, False) if r % 2 == 0 else (False, True)):
                times[use_cache] += time_call(lambda: run(use_cache), repeats=1, warmup=0, device=device,
                                              clock=clock_of(args))
        assert len(outs[True][0]) == len(outs[False][0]) == L, "the run did not produce exactly L tokens"
        same = outs[True] == outs[False]
        med = {k: statistics.median(v) for k, v in times.items()}
        timing.append({"output_tokens": L, "with_cache_s": med[True], "without_cache_s": med[False],
                       "speedup": med[False] / med[True], "with_cache_per_token_ms": 1e3 * med[True] / L,
                       "without_cache_per_token_ms": 1e3 * med[False] / L, "same_tokens": same,
                       "times_s": {"with_cache": times[True], "without_cache": times[False]}})
        print(f"L={L:4d}: cache {med[True] * 1e3:8.1f} ms, no cache {med[False] * 1e3:8.1f} ms, "
              f"speed-up {med[False] / med[True]:5.2f}x, same tokens: {same}", file=sys.stderr)

    memory = []
    bpe = next(model.parameters()).element_size()
    for L in args.lengths:
        got = cache_after(model, src, L)
        formula = kv_cache_bytes(cfg["n_decoder_layers"], cfg["d_model"], L, src_len=args.src_len, batch=1,
                                 bytes_per_element=bpe)
        memory.append({"tokens": L, "measured": got["measured"], "formula": formula, "dtype": got["dtype"],
                       "k_shape_layer0": got["k_shape_layer0"],
                       "equal": got["measured"]["self_attn"] == formula["self_attn"]
                       and got["measured"]["cross_attn"] == formula["cross_attn"]})
    profile_tokens = 50 if 50 in args.lengths else args.lengths[len(args.lengths) // 2]
    prof = profile_cached_step(model, src, profile_tokens, eos_id, device, clock_of(args))
    print(f"cached step at L={profile_tokens}: {1e3 * prof['s_per_step']:.2f} ms, "
          f"{prof['aten_calls_per_step']:.0f} aten calls, output projection {1e3 * prof['output_projection_s']:.2f} ms",
          file=sys.stderr)
    settings = {"model": cfg, "src_len": args.src_len, "lengths": args.lengths, "repeats": args.repeats,
                "batch": 1, "bos_id": 1, "eos_id": eos_id, "decoder": "tmlib.decoding.greedy.greedy_decode",
                "threads": torch.get_num_threads(), "clock": args.clock, "quick": args.quick}
    write_record(args, "kv_cache", "greedy decoding time per sentence with/without the KV cache; cache bytes",
                 device, t0, settings, {"timing": timing, "memory": memory, "profile": prof}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
