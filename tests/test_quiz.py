"""Self-check questions (tmlib.course.quiz): the widget's HTML, the questions on the pages, and (when a site has been
built) the questions in the built HTML."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tmlib.course import quiz as Q

ROOT = Path(__file__).resolve().parent.parent
# where each self-check question lives (notebook or page) -> its quiz names
PLACES = {
    "notebooks/01_attention_by_hand.ipynb": ["nb01-equal-scores"],
    "notebooks/02_multi_head_attention.ipynb": ["nb02-more-heads"],
    "notebooks/03_ffn_residual_layernorm.ipynb": ["nb03-ln-scale"],
    "notebooks/04_positional_encoding.ipynb": ["nb04-order"],
    "notebooks/05_masks_and_decoder.ipynb": ["nb05-cross-mask"],
    "notebooks/06_training_recipe.ipynb": ["nb06-label-smoothing"],
    "notebooks/11_looking_inside.ipynb": ["nb11-merge", "nb11-rows"],
    "notebooks/12_efficiency.ipynb": ["nb12-slope", "nb12-online-state"],
    "book/paper.md": [f"paper-q{i}" for i in range(1, 6)],
}


def test_choice_html_has_the_stable_hooks_and_no_network():
    q = Q.choice("t-one", "Which? <b>", [("A", True, "yes"), ("B", False)], "Because & so.")
    h = q.to_html()
    assert 'class="tm-quiz" id="tm-quiz-t-one" data-kind="choice" data-state="unanswered"' in h
    assert h.count('class="tm-quiz-option"') == 2 and 'data-correct="true"' in h and 'data-correct="false"' in h
    assert '<div class="tm-quiz-explanation" hidden>Because &amp; so.</div>' in h
    assert "Which? &lt;b&gt;" in h  # text is escaped
    assert not re.search(r"https?://|src=", h), "the widget must not load anything"
    assert q._repr_html_() == h


def test_numeric_html_and_validation():
    h = Q.numeric("t-two", "How much?", 0.9, 1e-4, "Explained.").to_html()
    assert 'data-kind="numeric"' in h and 'data-answer="0.9"' in h and 'data-tolerance="0.0001"' in h
    assert 'class="tm-quiz-input"' in h and 'class="tm-quiz-submit"' in h
    with pytest.raises(ValueError, match="name"):
        Q.numeric("Bad Name", "q", 1, 0, "e")
    with pytest.raises(ValueError, match="at least one correct"):
        Q.choice("t-three", "q", [("a", False), ("b", False)], "e")
    with pytest.raises(ValueError, match="finite"):
        Q.numeric("t-four", "q", float("nan"), 0, "e")
    with pytest.raises(ValueError, match="non-empty"):
        Q.numeric("t-five", "q", 1, 0, " ")


def test_numeric_hints_are_rendered_and_checked():
    q = Q.numeric("t-hint", "How many layers?", 4, 0, "Four.", hints=[(25, 'Without "dilation".')])
    h = q.to_html()
    assert 'data-hints="[[25.0, &quot;Without \\&quot;dilation\\&quot;.&quot;]]"' in h, h[:2000]
    assert "data-hints" not in Q.numeric("t-plain", "q", 4, 0, "e").to_html().split("<script>")[0]
    with pytest.raises(ValueError, match="right answer"):
        Q.numeric("t-bad", "q", 4, 0.5, "e", hints=[(4.2, "close")])
    with pytest.raises(ValueError, match="non-empty note"):
        Q.numeric("t-bad", "q", 4, 0, "e", hints=[(25, " ")])
    q5 = next(q for q in Q.PAPER_QUIZ if q.name == "paper-q5")
    assert [v for v, _ in q5.hints] == [25, 24, 3, 3.56, 3.6]  # no dilation (and off by one); too few layers;
    # log₃ 50 unrounded
    assert not any("4" in note for _, note in q5.hints)  # no hint gives the answer


def test_paper_q4_brevity_penalty_accepts_three_decimals_and_hints_the_slips():
    """Q4: BP = e^(1 - r/c) for c = 90, r = 100 is e^(-1/9) = 0.8948...; to three decimals only 0.895 is right, while
    c/r = 0.9, e^(-0.1) = 0.905 (r/c rounded to 1.1), 0.896 (r/c rounded to 1.11), the truncated 0.894, the per cent
    89.5 and a two-decimal 0.89 each get a hint that does not give the answer."""
    import math

    q4 = next(q for q in Q.PAPER_QUIZ if q.name == "paper-q4")
    assert q4.kind == "numeric" and math.isclose(q4.answer, math.exp(-1 / 9)) and "c = 90" in q4.question
    accepted = [v for v in (0.8948, 0.895, 0.894, 0.896, 0.89, 0.9, 0.905) if abs(v - q4.answer) <= q4.tolerance]
    assert accepted == [0.8948, 0.895] and round(q4.answer, 3) == 0.895  # three decimals: only the rounded one
    hinted = {v for v, _ in q4.hints}
    assert {0.9, 0.905, 0.89, 0.894, 0.896, 89.5, 1.0} <= hinted and round(math.exp(-0.1), 3) == 0.905
    assert round(math.exp(1 - 1.11), 3) == 0.896 and 90 / 100 == 0.9  # r/c rounded to 1.11 gives 0.896
    assert not any("0.89" in note or "0.895" in note for _, note in q4.hints)  # no hint gives the answer
    assert [q.title for q in Q.PAPER_QUIZ] == [f"Question {i}" for i in range(1, 6)]  # no "Check yourself" five times


def test_paper_page_holds_exactly_the_generated_block():
    text = (ROOT / "book/paper.md").read_text()
    assert Q.paper_quiz_block() in text, "regenerate with: python -m tmlib.course.quiz paper"
    names = [q.name for q in Q.PAPER_QUIZ]
    assert len(set(names)) == len(names) == 5
    path = next(q for q in Q.PAPER_QUIZ if q.name == "paper-q5")
    # 50 tokens, kernel width 3: 3**3 = 27 < 50 <= 81 = 3**4, so 4 dilated layers (recurrence: 49 steps)
    assert path.answer == 4 and path.tolerance == 0 and 3 ** 3 < 50 <= 3 ** 4
    first_correct = [[ok for _, ok, _ in q.options].index(True) for q in Q.PAPER_QUIZ if q.kind == "choice"]
    assert len(set(first_correct)) > 1, "the right answer sits at the same place in every question"


def _notebook_quiz_ids(path: Path) -> list[str]:
    ids = []
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            html = "".join(out.get("data", {}).get("text/html", ""))
            ids += re.findall(r'class="tm-quiz" id="tm-quiz-([a-z0-9-]+)"', html)
    return ids


def test_committed_notebooks_show_their_questions():
    for rel, names in PLACES.items():
        if rel.endswith(".ipynb"):
            assert _notebook_quiz_ids(ROOT / rel) == names, rel


def _built_pages() -> list[Path]:
    for base in (ROOT / "_build" / "strict" / "_build" / "html", ROOT / "_build" / "html"):
        if (base / "book" / "paper.html").is_file():
            return [base]
    return []


@pytest.mark.skipif(not _built_pages(), reason="no built site (make site-strict or make book builds one)")
def test_built_pages_contain_the_questions():
    base = _built_pages()[0]
    for rel, names in PLACES.items():
        page = base / Path(rel).with_suffix(".html")
        html = page.read_text()
        for name in names:
            assert f'class="tm-quiz" id="tm-quiz-{name}"' in html, (page, name)
        assert html.count("<script>\n(function () {") >= len(names)


_FAKE_DOM = r"""
function element(attrs) {
  var el = {attrs: attrs || {}, hidden: true, textContent: "", handlers: {}};
  el.getAttribute = function (k) { return k in el.attrs ? el.attrs[k] : null; };
  el.setAttribute = function (k, v) { el.attrs[k] = String(v); };
  el.addEventListener = function (kind, fn) { el.handlers[kind] = fn; };
  el.click = function () { el.handlers.click({currentTarget: el}); };
  return el;
}
var feedback = element(), explanation = element(), input = element(), submit = element();
var options = [element({"data-correct": "false"}), element({"data-correct": "true"})];
var root = element(KIND === "choice" ? {"data-kind": "choice"}
                   : {"data-kind": "numeric", "data-answer": "4", "data-tolerance": "0"});
