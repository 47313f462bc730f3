"""Checks of the training exercises (the learning-rate schedule, the label-smoothing floor, batching by length,
cased and lowercased BLEU): the expected value is computed inside and never printed; a failure names the likely
slip (see :mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import as_float_array, check_close, require_answered
from tmlib.course.exercise_checks import _compare, _compare_rounded

__all__ = ["check_learning_rate", "check_peak_learning_rate", "check_smoothing_floor", "check_smoothing_mass",
           "check_padding_fractions", "check_schedule_crossing", "check_lengths_per_batch",
           "check_case_sensitive_sentences", "check_train_step"]


def _lrate(step, d_model, warmup_steps, factor=1.0):
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def check_learning_rate(answer, step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                        what: str = "learning rate") -> str:
    """Check a rate of the warm-up schedule lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)
    (paper eq. 3) at ``step`` to 4 significant digits, naming the factor or d_model^-0.5 left out, the base
    model's width, or the term of the other phase; never the value."""
    other = (step ** -0.5 if step * warmup_steps ** -1.5 < step ** -0.5 else step * warmup_steps ** -1.5)
    variants = [("the schedule gives without the factor", _lrate(step, d_model, warmup_steps)),
                ("the schedule gives without d_model^-0.5", factor * min(step ** -0.5, step * warmup_steps ** -1.5)),
                ("the schedule gives for the base model (d_model = 512)", _lrate(step, 512, warmup_steps, factor)),
                ("the other phase's term gives (the min takes the smaller of the two)",
                 factor * d_model ** -0.5 * other)]
    variants = [(h, v) for h, v in variants if not np.isclose(v, _lrate(step, d_model, warmup_steps, factor),
                                                              rtol=5e-4, atol=0)]
    return _compare(answer, _lrate(step, d_model, warmup_steps, factor), what, variants, rtol=5e-4, atol=0)


def check_peak_learning_rate(my_peak, peak_step, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                             what: str = "peak learning rate") -> str:
    """Check the step where the warm-up schedule (paper eq. 3, see :func:`check_learning_rate`) peaks, and the
    rate there (4 significant digits), naming a schedule still rising or already falling at ``peak_step``, the
    base model's width or a missing factor; never the value."""
    if isinstance(peak_step, bool) or not isinstance(peak_step, (int, np.integer)) or peak_step < 2:
        raise AssertionError(f"peak_step must be a whole step number of at least 2, got {peak_step!r}")
    before, at, after = (_lrate(int(s), d_model, warmup_steps) for s in (peak_step - 1, peak_step, peak_step + 1))
    if at < max(before, after):
        raise AssertionError(f"step {peak_step} is not the peak: the rate is "
                             f"{'still rising' if after > at else 'already falling'} there")
    return check_learning_rate(my_peak, warmup_steps, d_model=d_model, warmup_steps=warmup_steps, factor=factor,
                               what=what)


def check_smoothing_mass(per_wrong, times_larger, uniform_change, *, vocab_size: int = 37_000,
                         label_smoothing: float = 0.1) -> str:
    """Exercise 6.3, each to a relative error of 1e-6: ``per_wrong``, the exclusive convention's target of one wrong
    token, ε/(V - 1); ``times_larger``, the true class's 1 - ε over it; ``uniform_change``, the uniform
    convention's target of a wrong token, ε/V, minus ``per_wrong``, as a fraction of ``per_wrong`` (-1/V).
    Names the uniform convention's ε/V, the whole mass ε, a true class of 1, the ratio upside down, the change
    without its sign or not divided by ``per_wrong``; never a value."""
    v, eps = int(vocab_size), float(label_smoothing)
    for value, name in ((per_wrong, "per_wrong"), (times_larger, "times_larger"), (uniform_change, "uniform_change")):
        require_answered(value, name)
    pw, uniform = eps / (v - 1), eps / v
    tol = {"rtol": 1e-6, "atol": 0}
    lines = [_compare(per_wrong, pw, "per_wrong", [
        ("the uniform convention gives (ε_ls/|V|); this part asks for the exclusive one", uniform),
        ("all the wrong tokens get together, not each one", eps)], **tol)]
    lines.append(_compare(times_larger, (1 - eps) / pw, "times_larger", [
        ("1/per_wrong gives: the true class's target is 1 - ε_ls, not 1", 1 / pw),
        ("per_wrong divided by the true class's target gives: the ratio upside down", pw / (1 - eps))], **tol))
    lines.append(_compare(uniform_change, uniform / pw - 1, "uniform_change", [
        ("the size of the change gives, without its sign", 1 - uniform / pw),
        ("the change itself gives, not as a fraction of per_wrong", uniform - pw),
        ("the change as a fraction of the uniform target gives, not of per_wrong", (uniform - pw) / uniform)], **tol))
    return "\n".join(lines)


