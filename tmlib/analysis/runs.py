"""Chapter 9's translation runs side by side: the runs of the recommended configuration stored with the course
(``benchmarks/results/translate_<name>.json``, see ``book/measurements.ipynb``) and a run of your own, one row each.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tmlib.analysis.benchmarking import load_result
from tmlib.machine import cpu_class

#: The stored runs of chapter 9's configuration: 15 minutes on two 2-core CPUs (float32 and bf16, as
#: ``amp="auto"`` chose on each) and 4 minutes on a data-centre GPU. Chapter 9 also asks for ``cpu_seed1``, a second
#: seed of the bf16 CPU run, which is left out (listed as unavailable) where no record of it is stored.
STORED_RUNS = ("cpu_auto", "cpu", "cuda")

COLUMNS = ("minutes", "CPU computes bf16 natively", "precision", "dropout", "steps", "epochs", "target tokens/s",
           "steps per minute", "kept step", "lowest validation cross-entropy", "BLEU (cased, beam 4)")


def native_bf16(machine: dict | None) -> str:
    """Whether the run's CPU computes bf16 natively (:func:`tmlib.machine.cpu_class`, which also sees kernels capped
    to imitate a smaller CPU), from its machine description: "yes", "no", "n/a (GPU)" (a GPU trained it) or "?"
    (not recorded)."""
    machine = machine or {}
    if machine.get("gpu"):
        return "n/a (GPU)"
    if machine.get("cpu_native_bf16") is None:
        return "?"
    return "yes" if cpu_class(machine).startswith("native bf16") else "no"


def device_name(machine: dict | None) -> str:
    """The GPU's name, else the CPU's model (without "(R)", "(TM)", "Processor", "CPU") and cores, from a machine
    description (:func:`tmlib.machine.machine_info`; ``"?"`` for what it lacks)."""
    machine = machine or {}
    if machine.get("gpu"):
        return machine["gpu"]["name"]
    model = re.sub(r"\((R|TM)\)|\b(Processor|CPU)\b", "", str(machine.get("cpu_model", "?")))
    return f"{' '.join(model.split()) or '?'}, {machine.get('cpu_count', '?')} cores"


def stored_run_row(record: dict) -> dict:
    """One stored run's budget, recipe, steps and scores (the :data:`COLUMNS`), from its record."""
    scored = record["weights_scored"]
    minutes = record["minutes_trained"]
    return {"minutes": round(minutes, 1), "CPU computes bf16 natively": native_bf16(record.get("machine")),
            "precision": record["precision"], "dropout": record["model_config"]["dropout"], "steps": record["steps"],
            "epochs": record["epochs_completed"], "target tokens/s": round(record["target_tokens_per_s_median"]),
            "steps per minute": round(record["steps"] / minutes),
            "kept step": int(scored.split("step ")[-1]) if "step " in scored else "last",
            "lowest validation cross-entropy": round(record["best_val_nll"], 3),
            "BLEU (cased, beam 4)": record["beam4"]["bleu"]}


def trained_run_row(trained, bleu: float) -> dict:
    """The same :data:`COLUMNS` for a run loaded or trained in this session (a
    :class:`~tmlib.training.experiment.TrainedModel`) and its cased beam-4 BLEU on test 2016."""
    history, minutes = trained.history, trained.elapsed_s / 60
    return {"minutes": round(minutes, 1),
            "CPU computes bf16 natively": native_bf16(getattr(trained, "machine", None)),
            "precision": trained.precision["dtype"] if trained.precision else "?",
            "dropout": trained.model.config.dropout, "steps": trained.step, "epochs": trained.epoch,
            "target tokens/s": round(float(np.nanmedian(history["tokens_per_s"]))),
            "steps per minute": round(trained.step / minutes) if minutes > 0 else 0,
            "kept step": trained.best_step if trained.best_step is not None else "last",
            "lowest validation cross-entropy": round(float(np.min(history["val_nll"])), 3),
            "BLEU (cased, beam 4)": round(float(bleu), 2)}