if (KIND === "numeric-hints" || KIND === "numeric-hint-second") {
  root.setAttribute("data-hints", JSON.stringify([[25, "No dilation?"]]));
}
root.querySelector = function (sel) {
  return {".tm-quiz-feedback": feedback, ".tm-quiz-explanation": explanation, ".tm-quiz-input": input,
          ".tm-quiz-submit": submit}[sel];
};
root.querySelectorAll = function () { return options; };
var document = {getElementById: function () { return root; }};
SCRIPT
var seen = [];
function state() { seen.push([root.getAttribute("data-state"), explanation.hidden, feedback.textContent]); }
if (KIND === "choice") { options[0].click(); state(); options[0].click(); state(); }
else if (KIND === "numeric-hints") { input.value = "25"; submit.click(); state(); input.value = "3"; submit.click(); state(); }
else if (KIND === "numeric-hint-second") {
  input.value = "5"; submit.click(); state(); input.value = "25"; submit.click(); state();
  input.value = "6"; submit.click(); state();
}
else { input.value = "3"; submit.click(); state(); input.value = "4"; submit.click(); state(); }
console.log(JSON.stringify(seen));
"""


@pytest.mark.parametrize("kind", ["choice", "numeric"])
def test_the_explanation_waits_for_a_right_answer_or_a_second_try(kind, tmp_path):
    """The explanation gives the answer away: a first wrong try shows only the verdict (and, for a number, not the
    tolerance); a second try, or a right answer, shows the explanation. Runs the widget's script in Node."""
    import json
    import shutil
    import subprocess

    import os

    node = shutil.which("node")
    if node is None:
        assert not os.environ.get("TM_REQUIRE_BROWSER"), "Node.js is required here (.ci/run installs it)"
        pytest.skip("Node.js is not installed: the widget's script cannot run here (.ci/run installs it)")
    script = Q._SCRIPT % {"id": '"tm-quiz-t"'}
    script = script.replace("<script>", "").replace("</script>", "")
    (tmp_path / "quiz.js").write_text(_FAKE_DOM.replace("KIND", json.dumps(kind)).replace("SCRIPT", script))
    seen = json.loads(subprocess.run([node, str(tmp_path / "quiz.js")], capture_output=True, text=True,
                                     check=True).stdout)
    (state1, hidden1, text1), (state2, hidden2, _) = seen
    assert state1 == "wrong" and hidden1 and "Try again" in text1
    assert "off by" not in text1 and "more than" not in text1
    assert not hidden2 and state2 == ("wrong" if kind == "choice" else "correct")


