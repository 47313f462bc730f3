"""Reading the benchmark records (``benchmarks/results/*.json``, :func:`~tmlib.analysis.benchmarking.load_result`)
for the page "How the numbers in this course were measured" (book/measurements.ipynb) and the records page after it:
thread counts, repeats, how far repeats spread, and the numbers some records store only as text."""
from __future__ import annotations

import re

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


def record_threads(record: dict) -> list[int]:
    """The torch thread counts a record states (its settings' ``threads`` and its machines' ``torch_threads``)."""
    return sorted(_values(record, ("threads", "torch_threads"), set()))


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


def text_fields(record: dict) -> dict:
    """The numbers that some records store only inside sentences, read in one place.

    The records of chapter 9's runs and of the recipe were written before these numbers had fields of their own, so
    they are stored as text: which weights a run scored (``weights_scored``), the timing ``amp="auto"`` made before
    it chose a precision (``note``), the compiled model's warm-up (``what`` of ``cpu_recipe.json``'s speed record)
    and, for the first stand-in run, which predates ``best_val_nll``, its lowest validation cross-entropy
    (``weights_scored``). A reader that parses them elsewhere depends on the wording; this function is the only one.

    Args:
        record: a record of ``benchmarks/results/`` (:func:`~tmlib.analysis.benchmarking.load_result`): a
            translation run (``translate_*.json``) or ``cpu_recipe.json``.

    Returns:
        dict: the fields found, of these: ``kept_step`` (int: the step whose weights were scored; None where the
        last weights were), ``lowest_val_nll`` (float: ``best_val_nll``, or the value stated in words),
        ``probe_s`` (dict ``{"float32": s, "bf16": s}``: seconds per step of the precision probe) and
        ``compile_warmup_s`` (float: the compiled model's warm-up, compiling included).
    """
    fields: dict = {}
    scored = record.get("weights_scored")
    if scored is not None:
        kept = re.match(r"kept best \(keep_best\): step (\d+)", scored)
        fields["kept_step"] = int(kept.group(1)) if kept else None
        if record.get("best_val_nll") is not None:
            fields["lowest_val_nll"] = record["best_val_nll"]
        elif (low := re.search(r"validation NLL, ([\d.]+)", scored)):
            fields["lowest_val_nll"] = float(low.group(1))
    note = record.get("note", "")
    probe = (re.search(r"probe: float32 ([\d.]+) s, bf16 ([\d.]+) s", note)
             or re.search(r"timed float32 ([\d.]+) s against bf16 autocast ([\d.]+) s", note))
    if probe:
        fields["probe_s"] = {"float32": float(probe.group(1)), "bf16": float(probe.group(2))}
    for speed in record.get("speed", []):
        warmup = re.search(r"warm-up took ([\d.]+) s", speed.get("what", ""))
        if warmup:
            fields["compile_warmup_s"] = float(warmup.group(1))
    return fields


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
             yardstick: tuple[float, float] | None = None) -> str:
    """A run of chapter 9 set beside the course's 15-minute run of the same kind of machine, in two sentences.

    Args:
        history: the run's ``history.json`` (lists ``step``, ``elapsed_s``, ``val_nll`` and ``val_step``).
        machine: the machine its checkpoint describes, or None where the checkpoint does not say.
        dtype: the precision it trained in, ``"float32"`` or ``"bfloat16"``.
        references: the course's 15-minute runs by machine name (``"M1"``, ``"M2"``, ``"M3"``), each a record of
            ``benchmarks/results/`` with ``steps`` and ``best_val_nll``.
        yardstick: the smallest and largest gap in validation cross-entropy between two runs of the same kind (the
            two stand-in runs); if given, a last sentence says whether the run's gap lies within it.

    Returns:
        str: the run's steps, minutes and lowest validation cross-entropy, then either that it is one of the
        ``references`` itself (same steps, same lowest cross-entropy), or how its steps and cross-entropy compare
        with the run of the machine it matches (:func:`course_machine`), or the machine's description.
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
    if yardstick is not None:
        low, high = yardstick
        verdict = (f" That gap is within the gaps between two runs of the same kind ({low:.3f} to {high:.3f}): "
                   "no difference shown." if abs(gap) <= high else
                   f" That gap is larger than the gaps between two runs of the same kind ({low:.3f} to {high:.3f}).")
    return text + (f"It trained in {dtype.replace('bfloat16', 'bf16')} on a machine with the CPU model and instruction "
                   f"sets of {like}: {steps / ref['steps']:.2f} times the {ref['steps']:,} steps of {like}'s "
                   f"15-minute run in the table, and a lowest validation cross-entropy {abs(gap):.4f} "
                   f"{'below' if gap < 0 else 'above'} that run's {ref['best_val_nll']:.4f}.") + verdict