def check_smoothing_floor(answer, vocab_size: int, label_smoothing: float, what: str = "loss floor", *,
                          unrounded: bool = False) -> str:
    """Check the smallest label-smoothed cross-entropy (paper §5.4), the entropy H(q) of PyTorch's uniform target
    q = (1 - ε) one-hot + ε/V, in nats, to 3 decimals; names the correct token's term alone, the other tokens' terms
    alone, and log base 2. With ``unrounded``, an answer right to 3 decimals must also be right to within the
    rounding of float32 arithmetic over V terms (log2(V) + 1 float32 epsilons of its size), which a rounded value
    or the smoothing mass spread over V - 1 classes is not. Never the value."""
    v, eps = int(vocab_size), float(label_smoothing)
    if v < 2 or not 0 < eps < 1:
        raise ValueError(f"need vocab_size >= 2 and 0 < label_smoothing < 1, got {vocab_size}, {label_smoothing}")

    def entropy_terms(p_true, p_other):
        return -p_true * np.log(p_true), -(v - 1) * p_other * np.log(p_other)

    own, others = entropy_terms(1 - eps + eps / v, eps / v)
    variants = [("the correct token's term alone gives (the V - 1 other tokens carry probability too)", own),
                ("the other tokens' terms alone give (the correct token's term is missing)", others),
                ("the entropy in bits gives (the losses are in nats: natural logarithms)", (own + others) / np.log(2))]
    # float32 rounding of V logarithms and their pairwise sum (log2(V) + 1 epsilons of the sum's size; float64's
    # is less): smaller than what the V - 1 convention changes, about eps / V
    tol = (np.log2(v) + 1) * np.finfo(np.float32).eps * max(1.0, own + others)
    try:
        verdict = _compare_rounded(answer, own + others, what, variants, decimals=3)  # a slip rounded as the answer
    except AssertionError as err:
        if not unrounded:
            raise
        raise AssertionError(f"{err}\n  Not even right to 3 decimals, the first step; the exercise asks for more: "
                             f"the value unrounded, right to within {tol:.1e}.") from None
    if not unrounded:
        return verdict
    if not abs(float(answer) - (own + others)) <= tol:
        raise AssertionError(
            f"{what} {float(answer)!r} is right to 3 decimals but not to within rounding: give it unrounded, "
            "computed from the target distribution exactly as the exercise gives it (the smoothing mass spread "
            "over all V classes, the correct one included)")
    return f"correct: {what} to within rounding ({tol:.1e})"


