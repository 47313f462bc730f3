"""Chapters 7 and 8: the build-it-yourself exercises are marked up for grading (a stub, public checks and hidden
tests), the chapters carry the parts every chapter has, and their student notebooks hold no hidden re-checks."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = {
    "07_numpy_to_pytorch": {"ex-07-mha-module": 4},
    "08_full_model": {"ex-08-count": 3, "ex-08-train-step": 4, "ex-08-greedy": 4},
    "12_efficiency": {"ex-12-kv-big": 3, "ex-12-causal": 3, "ex-12-mfu-big": 3},
    "13_modern_transformer": {"ex-13-kv": 3, "ex-13-rmsnorm": 3, "ex-13-gqa": 3},
    "14_your_model_everywhere": {"ex-14-names": 3},
}
MIN_MISTAKES = 3  # typical mistakes per build-it of these chapters (issue 24), besides "calls the library's own version"


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
              and "remove-cell" in c.metadata.get("tags", []) and "assignment" not in c.metadata
              and "smoke-only" not in c.metadata.get("tags", [])]  # the quick test mode's cells (TMLIB_SMOKE=1)
    assert not hidden, f"{stem}: hidden cells that are not exercise checks: {hidden}"


def test_chapter_8_shows_the_encoder_decoder_figure():
    text = "\n".join(c.source for c in _cells("08_full_model") if c.cell_type == "markdown")
    assert "```{figure} ../book/figures/transformer.svg" in text and "Figure 8.1:" in text
    assert (ROOT / "book" / "figures" / "transformer.svg").is_file()


@pytest.mark.parametrize("stem", CHAPTERS)
def test_build_its_have_typical_mistakes_and_forbid_the_library(stem):
    """Each build-it (a function or class to write) keeps at least three typical mistakes as code, and names the
    library's versions it may not call; its public check tells the student (check_own_work)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import exercise_mistakes as M

    cells = _cells(stem)
    for cell in cells:
        mark = cell.metadata.get("assignment", {})
        if "stub" not in mark or not re.search(r"^(def|class) \w+", mark["stub"], re.M):
            continue
        label = mark["exercise"]
        assert len(M.MISTAKES.get(label, [])) >= MIN_MISTAKES, f"{label}: fewer than {MIN_MISTAKES} typical mistakes"
        if label != "ex-13-kv":  # the library has no function of its own for this one (the check measures caches)
            assert mark.get("forbid"), f"{label}: no forbid markup"
            public = [c.source for c in cells if c.metadata.get("assignment", {}).get("exercise") == label
                      and c.metadata["assignment"].get("check") == "public"]
            assert any("check_own_work(" in src for src in public), f"{label}: the public check does not call check_own_work"


def test_chapter_11_explains_log_log_axes_and_shows_compile_and_bf16():
    text = "\n".join(c.source for c in _cells("12_efficiency"))
    assert "log-log axes" in text and "slope is the exponent" in text
    assert "torch.compile" in text and "bf16" in text and "median" in text


def test_chapter_13_shows_the_onnx_export():
    code = "\n".join(c.source for c in _cells("14_your_model_everywhere") if c.cell_type == "code")
    assert "export_onnx(model" in code and "OnnxTranslator(" in code
