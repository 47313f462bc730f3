"""The front matter's smaller promises: the errata's folded code prints what the page shows beside it, the paper
page indexes a translation's tokens one way, its quiz's Q5 is about causal kernels, and the installation page names
the interpreter that the Makefile picks."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _code_and_printed(rel: str) -> list[tuple[str, str]]:
    """Each ```python block of a page with the ```text block that follows it ("It prints:")."""
    text = (ROOT / rel).read_text()
    return re.findall(r"```python\n(.*?)```\s*\n\s*It prints:\s*\n\s*```text\n(.*?)```", text, re.S)


@pytest.mark.parametrize("rel", ["book/errata.md", "book/errata/03.md", "book/errata/05.md"])
def test_errata_code_prints_what_the_page_shows(rel):
    blocks = _code_and_printed(rel)
    assert blocks, f"{rel}: no code block followed by its printed output"
    for code, printed in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, rel, "exec"), {"__name__": "__errata__"})
        assert out.getvalue() == printed, (rel, out.getvalue(), printed)


def test_paper_page_indexes_a_translations_tokens_with_j():
    """Beam search and perplexity sum over the tokens of a translation with the same index, j; t is a length or a
    step, as the Notation page's row for t says."""
    paper = (ROOT / "book" / "paper.md").read_text()
    notation = (ROOT / "book" / "notation.md").read_text()
    assert r"\sum_{j=1}^{t} \log p(y_j" in paper and r"\sum_{j=1}^{T+1} \log p(y_j" in paper
    assert "sum_{t=1}" not in paper and "p(y_t" not in paper
    assert "| $t$ |" in notation


def test_quiz_q5_asks_about_causal_kernels_and_its_answer_holds():
    from tmlib.course import quiz as Q

    q5 = next(q for q in Q.PAPER_QUIZ if q.name == "paper-q5")
    assert "causal" in q5.question and "only itself and earlier positions" in q5.question
    n, k = 50, 3

    def span(layers, dilated):  # positions a causal stack of width-k kernels sees, itself included
        return 1 + sum((k - 1) * (k ** i if dilated else 1) for i in range(layers))

    assert q5.answer == next(L for L in range(1, 64) if span(L, True) >= n) == 4
    assert next(L for L in range(1, 64) if span(L, False) >= n) == 25 and "would need 25 layers" in q5.explanation
    assert Q.paper_quiz_block() in (ROOT / "book" / "paper.md").read_text()


def test_installation_names_the_interpreter_make_lab_uses():
    makefile = (ROOT / "Makefile").read_text()
    assert "PYTHON := $(shell command -v python3.11 2>/dev/null || echo python3)" in makefile
    text = " ".join((ROOT / "book" / "installation.md").read_text().split())
    assert "`make lab` uses the command `python3.11` on your `PATH`, and `python3` when there is none" in text
