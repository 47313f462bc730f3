"""Do the attention module's speed-ups pay for their lines? Old attention code against today's, in one run.

Until issue 15, :class:`tmlib.model.attention.MultiHeadAttention` had two speed-ups beside the paper's equations:

* **fused Q|K|V**: in self-attention the three projections ran as one matrix product ``x [W^Q | W^K | W^V]``;
* **stacked-weight cache**: without gradients (inference) the stacked ``[W^Q; W^K; W^V]`` was kept between calls,
  keyed on the weights' ``_version`` and ``data_ptr``, so that decoding did not copy the weights at every step.

This script loads the attention module of a baseline commit (``--baseline``, default ``1dfa44f``, the last one with
both) from git, and times one model with each variant of attention, swapping the class of its attention modules
(same parameters, same inputs, same outputs, checked first):

* ``old``: the baseline module as it was (fused Q|K|V and the weight cache);
* ``old_no_cache``: the same, stacking the weights again at every call;
* ``old_separate``: the same, with the three projections as three ``nn.Linear`` calls (no fused product);
* ``new``: the module of the working tree.

Cases, on the chapter-9-sized translator (``make_model("small", 8000, n_encoder_layers=2, n_decoder_layers=2,
d_ff=512)``, d_model 256, 4 heads, untrained):

* ``decode``: :func:`tmlib.decoding.greedy.greedy_decode` of ``--tokens`` tokens (default 50) for one sentence of
  20 tokens, with the KV cache, evaluation mode (``eos_id`` is an id the model cannot predict, so every run makes
  exactly that many tokens);
* ``train``: one training step (teacher-forced forward, cross-entropy, backward, Adam step) on a batch of 32
  sentence pairs of 24 tokens, training mode.

The variants run in rotating order within each repeat, so that a change of machine load hits all of them; the
median of ``--repeats`` is reported with every time. ``--clock cpu`` (the default here) measures the process's
CPU time, which other jobs on a shared machine change less than wall time (use it with 1 thread).

Usage (from the repository root, in a git checkout)::

    python benchmarks/attention_paths.py                      # CPU, 1 thread -> results/attention_paths_cpu.json
    python benchmarks/attention_paths.py --device cuda --clock wall
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

from common import add_common_arguments, clock_of, start, write_record
from tmlib.decoding import greedy_decode
from tmlib.model import MultiHeadAttention, make_model

VOCAB = 8000
ROOT = Path(__file__).resolve().parent.parent


def baseline_classes(rev: str) -> dict[str, type]:
    """The baseline commit's ``MultiHeadAttention`` and two variants of it, without its fused product or its cache."""
    source = subprocess.run(["git", "show", f"{rev}:tmlib/model/attention.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    old = types.ModuleType(f"attention_{rev}")
    exec(compile(source, f"{rev}:tmlib/model/attention.py", "exec"), old.__dict__)

    class NoCache(old.MultiHeadAttention):
        def _qkv_parameters(self):  # stack [W^Q; W^K; W^V] again at every call
            ws = [getattr(self, n).weight for n in ("w_q", "w_k", "w_v")]
            bs = [getattr(self, n).bias for n in ("w_q", "w_k", "w_v")]
            return torch.cat(ws), (None if bs[0] is None else torch.cat(bs))

    class Separate(old.MultiHeadAttention):
        def project_qkv(self, x):  # three nn.Linear calls instead of one product
            return (self._split_heads(self.w_q(x)), self._split_heads(self.w_k(x), self.n_kv_heads),
                    self._split_heads(self.w_v(x), self.n_kv_heads))

    return {"old": old.MultiHeadAttention, "old_no_cache": NoCache, "old_separate": Separate,
            "new": MultiHeadAttention}


def use(model, cls: type) -> None:
    """Make every attention module of ``model`` an instance of ``cls`` (the parameters stay where they are)."""
    for module in model.modules():
        if hasattr(module, "w_q") and hasattr(module, "w_o"):
            for name, value in (("n_kv_heads", module.n_heads), ("positions", None), ("rotary", None), ("alibi", None)):
                if not hasattr(module, name):  # what the old class reads and today's paper module no longer holds
                    setattr(module, name, value)
            module.__class__ = cls


def race(variants: dict, fns: dict, repeats: int, clock) -> dict:
    """Seconds per call of each ``fns[name]``, in rotating order; median and every repeat."""
    names = list(fns)
    times = {name: [] for name in names}
    for name in names:  # warm-up
        use(variants["model"], variants[name])
        fns[name]()
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            use(variants["model"], variants[name])
            t = clock()
            fns[name]()
            times[name].append(clock() - t)
    return {name: {"median_s": statistics.median(ts), "times_s": ts} for name, ts in times.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p, default_threads=1)
    p.set_defaults(clock="cpu")
    p.add_argument("--baseline", default="1dfa44f", help="git revision of the old attention module")
    p.add_argument("--tokens", type=int, default=50, help="tokens decoded per run")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args(argv)
    device, t0 = start(args)
    if args.quick:
        args.tokens, args.repeats = 5, 2
    classes = baseline_classes(args.baseline)
    torch.manual_seed(0)
    model = make_model("small", VOCAB, n_encoder_layers=2, n_decoder_layers=2, d_ff=512, pad_id=0).to(device)
    g = torch.Generator().manual_seed(0)
    src1 = torch.randint(4, VOCAB, (1, 20), generator=g).to(device)  # (1, src_len)
    src = torch.randint(4, VOCAB, (32, 24), generator=g).to(device)  # (batch, src_len)
    tgt = torch.randint(4, VOCAB, (32, 25), generator=g).to(device)  # (batch, tgt_len + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    variants = {"model": model, **classes}

    outputs = {}

    def decode(name):
        def run():
            outputs[name] = greedy_decode(model.eval(), src1, bos_id=1, eos_id=VOCAB, max_len=args.tokens)
        return run

    def loss():
        logits = model(src, tgt[:, :-1])  # (batch, tgt_len, vocab)
        return F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=0)

    def train_step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        optimizer.step()

    # the variants compute the same numbers: same tokens, same loss at the same weights
    losses = {}
    for name in classes:
        use(model, classes[name])
        decode(name)()
        torch.manual_seed(1)
        with torch.no_grad():
            losses[name] = loss().item()  # training mode: dropout with the same seed
    same_tokens = all(out == outputs["new"] for out in outputs.values())
    loss_spread = max(losses.values()) - min(losses.values())
    assert same_tokens and len(outputs["new"][0]) == args.tokens and loss_spread < 1e-5, (outputs, losses)

    clock = clock_of(args)
    results = {"decode": race(variants, {n: decode(n) for n in classes}, args.repeats, clock),
               "train": race(variants, {n: train_step for n in ("old", "old_separate", "new")}, args.repeats, clock),
               "same_tokens": same_tokens, "loss_spread": loss_spread}
    for case in ("decode", "train"):
        base = results[case]["old"]["median_s"]
        for name, r in results[case].items():
            r["relative_to_old"] = r["median_s"] / base
            print(f"{case:6s} {name:13s} {1e3 * r['median_s']:9.2f} ms  ({r['relative_to_old']:.3f} x old)",
                  file=sys.stderr)
    settings = {"baseline": args.baseline, "tokens": args.tokens, "repeats": args.repeats, "train_batch": [32, 24],
                "model": "make_model('small', 8000, n_encoder_layers=2, n_decoder_layers=2, d_ff=512)",
                "threads": torch.get_num_threads(), "clock": args.clock, "quick": args.quick}
    write_record(args, "attention_paths", "old attention (fused QKV, stacked-weight cache) vs new: greedy decoding "
                 "and a training step", device, t0, settings, results, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