def translation_runs(trained=None, bleu: float | None = None, *, label: str | None = None,
                     names=STORED_RUNS, folder=None) -> pd.DataFrame:
    """The stored runs of chapter 9's configuration and, if ``trained`` is given, your run, one row each.

    Args:
        trained: a :class:`~tmlib.training.experiment.TrainedModel` (from ``load_or_train``), or None.
        bleu: its cased BLEU with beam 4 on test 2016 (required with ``trained``).
        label: the row name of ``trained``, the last row (default: "this page's run", with " (smoke)" added in
            smoke mode, :func:`tmlib.utils.smoke_mode`).
        names: the stored records to read (``translate_<name>``, by :func:`tmlib.analysis.benchmarking.load_result`,
            which downloads them when the checkout lacks them); one that cannot be found is left out, and its name
            listed in ``table.attrs["unavailable"]``.
        folder: where the records are (default: the checkout's ``benchmarks/results``, else the download).

    Returns:
        A DataFrame with one row per run, named "<GPU, or CPU model and cores>, <minutes> min" for a stored run, and
        the columns (:data:`COLUMNS`): ``minutes`` of training; whether the ``CPU computes bf16 natively``
        (:func:`native_bf16`); ``precision`` of the matrix products ("float32" or
        "bfloat16"); ``dropout``; optimizer ``steps``; completed ``epochs``; the median ``target tokens/s``;
        ``steps per minute``; ``kept step``, the step whose weights were kept and scored (the lowest validation
        cross-entropy; "last" when the run kept its last weights); the ``lowest validation cross-entropy`` (nats
        per target token, three decimals); ``BLEU (cased, beam 4)`` on test 2016. Two stored runs on the same
        machine with the same budget are told apart by their seed (", seed <n>" added to the later one's name).

        ``table.attrs`` holds, besides ``"unavailable"``: ``"machine"``, each row's machine as
        :func:`device_name` names it (``"?, ? cores"`` for a run that did not record it), and ``"record"``, each
        row's stored record name (``None`` for ``trained``); both are dicts keyed by the row name.

    Raises:
        ValueError: ``trained`` without ``bleu``.
    """
    if trained is not None and bleu is None:
        raise ValueError("give the run's BLEU (cased, beam 4) with trained")
    rows, unavailable, machines, records = {}, [], {}, {}
    for name in names:
        try:
            record = load_result("translate", name, folder=folder)
        except FileNotFoundError:  # no checkout and no network
            unavailable.append(name)
            continue
        machine = device_name(record.get("machine"))
        row = f"{machine}, {record['minutes_trained']:.0f} min"
        if row in rows:  # another seed of a run already listed
            row += f", seed {record.get('train_config', {}).get('seed', '?')}"
        rows[row], machines[row], records[row] = stored_run_row(record), machine, name
    if trained is not None:
        if label is None:
            from tmlib.utils import smoke_mode

            label = "this page's run" + (" (smoke)" if smoke_mode() else "")
        rows[label] = trained_run_row(trained, bleu)
        machines[label], records[label] = device_name(getattr(trained, "machine", None)), None
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(COLUMNS))
    table.attrs.update(unavailable=unavailable, machine=machines, record=records)
    return table


def kept_by_pass(record: dict) -> pd.Series:
    """What ``keep_best`` holds after each completed pass of a stored run: the lowest validation cross-entropy so far
    (nats per target token), indexed by passes 1, 2, …, from the record's ``val_nll_per_epoch`` (rows ``(pass, step,
    cross-entropy)``; a last row after the final step repeats its pass number and is not a pass end).

    Raises:
        KeyError: the record stores no ``val_nll_per_epoch``.
    """
    ends = {}
    for passes, _step, value in record["val_nll_per_epoch"]:
        ends.setdefault(int(passes), value)  # each pass's first row is its end
    index = pd.RangeIndex(1, len(ends) + 1, name="passes")
    return pd.Series(np.minimum.accumulate([ends[p] for p in sorted(ends)]), index=index)