def check_padding_fractions(answer: dict, lengths, max_tokens: int, chunk_sizes=(1, 10, 100, 10_000), *,
                            seed: int = 0, what: str = "padding") -> str:
    """Check a dict chunk_size -> padding fraction of ``tmlib.data.token_batches(lengths, max_tokens, seed, epoch=0,
    chunk_size)`` (``tmlib.data.padding_fraction``: the pads of ``src`` and ``tgt_in`` over all their positions,
    batches summed) to 3 decimals, naming the chunk sizes that differ, a fraction given in percent, the padding of
    each pair's longer side alone, and the right counting on another shuffle (seeds 1 to 5, or epochs 1 and 2);
    never the values."""
    from tmlib.data import padding_fraction, token_batches

    require_answered(answer, what)
    if not isinstance(answer, dict) or sorted(answer) != sorted(chunk_sizes):
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise AssertionError(f"{what} must be a dict with the keys {', '.join(map(str, chunk_sizes))}; got {keys}")
    wrong, percent = [], []
    for chunk in chunk_sizes:
        expected = padding_fraction(token_batches(lengths, max_tokens, seed=seed, epoch=0, chunk_size=chunk), lengths)
        got = float(answer[chunk])
        if not np.isclose(got, expected, rtol=0, atol=5e-4):
            (percent if np.isclose(got, 100 * expected, rtol=0, atol=5e-2) else wrong).append(f"chunk_size {chunk}")
    where = "" if len(percent) == len(chunk_sizes) else f" at {', '.join(percent)}"
    in_percent = f"{what}{where} is given in percent: give a fraction between 0 and 1" if percent else ""
    if percent and not wrong:  # every fraction that differs is the right one in percent: say that, once
        raise AssertionError(in_percent)
    if wrong:
        if not percent:  # only the pads beyond each pair's longer side (one rectangle of max(src, tgt + 1))?
            size = np.array([max(int(s), int(t) + 1) for s, t in lengths])
            longer = [1 - sum(size[b].sum() for b in bs) / sum(len(b) * size[b].max() for b in bs) for bs in
                      (token_batches(lengths, max_tokens, seed=seed, epoch=0, chunk_size=c) for c in chunk_sizes)]
            if all(np.isclose(float(answer[c]), v, rtol=0, atol=5e-4) for c, v in zip(chunk_sizes, longer)):
                raise AssertionError(f"{what} counts only the padding beyond each pair's longer side: the shorter "
                                     "side's pads are computed on too; count the pads of src and of tgt_in over "
                                     "all their positions")
        if not percent:  # the right counting on another shuffle?
            for sd, ep in [(sd, 0) for sd in range(1, 6) if sd != seed] + [(seed, 1), (seed, 2)]:
                if all(np.isclose(float(answer[c]), padding_fraction(token_batches(
                        lengths, max_tokens, seed=sd, epoch=ep, chunk_size=c), lengths), rtol=0, atol=5e-4)
                       for c in chunk_sizes):
                    raise AssertionError(f"{what} is counted right, but on another shuffle (seed={sd}, epoch={ep}): "
                                         f"the batches depend on it; use seed={seed}, epoch=0")
        raise AssertionError(f"{what} is not right yet at {', '.join(wrong)}: count the padded positions of src and "
                             "of tgt_in (target + 1) over all their positions, summed over the batches"
                             + (f"; and {in_percent}" if percent else ""))
    return f"correct: {what} at chunk sizes {', '.join(map(str, chunk_sizes))} (3 decimals)"


def check_schedule_crossing(answer, *, warmup_steps: int, factor: float, paper_warmup_steps: int = 4000,
                            paper_factor: float = 1.0, d_model: int = 256, what: str = "crossing step") -> str:
    """Check the step at which the warm-up schedule (paper eq. 3) with ``warmup_steps`` and ``factor``, past its
    peak, falls to the paper's schedule (``paper_warmup_steps``, ``paper_factor``, still warming up), as a whole step
    within one step of the exact crossing (d_model cancels). Names the factor left out (the paper's peak), a wrong
    exponent of the ratio of the factors, or the paper's curve drawn at d_model 512; an answer that is not a whole
    number fails (the exercise asks for a step); never the value."""
    ratio, w = factor / paper_factor, float(paper_warmup_steps)
    expected = ratio ** (2 / 3) * w  # factor · s^-1/2 = paper_factor · s · W^-3/2
    if not warmup_steps < expected < w:
        raise ValueError("the two schedules do not cross between the first one's peak and the second one's")
    variants = [("the factor left out gives (that is the paper's peak, where its warm-up ends)", w),
                ("the exponent 3/2 instead of 2/3 gives", ratio ** 1.5 * w),
                ("the square of the ratio of the factors gives", ratio ** 2 * w),
                ("the square root of the ratio of the factors gives", ratio ** 0.5 * w)]
    if d_model != 512:
        variants.append(("the paper's curve at d_model 512 gives (both curves share d_model, which cancels)",
                         (ratio * (512 / d_model) ** 0.5) ** (2 / 3) * w))
    require_answered(answer, what)
    whole = not isinstance(answer, bool) and isinstance(answer, (int, float, np.integer, np.floating)) \
        and float(answer).is_integer()
    step = "  A step is a whole number: give the whole step nearest to the crossing."
    try:
        verdict = check_close(answer, expected, what, atol=1)
    except AssertionError as err:
        a = float(as_float_array(answer, "answer", what))
        hint = next((h for h, v in variants if abs(a - v) <= 1 and abs(v - expected) > 2), None)
        raise AssertionError(f"{err}" + (f"\n  Your answer is what {hint}." if hint else "")
                             + ("" if whole else f"\n{step}")) from None
    if not whole:
        raise AssertionError(f"{what} {answer!r} lies within one step of the crossing, but it is not a step number."
                             f"\n{step[:-1]}, not the crossing point itself.")
    return verdict