def test_a_numeric_hint_follows_its_wrong_value_only(tmp_path):
    """A wrong value with a hint (Q5's 25, the count without dilation) gets its note after the verdict; another
    wrong value gets the plain verdict."""
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the widget's script cannot run here")
    script = (Q._SCRIPT % {"id": '"tm-quiz-t"'}).replace("<script>", "").replace("</script>", "")
    (tmp_path / "quiz.js").write_text(_FAKE_DOM.replace("KIND", json.dumps("numeric-hints")).replace("SCRIPT", script))
    seen = json.loads(subprocess.run([node, str(tmp_path / "quiz.js")], capture_output=True, text=True,
                                     check=True).stdout)
    (state1, hidden1, text1), (state2, _, text2) = seen
    assert state1 == state2 == "wrong" and hidden1
    assert text1.startswith("Not quite: 25 is not the answer. No dilation?") and "Try again" in text1
    assert "No dilation?" not in text2 and text2.startswith("Not quite: 3 is not the answer.")


def test_a_hint_on_the_second_try_comes_before_the_explanation(tmp_path):
    """A second wrong try that gets a hint of its own (Q5: 5, then 3) shows the hint without the explanation, so that
    the hint can be acted on; the third try shows the explanation."""
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the widget's script cannot run here")
    script = (Q._SCRIPT % {"id": '"tm-quiz-t"'}).replace("<script>", "").replace("</script>", "")
    (tmp_path / "quiz.js").write_text(_FAKE_DOM.replace("KIND", json.dumps("numeric-hint-second"))
                                      .replace("SCRIPT", script))
    seen = json.loads(subprocess.run([node, str(tmp_path / "quiz.js")], capture_output=True, text=True,
                                     check=True).stdout)
    (_, hidden1, _), (_, hidden2, text2), (_, hidden3, _) = seen
    assert hidden1 and hidden2 and not hidden3
    assert "No dilation?" in text2 and "Try again with this hint." in text2