def dropout_pays_from(without: dict, with_dropout: dict, slowdown: float) -> int | None:
    """The fewest passes P, counted at the pace of steps without dropout, for which dropout's kept weights are better
    in the same time: ``kept_by_pass(with_dropout)`` after ⌊P / slowdown⌋ passes (its steps take ``slowdown`` times
    as long) below ``kept_by_pass(without)`` after P (the last stored value beyond its passes). ``None``: not
    within the passes ``with_dropout`` stores. The rule of ``auto_dropout`` (:mod:`tmlib.training.budget`)."""
    a, b = kept_by_pass(without), kept_by_pass(with_dropout)
    for passes in range(1, int(len(b) * slowdown) + 1):
        done = int(passes / slowdown)  # passes the slower run completes in the same time
        if done >= 1 and b[done] < a[min(passes, len(a))]:
            return passes
    return None


def run_pace(history: dict, window: int = 100) -> np.ndarray:
    """A run's pace: seconds a step over each window of ``window`` steps, from the run's history (one row a step,
    ``step`` and ``elapsed_s``, as :class:`tmlib.training.Trainer` records it). The windows end at steps
    ``2·window``, ``3·window``, …; the first window, which holds the start-up, is left out. The time of validation
    passes and checkpoints inside a window counts.

    Returns:
        shape ``(n_windows,)``, seconds a step; empty when the history holds no ``elapsed_s`` or fewer than
        ``2·window`` steps (a smoke run of a few steps).

    Raises:
        ValueError: ``window`` below 1, or ``step`` and ``elapsed_s`` of different lengths.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1 step, got {window}")
    steps = np.asarray(history.get("step", []), dtype=np.int64)
    elapsed = np.asarray(history.get("elapsed_s", []), dtype=np.float64)
    if len(elapsed) == 0:
        return np.zeros(0)
    if len(steps) != len(elapsed):
        raise ValueError(f"the history has {len(steps)} steps but {len(elapsed)} elapsed times")
    ends = elapsed[steps % window == 0]  # the elapsed time at steps window, 2·window, ...
    return np.diff(ends) / window


def expected_epochs(estimate: float, slowdown: float, dropout: float) -> float:
    """The epochs a run completes on a quiet machine, from ``auto_dropout``'s estimate (the epochs the budget buys at
    the pace of steps timed without dropout, :func:`tmlib.training.budget.passes_in_budget`): the estimate divided by
    ``slowdown`` (how many times as long a step with dropout takes) when ``dropout`` was chosen, the estimate itself
    when it was not. Validation passes are left out of both.

    Raises:
        ValueError: a negative ``estimate``, ``slowdown`` below 1, or ``dropout`` outside [0, 1).
    """
    if estimate < 0:
        raise ValueError(f"estimate must be at least 0 epochs, got {estimate}")
    if slowdown < 1:
        raise ValueError(f"slowdown is how many times as long a step with dropout takes (at least 1), got {slowdown}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
    return estimate / slowdown if dropout > 0 else float(estimate)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 9's result sentences: what a run shows, in words, from its history and records.


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def progress_sentence(history: dict, best_step: int | None = None) -> str:
    """Where a run's validation cross-entropy was lowest, whether it rose after, and which label-smoothed validation
    losses lie below the running mean of the training loss (over ``max(1, len(loss) // 50)`` steps, the mean of
    Figure 9.3).

    Args:
        history: a run's history (:class:`tmlib.training.Trainer`): per step ``step`` and ``loss``; per validation
            pass ``val_step``, ``val_loss`` (label-smoothed) and ``val_nll`` (plain cross-entropy, nats per token).
        best_step: the step whose weights the model holds (``TrainedModel.best_step``), or None.

    Returns:
        One paragraph: "This run was still improving at its last validation pass: …" when the last pass was the
        lowest, else "This run's validation cross-entropy was lowest at …, and rose in the N passes after it: …".

    Raises:
        ValueError: a history without validation passes, or ``step`` and ``loss`` of different lengths.
    """
    h = {k: np.asarray(history.get(k, [])) for k in ("step", "loss", "val_step", "val_loss", "val_nll")}
    if len(h["val_nll"]) == 0 or len(h["val_step"]) != len(h["val_nll"]):
        raise ValueError("the history needs val_step and val_nll, one value per validation pass")
    if len(h["step"]) != len(h["loss"]) or len(h["loss"]) == 0:
        raise ValueError(f"the history has {len(h['step'])} steps but {len(h['loss'])} losses")
    best, n_val = int(np.argmin(h["val_nll"])), len(h["val_step"])
    later = n_val - 1 - best  # validation passes after the lowest one
    k = max(1, len(h["loss"]) // 50)
    smooth = np.convolve(h["loss"], np.ones(k) / k, mode="valid")  # the k-step running mean of the training loss
    train_at_val = np.interp(h["val_step"], h["step"][k - 1:], smooth)  # that mean at each validation step
    below = [int(s) for s, v, t in zip(h["val_step"], h["val_loss"], train_at_val) if v < t]

    lowest = (f"{h['val_nll'][best]:.3f} nats (perplexity {np.exp(h['val_nll'][best]):.1f}), at step "
              f"{int(h['val_step'][best]):,}, validation pass {best + 1} of {n_val}")
    if later:
        result = (f"This run's validation cross-entropy was lowest at {lowest}, and rose in the {later} "
                  f"{_plural(later, 'pass', 'passes')} after it: the last, at step {int(h['val_step'][-1]):,}, gave "
                  f"{h['val_nll'][-1]:.3f} (label-smoothed {h['val_loss'][-1]:.3f}).")
    else:
        result = f"This run was still improving at its last validation pass: its lowest cross-entropy, {lowest}."
    if best_step is not None:
        result += f" The model holds the weights of step {best_step:,}."
    result += (f" Of its {n_val} label-smoothed validation {_plural(n_val, 'loss', 'losses')}, {len(below)} "
               f"{_plural(len(below), 'lies', 'lie')} below the smoothed training loss")
    if below:
        steps = ", ".join(f"{s:,}" for s in below)
        return result + f", at {_plural(len(below), 'step', 'steps')} {steps}."
    return result + "."


def beam_greedy_sentence(scores: dict) -> str:
    """Beam search against greedy decoding, as the score table rounds them (one decimal).

    Args:
        scores: ``{"greedy": s, "beam 4": s}``, each ``s`` a dict with ``"bleu"`` and ``"chrf"``
            (:func:`tmlib.decoding.bleu_scores`).

    Returns:
        "On this run beam search scores X BLEU above (below) greedy decoding (…)", or "the same BLEU as".

    Raises:
        KeyError: ``scores`` lacks "greedy" or "beam 4", or their "bleu" or "chrf".
    """
    beam, greedy = ({m: round(scores[name][m], 1) for m in ("bleu", "chrf")} for name in ("beam 4", "greedy"))
    gap = round(beam["bleu"] - greedy["bleu"], 1)
    than = "the same BLEU as" if gap == 0 else f"{abs(gap):.1f} BLEU {'above' if gap > 0 else 'below'}"
    return (f"On this run beam search scores {than} greedy decoding ({beam['bleu']:.1f} against "
            f"{greedy['bleu']:.1f}), and chrF {beam['chrf']:.1f} against {greedy['chrf']:.1f}.")


def stored_run_sentence(steps: int, epochs: int, dropout: float, lowest: float, runs: pd.DataFrame,
                        same_dropout=("no dropout, first seed", "dropout 0.1, first seed"),
                        seed_pair=("no dropout, first seed", "no dropout, second seed")) -> str:
    """A run's lowest validation cross-entropy beside the stored run of its dropout, and how far apart two seeds
    without dropout lie.

    Args:
        steps, epochs, dropout, lowest: the run's optimizer steps, completed epochs, dropout and lowest validation
            cross-entropy (nats per token).
        runs: :func:`translation_runs`'s table, its rows renamed to the labels below.
        same_dropout: the rows to compare with; the first whose ``dropout`` equals ``dropout`` is named.
        seed_pair: two rows that differ only in their seed; their distance is added when both are in ``runs``.

    Returns:
        "This page's run (… steps, … epochs, dropout …) reached a lowest validation cross-entropy of … nats; the
        stored run “…” reached …. The two seeds without dropout lie … BLEU and … nats of cross-entropy apart."
    """
    bleu, ce = "BLEU (cased, beam 4)", "lowest validation cross-entropy"
    result = (f"This page's run ({steps:,} steps, {epochs} epochs, dropout {dropout:g}) "
              f"reached a lowest validation cross-entropy of {lowest:.3f} nats")
    match = [n for n in same_dropout if n in runs.index and runs.loc[n, "dropout"] == dropout]
    result += f"; the stored run \u201c{match[0]}\u201d reached {runs.loc[match[0], ce]:.3f}." if match else "."
    if set(seed_pair) <= set(runs.index):
        a, b = runs.loc[seed_pair[0]], runs.loc[seed_pair[1]]
        result += (f" The two seeds without dropout lie {abs(round(a[bleu], 1) - round(b[bleu], 1)):.1f} BLEU and "
                   f"{abs(a[ce] - b[ce]):.3f} nats of cross-entropy apart.")
    return result


def common_steps_difference(history: dict, record: dict) -> tuple[list[int], float] | None:
    """The validation steps a run shares with a stored record, and the largest |difference| of their validation
    cross-entropies there, the run's values rounded to the record's 4 decimals.

    Args:
        history: the run's history (``val_step``, ``val_nll``).
        record: a stored record with ``val_nll_per_epoch`` (rows ``(pass, step, cross-entropy)``).

    Returns:
        ``(steps, largest difference)``, or None when they share no validation step.

    Raises:
        KeyError: the record stores no ``val_nll_per_epoch``.
    """
    stored = {int(s): v for _, s, v in record["val_nll_per_epoch"]}  # step -> cross-entropy (4 decimals)
    common = [(int(s), float(v)) for s, v in zip(history["val_step"], history["val_nll"]) if int(s) in stored]
    if not common:
        return None
    return [s for s, _ in common], max(abs(round(v, 4) - stored[s]) for s, v in common)


def same_run_sentence(differ: float, last_common: int, record: dict, *, seed: int, cpu_model: str | None,
                      steps: int, lowest: float, best_step: int | None, bleu: float) -> str:
    """Whether a run computed what a stored record of the same configuration did, and, if it did and trained
    further, what its kept weights gained in cross-entropy and in BLEU.

    Args:
        differ, last_common: :func:`common_steps_difference`'s largest difference and the last common step.
        record: the stored record (``steps``, ``kept_step``, ``best_val_nll``, ``beam4["bleu"]``,
            ``train_config["seed"]``, ``machine["cpu_model"]``).
        seed, cpu_model: the run's seed and CPU model (None: not recorded).
        steps, lowest, best_step, bleu: the run's steps, lowest validation cross-entropy, kept step (None: the
            last) and cased beam-4 BLEU.

    Returns:
        "Same seed, same configuration, same kind of CPU: …" when the differences lie under the record's rounding
        (5e-5) with the same seed and CPU model, else "This page's run and the stored one differ by up to …".
    """
    same = (differ < 5e-5 and seed == record["train_config"]["seed"]
            and cpu_model == record["machine"]["cpu_model"])
    if not same:
        return f"This page's run and the stored one differ by up to {differ:.4f} nats at their common steps."
    said = (f"Same seed, same configuration, same kind of CPU: up to step {last_common:,} this page's run "
            f"computed the same validation cross-entropies as the stored run, and it then made "
            f"{steps - record['steps']:,} more steps ({steps:,} against {record['steps']:,}).")
    there = (record["best_val_nll"], record["beam4"]["bleu"])
    if best_step is not None and lowest < there[0] and round(bleu, 1) < round(there[1], 1):
        said += (f" Its kept weights, the same training {best_step - record['kept_step']:,} steps further on, "
                 f"have the lower cross-entropy ({lowest:.3f} against {there[0]:.3f}) yet the lower BLEU "
                 f"({bleu:.1f} against {there[1]:.1f}): {round(there[1], 1) - round(bleu, 1):.1f} BLEU apart "
                 "for nearly the same model, which is BLEU's noise.")
    return said


def dropout_choice_sentence(choice: dict | None, epochs: int) -> str | None:
    """The dropout ``auto_dropout`` chose for a run, from ``TrainedModel.dropout_choice`` (``passes``: the epochs the
    budget bought at the pace timed before the first step; ``p``: the dropout chosen), and the epochs it completed.
    None when no choice was made (a budget in steps, or ``auto_dropout`` off)."""
    if not choice or choice.get("passes") is None:
        return None
    return (f"This page's run: the budget bought about {choice['passes']:.1f} epochs at the pace timed before "
            f"the first step, so the trainer chose dropout {choice['p']:g}; the run completed {epochs} epochs.")