def _distinct_sizes(lengths, max_tokens: int, chunk: int, seed: int, key) -> float:
    from tmlib.data import token_batches

    sizes = np.array([key(s, t) for s, t in lengths])
    batches = token_batches(lengths, max_tokens, seed=seed, epoch=0, chunk_size=chunk)
    return float(np.mean([len(set(sizes[b].tolist())) for b in batches]))


def check_lengths_per_batch(answer: dict, lengths, max_tokens: int, chunk_sizes=(1, 10, 100, 10_000), *,
                            seed: int = 0, what: str = "lengths per batch") -> str:
    """Check a dict chunk_size -> the mean over the batches of ``tmlib.data.token_batches(lengths, max_tokens, seed,
    epoch=0, chunk_size)`` of the number of distinct padded lengths max(src_len, tgt_len + 1) in a batch, to 2
    decimals, naming the chunk sizes that differ and a count of source or target lengths alone; never the values."""
    require_answered(answer, what)
    if not isinstance(answer, dict) or sorted(answer) != sorted(chunk_sizes):
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise AssertionError(f"{what} must be a dict with the keys {', '.join(map(str, chunk_sizes))}; got {keys}")
    keys = {"padded": lambda s, t: max(s, t + 1), "source": lambda s, t: s, "target": lambda s, t: t}
    close = lambda got, key, c: np.isclose(got, _distinct_sizes(lengths, max_tokens, c, seed, keys[key]),  # noqa: E731
                                           rtol=0, atol=5e-3)
    wrong = [c for c in chunk_sizes if not close(float(answer[c]), "padded", c)]
    if not wrong:
        return f"correct: {what} at chunk sizes {', '.join(map(str, chunk_sizes))} (2 decimals)"
    side = next((k for k in ("source", "target") if all(close(float(answer[c]), k, c) for c in chunk_sizes)), None)
    hint = (f" (these are the {side} lengths alone: count the padded length max(src_len, tgt_len + 1), which "
            "the batches are sorted by)" if side else
            ": per batch, count the distinct values of max(src_len, tgt_len + 1), then average over the batches")
    raise AssertionError(f"{what} is not right yet at chunk_size {', '.join(map(str, wrong))}{hint}")


