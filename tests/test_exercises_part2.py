"""Chapters 7 and 8: the build-it-yourself exercises are marked up for grading (a stub, public checks and hidden
tests), the chapters carry the parts every chapter has, and their student notebooks hold no hidden re-checks."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = {
    "07_numpy_to_pytorch": {"ex-07-mha-module": 4},
    "08_full_model": {"ex-08-train-step": 4, "ex-08-greedy": 4},
}


def _cells(stem: str):
    return nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4).cells


@pytest.mark.parametrize("stem", CHAPTERS)
def test_build_it_yourself_exercises_are_graded(stem):
    cells = _cells(stem)
    for label, points in CHAPTERS[stem].items():
        marks = [c.metadata["assignment"] for c in cells if c.metadata.get("assignment", {}).get("exercise") == label]
        assert any("stub" in m for m in marks), f"{label}: no stub"
        kinds = {m.get("check") for m in marks if "check" in m}
        assert kinds == {"public", "hidden"}, f"{label}: checks {kinds}"
        assert sum(m.get("points", 1) for m in marks if "check" in m) == points, label
        assert any(c.cell_type == "markdown" and f":label: {label}" in c.source for c in cells), label


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_has_its_parts_and_no_hidden_bookkeeping(stem):
    cells = _cells(stem)
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    for part in ("**You will learn**", "## Summary", "## Exercises", "## Next"):
        assert part in text, f"{stem}: no {part!r}"
    hidden = [c.source[:60] for c in cells if c.cell_type == "code"
              and "remove-cell" in c.metadata.get("tags", []) and "assignment" not in c.metadata]
    assert not hidden, f"{stem}: hidden cells that are not exercise checks: {hidden}"


def test_chapter_8_shows_the_encoder_decoder_figure():
    text = "\n".join(c.source for c in _cells("08_full_model") if c.cell_type == "markdown")
    assert "```{figure} ../book/figures/transformer.svg" in text and "Figure 8.1:" in text
    assert (ROOT / "book" / "figures" / "transformer.svg").is_file()
