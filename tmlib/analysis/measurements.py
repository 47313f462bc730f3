"""Reading the benchmark records (``benchmarks/results/*.json``, :func:`~tmlib.analysis.benchmarking.load_result`)
for the page "How the numbers in this course were measured" (book/measurements.ipynb) and the records page after it:
thread counts, repeats, how far repeats spread, the acceptance rule, the course's machines and the seed pair."""
from __future__ import annotations

import numpy as np


def _values(node, keys: tuple[str, ...], out: set) -> set:
    """Every integer stored under one of ``keys`` anywhere in a record (nested dicts and lists)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, int) and not isinstance(value, bool):
                out.add(value)
            _values(value, keys, out)
    elif isinstance(node, list):
        for value in node:
            _values(value, keys, out)
    return out


def _by_threads(node, out: set) -> set:
    """The thread counts that key a table ``..._by_threads`` anywhere in a record (keys such as ``"1"``, ``"2"``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.endswith("_by_threads") and isinstance(value, dict):
                out.update(int(k) for k in value if str(k).isdigit())
            _by_threads(value, out)
    elif isinstance(node, list):
        for value in node:
            _by_threads(value, out)
    return out


def record_threads(record: dict) -> list[int]:
    """The torch thread counts a record states, sorted: its settings' ``threads``, its machines' ``torch_threads``
    and the keys of any table ``..._by_threads`` (such as the KV-cache record's ``s_per_token_by_threads``, whose
    keys ``"1"`` and ``"2"`` are thread counts). [] if it states none."""
    return sorted(_values(record, ("threads", "torch_threads"), set()) | _by_threads(record, set()))


def record_repeats(record: dict) -> list[int]:
    """How many timed repeats a record stores per case (the lengths of its ``times_s`` lists); [] if none."""
    found: set[int] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "times_s":
                    lists = value.values() if isinstance(value, dict) else [value]
                    found.update(len(v) for v in lists)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(record)
    return sorted(found)


def repeat_spreads(*tables: list[dict]) -> np.ndarray:
    """Slowest over fastest repeat, ``max(times_s) / min(times_s)``, of every case in the given lists of rows."""
    return np.array([max(r["times_s"]) / min(r["times_s"]) for rows in tables for r in rows])


AGREE = 2.0
"""The agreement test's threshold: the windows agree when the largest window ratio is less than this many times the
smallest. A larger spread means the windows disagree: the load changed during the run, or the noise is too large for
that many windows (at a fixed noise the spread grows with the number of windows, :func:`rejection_rates`)."""

LEVEL = 0.95
"""The confidence level of :func:`ratio_interval`'s interval, which the acceptance rule (:func:`verdict`) reads."""


def ratio_interval(ratios, level: float = LEVEL) -> tuple[float, float, float]:
    """The geometric mean of window ratios and its Student-t confidence interval.

    Ratios multiply, so the interval is computed on their logarithms: with ``m`` and ``s`` the mean and the sample
    standard deviation (``ddof=1``) of ``log(ratios)`` and ``t`` the ``(1 + level) / 2`` quantile of Student's t
    distribution with ``n - 1`` degrees of freedom (``scipy.stats.t.ppf``), the interval is
    ``exp(m - t s / sqrt(n))`` to ``exp(m + t s / sqrt(n))``. It narrows as ``1 / sqrt(n)`` with more windows, which
    is why more windows can only sharpen the answer. It assumes the log ratios of the windows are independent draws
    of one distribution (nearly normal), which a steady load gives.

    Args:
        ratios: one positive, finite ratio per window, at least two (a sequence of floats).
        level: the confidence level, between 0 and 1.

    Returns:
        tuple[float, float, float]: the geometric mean ``exp(m)``, then the interval's lower and upper ends.

    Raises:
        ValueError: fewer than two ratios, a ratio that is not positive and finite, or a level outside (0, 1).
    """
    from scipy import stats

    logs = np.log(_positive(ratios))
    if len(logs) < 2:
        raise ValueError(f"an interval needs at least two windows, got {len(logs)}")
    if not 0 < level < 1:
        raise ValueError(f"the level must lie between 0 and 1, got {level}")
    m, s = logs.mean(), logs.std(ddof=1)
    half = stats.t.ppf((1 + level) / 2, len(logs) - 1) * s / np.sqrt(len(logs))
    return float(np.exp(m)), float(np.exp(m - half)), float(np.exp(m + half))


def _positive(ratios) -> np.ndarray:
    """``ratios`` as a float array, after checking that there is at least one and that each is positive and finite."""
    values = np.array([float(r) for r in ratios])
    if not len(values) or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(f"the rule needs one positive, finite ratio per window, got {values.tolist()}")
    return values


def verdict(ratios) -> str:
    """The acceptance rule for the window-by-window ratios of A's time to B's (or of their throughputs).

    One window is not a measurement. For two or more, two tests: the windows agree (the largest ratio is less than
    :data:`AGREE` times the smallest; otherwise the windows disagree, because the load changed during the run or the
    noise is too large for this many windows: "not yet a measurement"), and the
    95% interval of the ratios' geometric mean (:func:`ratio_interval`) excludes 1 ("the ratio stands") or contains
    it ("no difference shown"; the printed interval says how large a difference the windows could still hide).
    Unlike a test that asks every window to lie on one side of 1, whose chance of passing by luck is ``2 ** (1 - n)``
    and which a real but small difference fails more often the more windows there are, the interval narrows with
    more windows.

    Args:
        ratios: one positive ratio per window (a sequence of floats, at least one): A's time divided by B's in the
            same window, never the raw times (the geometric mean of times is not a ratio).

    Returns:
        str: one sentence without a full stop: the number of windows, their spread ``max / min``, the geometric
        mean and its interval, and the rule's conclusion as its last words, "not yet a measurement", "the ratio
        stands" or "no difference shown".

    Raises:
        ValueError: no ratios, or a ratio that is not positive and finite.
    """
    values = _positive(ratios)
    if len(values) == 1:
        return f"one window, ratio {values[0]:.3f}: one window cannot show its own spread, so not yet a measurement"
    spread, agree = _spread_test(values)
    text = f"{len(values)} windows, spread by a factor of {spread:.2f}"
    if not agree:
        return text + (f", {AGREE:g} or more: the windows disagree (the load changed, or the noise is too large "
                       "for this many windows), so not yet a measurement")
    mean, low, high = ratio_interval(values)
    text += f" (below {AGREE:g}); geometric mean {mean:.3f}, {LEVEL:.0%} interval {low:.3f} to {high:.3f}, which "
    if _excludes_one(low, high):
        return text + "excludes 1: the ratio stands"
    return text + "contains 1: no difference shown"


def _spread_test(values: np.ndarray) -> tuple[float, bool]:
    """Test 1 on one run's ratios: their spread ``max / min``, and whether the windows agree (spread below AGREE)."""
    spread = float(values.max() / values.min())
    return spread, spread < AGREE


def _excludes_one(low: float, high: float) -> bool:
    """Test 2: the interval from ``low`` to ``high`` excludes 1."""
    return low > 1 or high < 1


def rejection_rates(windows, sigma: float, runs: int = 10_000, seed: int = 0) -> dict[int, dict[str, float]]:
    """How often :func:`verdict`'s two tests fire on two equally fast calls, simulated for each number of windows.

    For each ``w`` in ``windows``, in order, draws ``runs`` runs of ``w`` window log-ratios, independent and normal
    with mean 0 (A and B equally fast) and standard deviation ``sigma``, from one generator
    ``numpy.random.default_rng(seed)`` (shape ``(runs, w)``), and applies to each run, as ratios ``exp(log)``, the
    spread test of :func:`verdict` (largest over smallest ratio at least :data:`AGREE`) and, on its own, the interval
    test (:func:`ratio_interval`'s interval at :data:`LEVEL` excludes 1). At a fixed ``sigma`` the first rejects more
    runs the more windows there are; the second finds a difference that is not there in about ``1 - LEVEL`` of runs
    whatever ``w``.

    Args:
        windows: numbers of windows, each an int of at least 2 (a list, tuple, range or array of them, or one int).
        sigma: the standard deviation of a window's log-ratio, positive.
        runs: simulated runs per number of windows, at least 1.
        seed: the seed of the generator.

    Returns:
        dict[int, dict[str, float]]: for each ``w``, ``{"spread": share of runs test 1 rejects, "interval": share of
        runs in which the interval alone excludes 1}``, shares between 0 and 1.

    Raises:
        ValueError: a number of windows below 2, ``sigma <= 0`` (or not finite), or ``runs < 1``.
    """
    counts = list(windows) if isinstance(windows, (list, tuple, range, np.ndarray)) else [windows]
    if not counts or any(not isinstance(w, (int, np.integer)) or isinstance(w, bool) or w < 2 for w in counts):
        raise ValueError(f"each number of windows must be an int of at least 2, got {windows}")
    if not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be positive and finite, got {sigma}")
    if not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ValueError(f"runs must be an int of at least 1, got {runs}")
    rng = np.random.default_rng(seed)
    rates = {}
    for w in counts:
        runs_ratios = np.exp(rng.normal(0, sigma, size=(runs, int(w))))
        rejected = [not _spread_test(ratios)[1] for ratios in runs_ratios]
        found = [_excludes_one(*ratio_interval(ratios)[1:]) for ratios in runs_ratios]
        rates[int(w)] = {"spread": float(np.mean(rejected)), "interval": float(np.mean(found))}
    return rates


PACE = 1.5
"""The reference test's band: a run ran at a record's pace when each of its medians lies within this factor of the
record's median of the same case, either way (from 1 / PACE to PACE times it)."""


def pace(live_medians, record_medians) -> str:
    """The reference test: a run's median times set beside a stored record's medians of the same cases.

    The windows of one run cannot see a load that slows every call alike; a reference can. Each factor is a live
    median divided by the record's. All factors within :data:`PACE` of 1, either way: the run went at the record's
    pace. Otherwise it did not, and the sentence says in which direction (no factor below 1: slower; none above 1:
    faster; some above and some below: neither).

    Args:
        live_medians: the run's median seconds per call, one per case (a sequence of positive floats).
        record_medians: the record's median seconds per call of the same cases, in the same order.

    Returns:
        str: one sentence without a full stop: the factors, then the conclusion as its last words, "at the record's
        pace", "slower than the record's pace", "faster than the record's pace" or "not the record's pace".

    Raises:
        ValueError: the two sequences differ in length, are empty, or hold a value that is not positive and finite.
    """
    live, stored = [float(t) for t in live_medians], [float(t) for t in record_medians]
    if not live or len(live) != len(stored) or not all(np.isfinite(t) and t > 0 for t in live + stored):
        raise ValueError(f"pace needs equally many positive, finite medians on both sides, got {live} and {stored}")
    factors = [a / b for a, b in zip(live, stored)]
    text = "this run's medians are " + " and ".join(f"{f:.2f}" for f in factors) + " times the record's"
    if all(1 / PACE <= f <= PACE for f in factors):
        return text + f", within a factor of {PACE:g} either way: at the record's pace"
    if min(factors) >= 1:
        return text + f", slower by more than a factor of {PACE:g} for at least one: slower than the record's pace"
    if max(factors) <= 1:
        return text + f", faster by more than a factor of {PACE:g} for at least one: faster than the record's pace"
    return text + ", some above 1 and some below: not the record's pace"


# The course's CPU machines (the page "How the numbers in this course were measured", section "The machines"), by the
# CPU model the operating system reports and whether the CPU computes bf16 natively: M1 and M3 report the same model.
COURSE_CPUS = {("AMD EPYC", True): "M1", ("Intel(R) Xeon(R) Processor", True): "M2", ("AMD EPYC", False): "M3"}


def course_machine(machine: dict | None) -> str | None:
    """The course's name of the machine a record describes.

    Args:
        machine: a machine description (:func:`tmlib.machine.machine_info`, as records and checkpoints store it),
            or None where none was recorded.

    Returns:
        ``"M1"``, ``"M2"`` or ``"M3"`` for a machine with 2 CPUs and no GPU whose CPU model and native bf16 match
        that machine's; None for any other machine (a GPU machine included) and for None.
    """
    if not machine or machine.get("gpu") or machine.get("cpu_count") != 2:
        return None
    return COURSE_CPUS.get((machine.get("cpu_model"), bool(machine.get("cpu_native_bf16"))))


def your_run(history: dict, machine: dict | None, dtype: str, references: dict[str, dict],
             yardstick: tuple[float, float] | None = None, dropout: float | None = None) -> str:
    """A run of chapter 9 set beside the course's 15-minute run of the same kind of machine, in two sentences.

    Args:
        history: the run's ``history.json`` (lists ``step``, ``elapsed_s``, ``val_nll`` and ``val_step``).
        machine: the machine its checkpoint describes, or None where the checkpoint does not say.
        dtype: the precision it trained in, ``"float32"`` or ``"bfloat16"``.
        references: the course's 15-minute runs by machine name (``"M1"``, ``"M2"``, ``"M3"``), each a record of
            ``benchmarks/results/`` with ``steps`` and ``best_val_nll``.
        yardstick: the smaller and the larger gap in validation cross-entropy between two runs of the same kind,
            such as a seed pair's gaps in lowest and in last validation cross-entropy (:func:`seed_yardstick`); if
            given, a last sentence says whether the run's gap is no larger than the larger of the two.
        dropout: the run's P_drop (its checkpoint's ``config["model"]["dropout"]``), or None where unknown. Where it
            differs from the matched run's ``model_config["dropout"]``, the last sentence says so instead: two runs
            that differ in dropout are not of the same kind, so the yardstick cannot measure their gap.

    Returns:
        str: the run's steps, minutes and lowest validation cross-entropy, then either that it is one of the
        ``references`` itself (same steps, same lowest cross-entropy), or how its steps and cross-entropy compare
        with the run of the machine it matches (:func:`course_machine`, with the date the machine description
        carries, if any), or the machine's description. A match means the same CPU model and native bf16, not the
        same speed: a virtual machine of the same model can run faster or slower with its host's load.
    """
    from tmlib.machine import describe_machine

    steps, minutes = history["step"][-1], history["elapsed_s"][-1] / 60
    best_nll, best_step = min(zip(history["val_nll"], history["val_step"]))
    text = (f"{steps:,} steps in {minutes:.1f} minutes, lowest validation cross-entropy {best_nll:.4f} "
            f"at step {best_step:,}. ")
    for name, ref in references.items():
        if steps == ref["steps"] and abs(best_nll - ref["best_val_nll"]) < 5e-5:
            return text + f"This is {name}'s run in the table, the one that comes with the course."
    like = course_machine(machine)
    ref = references.get(like)
    if ref is None:
        return text + ("It was made on a machine unlike M1, M2 and M3: "
                       + (describe_machine(machine) if machine else "not recorded") + ".")
    gap = best_nll - ref["best_val_nll"]
    verdict = ""
    ref_dropout = (ref.get("model_config") or {}).get("dropout")
    if dropout is not None and ref_dropout is not None and dropout != ref_dropout:
        verdict = (f" The two runs differ in dropout ({dropout:g} against {ref_dropout:g}), so that gap is not set "
                   "beside the gaps between two runs of the same kind.")
    elif yardstick is not None:
        low, high = yardstick
        verdict = (f" That gap is within the gaps between two runs of the same kind ({low:.3f} to {high:.3f}): "
                   "no difference shown." if abs(gap) <= high else
                   f" That gap is larger than the gaps between two runs of the same kind ({low:.3f} to {high:.3f}).")
    when = f" on {machine['date'][:10]}" if machine.get("date") else ""
    return text + (f"It trained in {dtype.replace('bfloat16', 'bf16')}{when} on a machine with the CPU model and "
                   f"instruction sets of {like}: {steps / ref['steps']:.2f} times the {ref['steps']:,} steps of "
                   f"{like}'s 15-minute run in the table, and a lowest validation cross-entropy {abs(gap):.4f} "
                   f"{'below' if gap < 0 else 'above'} that run's {ref['best_val_nll']:.4f}. The same kind of CPU "
                   "is not a promise of the same speed.") + verdict


#: The training settings two runs must share to count as a seed pair (besides the model, the precision and the steps);
#: how a run was stopped, logged or checkpointed, and its seed, may differ.
RECIPE_KEYS = ("max_sentence_len", "max_tokens", "warmup_steps", "lr_factor", "label_smoothing", "grad_clip",
               "accumulate", "ema_decay", "keep_best")

#: The gaps :func:`seed_yardstick` returns, in this order.
SEED_GAPS = ("BLEU, beam 4", "BLEU lowercased, beam 4", "BLEU, greedy", "BLEU lowercased, greedy",
             "lowest validation cross-entropy", "last validation cross-entropy")


def seed_yardstick(run_a: dict, run_b: dict) -> dict[str, float]:
    """How far apart two runs lie that differ only in their seed: the yardstick for any gap between two single runs.

    The seed sets the initial weights and the order of the batches; everything else (model, recipe, precision,
    number of steps, test set) must be the same, or the gap would mix other differences into the seed's.

    Args:
        run_a, run_b: two records of chapter 9's runs (``benchmarks/results/translate_*.json``, read with
            :func:`~tmlib.analysis.benchmarking.load_result`), each with ``model_config``, ``train_config``,
            ``precision``, ``steps``, ``test_set``, ``beam4`` and ``greedy`` (``bleu``, ``bleu_lowercase``),
            ``best_val_nll`` and ``val_nll`` (the last validation pass, at the last step).

    Returns:
        dict: the absolute gap for each name of :data:`SEED_GAPS` (floats; BLEU in points, cross-entropy in nats
        per target token).

    Raises:
        ValueError: the runs share their seed, or differ in the model, a setting of :data:`RECIPE_KEYS`, the
            precision, the number of steps or the test set.
    """
    cfg_a, cfg_b = run_a["train_config"], run_b["train_config"]
    if cfg_a.get("seed") == cfg_b.get("seed"):
        raise ValueError(f"a seed pair needs two seeds, both runs have seed {cfg_a.get('seed')}")
    differ = [k for k in ("model_config", "precision", "steps", "test_set") if run_a.get(k) != run_b.get(k)]
    differ += [k for k in RECIPE_KEYS if cfg_a.get(k) != cfg_b.get(k)]
    if differ:
        raise ValueError(f"the runs differ in more than their seed: {', '.join(differ)}")
    values = [(r["beam4"]["bleu"], r["beam4"]["bleu_lowercase"], r["greedy"]["bleu"], r["greedy"]["bleu_lowercase"],
               r["best_val_nll"], r["val_nll"]) for r in (run_a, run_b)]
    return {name: abs(a - b) for name, a, b in zip(SEED_GAPS, *values)}