def check_case_sensitive_sentences(answer, hypotheses, references,
                                   what: str = "the sentences whose BLEU depends on case") -> str:
    """Check the indices (0-based, in any order) of the sentences whose cased and lowercased sentence BLEU
    (``sacrebleu.sentence_bleu``) differ, naming indices counted from 1, a count given instead of the indices,
    sentences missing or too many; never the indices or their number."""
    import sacrebleu

    require_answered(answer, what)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    expected = {i for i, (h, r) in enumerate(zip(hypotheses, references))
                if abs(sacrebleu.sentence_bleu(h, [r]).score - sacrebleu.sentence_bleu(h, [r], lowercase=True).score)
                > 1e-9}
    if isinstance(answer, (int, np.integer)) and not isinstance(answer, bool):
        raise AssertionError(f"{what}: give the list of the sentences' indices, not their number")
    try:
        got = {int(i) for i in answer}
    except (TypeError, ValueError):
        raise AssertionError(f"{what} must be a list of sentence indices, got {type(answer).__name__}") from None
    if got == expected:
        return f"correct: {what} (all of them, and no other)"
    if got == {i + 1 for i in expected}:
        raise AssertionError(f"{what}: your indices count from 1; Python counts from 0 (hyps[0] is the first)")
    problems = (["some of yours score the same cased and lowercased"] if got - expected else []) + (
        ["some sentences whose scores differ are missing"] if expected - got else [])
    raise AssertionError(f"{what} are not right yet: " + " and ".join(problems))


def _train_step_batches(vocab_size: int, batch_seed: int) -> list:
    """Two small copy-task batches (4 and 3 sentences) whose last targets are padded (id 0)."""
    import torch

    from tmlib.data import copy_task_batch

    src, tgt_in, tgt_out = copy_task_batch(4, 6, vocab_size - 3, torch.Generator().manual_seed(batch_seed))
    tgt_out[2:, 4:], tgt_in[2:, 5:] = 0, 0  # two shorter targets
    src2, tgt_in2, tgt_out2 = copy_task_batch(3, 5, vocab_size - 3, torch.Generator().manual_seed(batch_seed + 1))
    tgt_out2[0, 2:], tgt_in2[0, 3:] = 0, 0  # one shorter target
    return [(src, tgt_in, tgt_out), (src2, tgt_in2, tgt_out2)]


def _sgd_steps(vocab_size: int, seed: int, batches, *, pad_id=0, smoothing=0.1, clip=True, schedule_first=False,
               clear=True) -> tuple:
    """The reference steps on a fresh seeded ``"tiny"`` model with plain SGD (base lr 1, the schedule's rates,
    warm-up 10), or one of the usual slips: (losses, {name: weights}, the schedule's step count)."""
    import warnings

    import torch

    from tmlib.model import make_model
    from tmlib.training import make_scheduler, translation_loss
    from tmlib.utils import seed_everything

    seed_everything(seed)
    model = make_model("tiny", vocab_size, dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = make_scheduler(optimizer, model.d_model, warmup_steps=10)
    losses = []
    for src, tgt_in, tgt_out in batches:
        loss = translation_loss(model(src, tgt_in), tgt_out, pad_id=pad_id, label_smoothing=smoothing)
        if clear:
            optimizer.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with warnings.catch_warnings():  # PyTorch warns when the schedule steps first: that is the slip
            warnings.simplefilter("ignore", UserWarning)
            if schedule_first:
                scheduler.step()
            optimizer.step()
            if not schedule_first:
                scheduler.step()
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}, scheduler.last_epoch


