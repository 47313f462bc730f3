"""Reading the benchmark records (``benchmarks/results/*.json``, :func:`~tmlib.analysis.benchmarking.load_result`)
for the page "How the numbers in this course were measured" (book/measurements.ipynb): thread counts, repeats and how far repeats spread."""
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