def _gives_away(right: str, question: str, feedback: str) -> str | None:
    """Why a wrong option's feedback would give the right option away, or None: it holds the right option's text,
    four of its words in a row, or a number of it that the question does not state (indices such as "key 2"
    aside)."""
    words = lambda t: re.findall(r"[\w'.^-]+", t.lower())  # noqa: E731
    numbers = lambda t: {float(x) for x in re.findall(r"\d+(?:\.\d+)?", re.sub(r"\bkeys? \d+", "", t))}  # noqa: E731
    if right.lower() in feedback.lower():
        return "the right option's text"
    r, f = words(right), " ".join(words(feedback))
    for i in range(len(r) - 3):
        if " ".join(r[i:i + 4]) in f:
            return f"the right option's words {' '.join(r[i:i + 4])!r}"
    if numbers(right) - numbers(question) & numbers(feedback):
        return f"the right option's number(s) {numbers(right) - numbers(question) & numbers(feedback)}"
    return None


def _stored_choices(path: Path, name: str) -> tuple[str, list[tuple[str, bool, str]]]:
    """The question and (text, correct, feedback) options of a quiz as stored in a notebook's output."""
    import html as H

    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            page = "".join(out.get("data", {}).get("text/html", ""))
            if f'id="tm-quiz-{name}"' in page:
                question = H.unescape(re.search(r'<p class="tm-quiz-question">(.*?)</p>', page).group(1))
                options = re.findall(r'data-correct="(true|false)" data-picked="false" data-feedback="(.*?)">(.*?)'
                                     r'</button>', page)
                return question, [(H.unescape(t), c == "true", H.unescape(f)) for c, f, t in options]
    raise AssertionError(f"{name} not found in {path}")


def test_a_wrong_options_feedback_does_not_give_the_right_option_away():
    """The explanation waits for a second try, so the note on a wrong pick must say why it is wrong without stating
    the right option (paper Q1 and Q3 and chapter 12's second question once did)."""
    quizzes = [(q.name, q.question, list(q.options)) for q in Q.PAPER_QUIZ if q.kind == "choice"]
    quizzes.append(("nb12-online-state",
                    *_stored_choices(ROOT / "notebooks/12_efficiency.ipynb", "nb12-online-state")))
    assert len(quizzes) == 4 and all(len(options) == 4 for _, _, options in quizzes)
    for name, question, options in quizzes:
        right = [text for text, ok, _ in options if ok]
        for text, ok, note in options:
            if not ok:
                for r in right:
                    assert _gives_away(r, question, note) is None, (name, text, _gives_away(r, question, note))
    # the check catches a stated number (chapter 12's old note) and a copied phrase
    assert _gives_away("2.0000, and the output would be wrong", "l = 1.4931", "so l = 1 + 1 = 2.")
    assert _gives_away("each followed by a residual addition", "q", "Each is followed by a residual addition.")