def _other_smoothed_losses(vocab_size: int, seed: int, batch, *, pad_id=0, smoothing=0.1) -> list:
    """The first step's loss (the fresh seeded ``"tiny"`` model of :func:`_sgd_steps` on ``batch``) with the
    smoothing of another convention or as a KL divergence, each as ``(hint, loss)``: ε/(V - 1) on each other class
    (chapter 6's exclusive convention), ε/(V - 2) on the classes that are neither correct nor padding (the Annotated
    Transformer's), each as a cross-entropy and as a KL divergence, and the uniform target's KL divergence."""
    import torch

    from tmlib.model import make_model
    from tmlib.utils import seed_everything

    src, tgt_in, tgt_out = batch
    seed_everything(seed)
    model = make_model("tiny", vocab_size, dropout=0.0)
    with torch.no_grad():
        log_p = torch.log_softmax(model(src, tgt_in).double(), dim=-1)
    v, eps, real = vocab_size, smoothing, tgt_out != pad_id
    onehot = torch.nn.functional.one_hot(tgt_out, v).double()
    not_pad = torch.ones(v, dtype=torch.float64)
    not_pad[pad_id] = 0.0
    targets = {"uniform": (1 - eps) * onehot + eps / v,
               "exclusive": (1 - eps) * onehot + eps / (v - 1) * (1 - onehot),
               "annotated": (1 - eps) * onehot + eps / (v - 2) * (1 - onehot) * not_pad}

    def mean(per_token):
        return float(per_token[real].mean())

    def kl(t):
        return mean((torch.xlogy(t, t) - t * log_p).sum(-1))

    course = ("the course spreads ε_ls over all V classes, ε_ls/V each, the correct one included (chapter 6's "
              "uniform convention, PyTorch's label_smoothing)")
    exclusive = "chapter 6's exclusive convention (the authors' code): ε_ls/(V - 1) on each of the V - 1 other classes"
    annotated = ("the Annotated Transformer's convention: ε_ls/(V - 2) on each class that is neither the correct "
                 "one nor padding")
    as_kl = "is a KL divergence, not the cross-entropy (the two differ by the target's entropy), and it smooths with"
    return [(f"smooths with {exclusive}; {course}", mean(-(targets["exclusive"] * log_p).sum(-1))),
            (f"{as_kl} {exclusive}; {course}", kl(targets["exclusive"])),
            (f"smooths with {annotated}; {course}", mean(-(targets["annotated"] * log_p).sum(-1))),
            (f"{as_kl} {annotated}; {course}", kl(targets["annotated"])),
            ("is the KL divergence to the smoothed target, not the cross-entropy: the two differ by the target's "
             "entropy (the target itself is right)", kl(targets["uniform"]))]


def _weights_match(got, want, start) -> bool:
    """Every weight within 1e-5 of the largest weight change of the reference step (plus float32's rounding)."""
    import torch

    if not isinstance(got, dict) or set(got) != set(want):
        return False
    step = max((want[n] - start[n]).abs().max().item() for n in want)
    return all(torch.is_tensor(got[n]) and got[n].shape == want[n].shape
               and bool(((got[n].detach().float() - want[n]).abs() <= 1e-5 * step + 2 ** -20 * want[n].abs()).all())
               for n in want)


def _names_used(fn, inner: str) -> set:
    """The names (attributes and globals) that the function ``inner``, which the given wrapper ``fn`` calls, uses in
    its code, nested functions included; empty when it cannot be read (the grader's stand-in)."""
    code = getattr(fn, "__code__", None)
    cells = dict(zip(code.co_freevars, fn.__closure__ or ())) if code is not None else {}
    found = cells[inner].cell_contents if inner in cells else getattr(fn, "__globals__", {}).get(inner)
    code, names = getattr(found, "__code__", None), set()
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


