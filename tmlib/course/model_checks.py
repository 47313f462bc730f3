"""Checks of chapter 8's exercises on the whole model: the vocabulary ranges that round to the paper's counts
(:func:`check_vocab_ranges`), the two stages of a pre-LN encoder (:func:`check_preln_stages`) and a student's
greedy decoding against :func:`tmlib.decoding.greedy_decode` (:func:`check_greedy_decode`). Like
:mod:`tmlib.course.exercise_checks`, they compute the expected values inside, never print them, and name the likely
slip; an answer that is still the stub's ``...`` gets the course's "still `...`" message.
"""
from __future__ import annotations

from tmlib.course.checks import check_close, check_shape, require_answered
from tmlib.course.diagnostics import _not_written, _unwritten_inside

__all__ = ["check_greedy_decode", "check_preln_stages", "check_vocab_ranges"]

PAPER_COUNTS = {"base": 65_000_000, "big": 213_000_000}  # Table 3, rounded to the nearest million


def _rounded_count(preset: str, vocab: int) -> int:
    import torch

    from tmlib.model import count_parameters, make_model

    with torch.device("meta"):  # shapes only: no memory
        count = count_parameters(make_model(preset, vocab))
    return (count + 500_000) // 10**6 * 10**6


def check_vocab_ranges(vocab_range, what: str = "vocab_range") -> str:
    """Exercise 8.2: ``vocab_range = {"base": (smallest, largest), "big": (smallest, largest)}``, the shared
    vocabularies whose tied model rounds to the paper's 65M and 213M. Both ends of each range must round to the
    paper's count, and one entry beyond either end must not; the ranges are never printed.

    Raises:
        TypeError: ``vocab_range`` (or one of its ends) is still ``...``.
        AssertionError: not a dict with the two keys, or which end of which range is off.
    """
    require_answered(vocab_range, what)
    if not isinstance(vocab_range, dict) or set(vocab_range) != set(PAPER_COUNTS):
        raise AssertionError(f"{what} should be a dict with the keys {sorted(PAPER_COUNTS)}, each a pair "
                             "(smallest, largest)")
    for name, target in PAPER_COUNTS.items():
        pair = vocab_range[name]
        require_answered(pair, f"{what}[{name!r}]")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise AssertionError(f"{what}[{name!r}] should be a pair (smallest, largest), got {pair!r}")
        try:
            low, high = (int(v) for v in pair)
        except (TypeError, ValueError):
            raise AssertionError(f"{what}[{name!r}] should hold two whole numbers of tokens") from None
        if (low, high) != tuple(pair) or low > high:
            raise AssertionError(f"{what}[{name!r}] should hold two whole numbers, the smallest first")
        rounded = {v: _rounded_count(name, v) for v in (low - 1, low, high, high + 1)}
        if rounded[low] != target:
            raise AssertionError(f"{name}: a model with your smallest vocabulary does not round to {target:,}")
        if rounded[high] != target:
            hint = (": is the upper end of the rounding included? (65,500,000 rounds up, to 66M)"
                    if low < high and _rounded_count(name, high - 1) == target else "")
            raise AssertionError(f"{name}: a model with your largest vocabulary does not round to {target:,}{hint}")
        if rounded[low - 1] == target:
            raise AssertionError(f"{name}: one entry below your smallest still rounds to {target:,}")
        if rounded[high + 1] == target:
            raise AssertionError(f"{name}: one entry above your largest still rounds to {target:,}")
    return f"correct: {what}: every vocabulary of each range, and no other, rounds to the paper's count"