def check_train_step(run_train_step, vocab_size: int = 13, *, seed: int = 0, batch_seed: int = 5,
                     what: str = "your train_step") -> str:
    """Check exercise 8.4's training step through its given ``run_train_step(seed, batches, plain_sgd)`` (the step
    once per batch on a fresh seeded ``"tiny"`` model; returns the losses, the weights and the schedule's step
    count) against a reference step: the label-smoothed loss (0.1) over the non-padded targets, the gradients
    cleared, backward, the global norm clipped to 1, the optimizer's step, then the schedule's.

    It runs one and two steps with plain SGD (base lr 1 times the schedule): its update lr·g shows the clipping, the
    rate and a stale gradient, which Adam's first step lr·g/(|g| + ε) hides. Losses to 1e-5, weights to 1e-5 of the
    largest weight change; the schedule must advance once per step. A failure names the slip (padding counted, no
    smoothing, no clipping or each value clipped (clip_grad_value_), the schedule stepped before the optimizer or
    not once per step, gradients not cleared or cleared too late, another convention of label smoothing
    (ε/(V - 1) or ε/(V - 2) spread over the other classes) or a KL divergence for the cross-entropy); never a
    value."""
    batches = _train_step_batches(vocab_size, batch_seed)
    runs = [run_train_step(seed, batches[:n], plain_sgd=True) for n in (1, 2)]  # the student's step, first
    from tmlib.course.diagnostics import _not_written, _unwritten_inside

    if _unwritten_inside(run_train_step, ["train_step"]):
        raise _not_written("train_step")
    for n, result in zip((1, 2), runs):
        if not isinstance(result, tuple) or len(result) != 3:
            raise AssertionError("run_train_step is given: keep it as it is (it returns three things)")
        losses = result[0]
        if not isinstance(losses, list) or len(losses) != n or not all(type(x) is float for x in losses):
            got = type(losses[0]).__name__ if isinstance(losses, list) and losses else repr(losses)
            raise AssertionError(f"{what} should return the loss as a Python float (loss.item()), got {got}")
        if not all(np.isfinite(losses)):
            raise AssertionError(f"{what} returned a loss that is not finite")
    ref = [_sgd_steps(vocab_size, seed, batches[:n]) for n in (1, 2)]
    start = _sgd_steps(vocab_size, seed, [])[1]
    loss = runs[0][0][0]
    if abs(loss - ref[0][0][0]) > 1e-5:
        slips = [("counts the padded positions: average over the targets that are not pad_id (ignore_index)",
                  dict(pad_id=None)),
                 ("has no label smoothing: pass label_smoothing", dict(smoothing=0.0)),
                 ("counts the padded positions and has no label smoothing", dict(pad_id=None, smoothing=0.0))]
        hint = next((h for h, kw in slips if abs(loss - _sgd_steps(vocab_size, seed, batches[:1], **kw)[0][0])
                     <= 1e-5), None) or next((h for h, value in _other_smoothed_losses(vocab_size, seed, batches[0])
                                              if abs(loss - value) <= 1e-5), None) or (
            "differs from the label-smoothed cross-entropy over the non-padded targets, computed before the update")
        raise AssertionError(f"the loss of {what} {hint}")
    counts = (runs[0][2], runs[1][2])
    if counts != (1, 2):
        raise AssertionError(f"the schedule took {counts[1]} steps in 2 training steps: call scheduler.step() "
                             "once per training step, after optimizer.step()")
    if not _weights_match(runs[0][1], ref[0][1], start):
        slips = [("the weights did not move: call optimizer.step() after loss.backward(), and clear the "
                  "gradients before backward, not between backward and the step", None),
                 ("the gradients were not clipped: is clip_grad_norm_ missing, or called before loss.backward(), "
                  "when there is no gradient yet to clip, or were they clipped by value (clip_grad_value_) rather "
                  "than by their global norm? Clip their global norm to max_norm once backward has "
                  "computed them, before optimizer.step()", dict(clip=False)),
                 ("the step used the next step's learning rate: step the schedule after the optimizer",
                  dict(schedule_first=True))]
        hint = next((h for h, kw in slips if _weights_match(runs[0][1], start if kw is None else
                                                            _sgd_steps(vocab_size, seed, batches[:1], **kw)[1],
                                                            start)),
                    "they differ from a reference step: forward, loss, clear the gradients, backward, clip, "
                    "optimizer step, schedule step")
        used = _names_used(run_train_step, "train_step")
        if hint == slips[1][0] and "clip_grad_value_" in used and "clip_grad_norm_" not in used:
            # clipping each entry to max_norm changes none of these gradients: the same weights as no clipping
            hint = ("clip_grad_value_ clips each gradient entry on its own, which left these gradients as they were: "
                    "clip the global norm (clip_grad_norm_), not each value")
        raise AssertionError(f"the weights after one step of {what} are not right yet: {hint}")
    if abs(runs[1][0][1] - ref[1][0][1]) > 1e-5 or not _weights_match(runs[1][1], ref[1][1], start):
        stale = _sgd_steps(vocab_size, seed, batches, clear=False)[1]
        hint = ("the first step's gradients were added to the second's: clear them (optimizer.zero_grad()) "
                "before loss.backward()" if _weights_match(runs[1][1], stale, start) else
                "the first step is right, the second is not: does the step keep state from one call to the next?")
        raise AssertionError(f"the second step of {what} is not right yet: {hint}")
    return f"correct: one and two steps of {what} match a reference step (to 1e-5)"