def check_preln_stages(last_layer, after_norm, src, what: str = "your pre-LN encoder", *, atol: float = 1e-5) -> str:
    """Exercise 8.3: ``last_layer``, the output of the last encoder layer of the pre-LN ``"tiny"`` model built
    after ``seed_everything(0)`` for the source batch ``src``, and ``after_norm``, that output after
    ``encoder.norm``. The reference is computed inside; a failure names the likely slip (the padding mask not passed,
    the final norm already applied, the positional encoding left out), never a value.

    Raises:
        TypeError: an answer is still ``...``.
        AssertionError: a stage differs (how, and how far, relative to ``atol``).
    """
    import torch

    from tmlib.model import make_model
    from tmlib.utils import seed_everything

    require_answered(last_layer, "last_layer")
    require_answered(after_norm, "after_norm")
    seed_everything(0)
    pre = make_model("tiny", 13, norm_first=True).eval()
    with torch.no_grad():
        def through(x, real):
            for layer in pre.encoder.layers:
                x = layer(x, real_keys=real)
            return x

        embedded = pre.src_embed(src)
        want = through(pre.positional(embedded), pre.real_tokens(src))  # (batch, src_len, d_model)
        slips = [("only the padded sentence differs: did you pass the padding mask (real_keys) to every layer?",
                  through(pre.positional(embedded), None)),
                 ("it is already normalised: pre.encoder(...) applies the final norm; run the layers one by one",
                  pre.encoder.norm(want)),
                 ("the positional encoding is missing: add it to the scaled embeddings before the first layer",
                  through(embedded, pre.real_tokens(src)))]
        want_norm = pre.encoder.norm(want)

    def near(a, b):
        a = torch.as_tensor(a).detach().to(torch.float64)
        return a.shape == b.shape and bool(((a - b.to(torch.float64)).abs() <= atol).all())

    check_shape(last_layer, tuple(want.shape), "last_layer (batch, src_len, d_model)")
    check_shape(after_norm, tuple(want.shape), "after_norm (batch, src_len, d_model)")
    if not near(last_layer, want):
        hint = next((h for h, alt in slips if near(last_layer, alt)), None)
        if hint is not None:
            raise AssertionError(f"last_layer is not the last encoder layer's output yet: {hint}")
        check_close(last_layer, want, "last_layer, the last encoder layer's output", atol=atol)
    if not near(after_norm, want_norm) and near(after_norm, want):
        raise AssertionError("after_norm equals last_layer: apply pre.encoder.norm to it")
    check_close(after_norm, want_norm, "after_norm, last_layer after pre.encoder.norm", atol=atol)
    return f"correct: both stages of {what} match the reference (to {atol:g})"


# (model, seed of the batch, sentences, length, max_len): the trained copier, and the model after 40 steps, whose
# sentences end at different lengths
GREEDY_CASES = (("copier", 123, 3, 8, 9), ("early", 7, 4, 5, 14), ("early", 11, 6, 11, 4), ("early", 11, 6, 11, 14))


def check_greedy_decode(decode_with, models: dict, vocab_size: int = 13, *, cases=GREEDY_CASES,
                        what: str = "your greedy decoding") -> str:
    """Exercise 8.5: the given ``decode_with(which, src, max_len)`` runs the student's ``my_greedy_decode`` on
    ``models[which]``; every case ``(which, seed, sentences, length, max_len)`` (a copy-task batch) is compared
    with :func:`tmlib.decoding.greedy_decode` (BOS 1, EOS 2). The student's function is called on every case first.

    Raises:
        TypeError: ``my_greedy_decode`` is still the stub (or returns None).
        AssertionError: not a list of lists, sentence lengths that differ (where each sentence must stop), or the
            first sentence whose tokens differ; never the expected tokens.
    """
    import torch

    from tmlib.data import copy_task_batch
    from tmlib.decoding import greedy_decode

    batches = [copy_task_batch(n, length, vocab_size - 3, torch.Generator().manual_seed(seed))[0]
               for _, seed, n, length, _ in cases]
    got = [decode_with(which, src, max_len) for (which, _, _, _, max_len), src in zip(cases, batches)]
    stub = _unwritten_inside(decode_with, ["my_greedy_decode"])
    if stub is not None:
        raise _not_written(stub)
    for (which, _, n, length, max_len), src, answer in zip(cases, batches, got):
        where = f"{what} ({which}, {n} sentences of {length} symbols, max_len {max_len})"
        require_answered(answer, where)
        want = greedy_decode(models[which], src, bos_id=1, eos_id=2, max_len=max_len)
        if not isinstance(answer, list) or len(answer) != len(want) or not all(isinstance(s, list) for s in answer):
            raise AssertionError(f"{where}: expected a list of {len(want)} lists of token ids, one per sentence")
        lengths = [len(s) for s in answer]
        if lengths != [len(s) for s in want]:
            longest = max(lengths)
            hint = (f"a sentence has {longest} tokens, more than max_len" if longest > max_len else
                    "stop each sentence at its own EOS, leave BOS and EOS out, and keep at most max_len tokens")
            raise AssertionError(f"{where}: sentence lengths {lengths} are not right: {hint}")
        for i, (mine, ref) in enumerate(zip(answer, want)):
            if [int(t) for t in mine] != list(ref):
                wrong = sum(int(a) != b for a, b in zip(mine, ref))
                raise AssertionError(f"{where}: sentence {i + 1} differs from greedy decoding at {wrong} of its "
                                     f"{len(ref)} tokens: take the most probable token of the last position")
    return f"correct: {what} matches greedy_decode on {len(cases)} batches"
