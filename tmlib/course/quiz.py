"""Self-check questions for the pages: a small HTML + JavaScript widget, with no dependency and nothing loaded
from a network.

A notebook cell returns a :class:`Quiz` (multiple choice or numeric); Jupyter, Colab and the site (myst-nb renders
``text/html`` outputs) show it as a question with buttons or an input box. After each try the widget says whether
the answer is right; the explanation, which gives the answer away, follows a right answer or a second try (a third
try when the second got a hint of its own, so that the hint can be used first).
Everything is in the cell's output: one ``<div>`` with a small ``<style>`` and an inline ``<script>`` that wires up
that div only (ES5, no library, no CDN; MathJax is not needed: write formulas in plain text/Unicode).

Stable hooks for browser tests (documented in CONTRIBUTING.md, "Self-check questions"):

* ``div.tm-quiz#tm-quiz-<name>`` with ``data-kind="choice"`` or ``"numeric"`` and ``data-state`` =
  ``unanswered`` → ``correct`` or ``wrong`` after a try;
* choice: ``button.tm-quiz-option`` (``data-correct="true"`` on the right ones); numeric:
  ``input.tm-quiz-input`` and ``button.tm-quiz-submit``, and ``data-hints`` (a JSON list of ``[value, note]``) when
  some wrong values have a note of their own;
* ``div.tm-quiz-feedback`` (verdict) and ``div.tm-quiz-explanation`` (hidden until a right answer or a second
  try).

Why not ``jupyterquiz``: its JavaScript force-loads MathJax from a CDN when the page's MathJax has not finished
loading (``show_questions.js``), which breaks the offline site, and a quiz written in a notebook would need it
installed in Colab too. This widget is about 60 lines of JavaScript.

The front-matter page ``book/paper.md`` cannot run code, so it embeds the HTML of :data:`PAPER_QUIZ` in a
``{raw} html`` block; ``python -m tmlib.course.quiz paper`` prints that block, and ``tests/test_quiz.py`` checks that
the page holds exactly it.
"""
from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, replace

from tmlib.validation import check_float

__all__ = ["Quiz", "choice", "numeric", "PAPER_QUIZ", "paper_quiz_block"]

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

_STYLE = """<style>
.tm-quiz{border:1px solid #c8c8c8;border-left:4px solid #5a7dbf;border-radius:4px;padding:.6em 1em;margin:1em 0;}
.tm-quiz[data-state=correct]{border-left-color:#2e8540;}
.tm-quiz[data-state=wrong]{border-left-color:#c0392b;}
.tm-quiz-title{font-weight:bold;margin:0 0 .3em 0;}
.tm-quiz-options{display:flex;flex-direction:column;gap:.3em;margin:.5em 0;}
.tm-quiz-option,.tm-quiz-submit{text-align:left;padding:.3em .6em;border:1px solid #aaa;border-radius:3px;
 background:#f7f7f7;cursor:pointer;font:inherit;color:inherit;}
.tm-quiz-option[data-picked=true][data-correct=true]{background:#dff0d8;border-color:#2e8540;}
.tm-quiz-option[data-picked=true][data-correct=false]{background:#f8d7da;border-color:#c0392b;}
.tm-quiz-input{padding:.3em;width:10em;font:inherit;}
.tm-quiz-feedback{font-weight:bold;margin:.4em 0;}
.tm-quiz-explanation{margin:.4em 0;}
</style>"""

# One script per quiz, bound to its own id; idempotent (a re-rendered output does not bind twice).
_SCRIPT = """<script>
(function () {
  var root = document.getElementById(%(id)s);
  if (!root || root.getAttribute("data-ready") === "1") { return; }
  root.setAttribute("data-ready", "1");
  var feedback = root.querySelector(".tm-quiz-feedback");
  var explanation = root.querySelector(".tm-quiz-explanation");
  var tries = 0;
  function show(ok, message, hinted) {
    tries += 1;
    // The explanation gives the answer: after a right answer, a second try, or, when this try got a hint of its
    // own, a third try (so that the hint can be acted on first).
    var reveal = ok || (tries >= 2 && !hinted) || tries >= 3;
    root.setAttribute("data-state", ok ? "correct" : "wrong");
    feedback.textContent = message + (reveal ? "" : hinted ? " Try again with this hint."
                                                 : " Try again: the explanation appears after a second try.");
    feedback.hidden = false;
    if (reveal) { explanation.hidden = false; }
  }
  if (root.getAttribute("data-kind") === "choice") {
    var options = root.querySelectorAll(".tm-quiz-option");
    for (var i = 0; i < options.length; i++) {
      options[i].addEventListener("click", function (event) {
        var button = event.currentTarget;
        button.setAttribute("data-picked", "true");
        var ok = button.getAttribute("data-correct") === "true";
        var note = button.getAttribute("data-feedback") || "";
        show(ok, (ok ? "Correct. " : "Not this one. ") + note);
      });
    }
  } else {
    var input = root.querySelector(".tm-quiz-input");
    var answer = parseFloat(root.getAttribute("data-answer"));
    var tolerance = parseFloat(root.getAttribute("data-tolerance"));
    var hints = JSON.parse(root.getAttribute("data-hints") || "[]");  // [[value, note], ...] for likely slips
    var check = function () {
      var value = parseFloat(String(input.value).replace(",", "."));
      if (isNaN(value)) { feedback.textContent = "Please type a number."; feedback.hidden = false; return; }
      var ok = Math.abs(value - answer) <= tolerance;
      var note = "";
      for (var j = 0; j < hints.length && !ok; j++) {
        if (Math.abs(value - hints[j][0]) <= tolerance) { note = " " + hints[j][1]; break; }
      }
      show(ok, ok ? "Correct." : "Not quite: " + value + " is not the answer." + note, note !== "");
    };
    root.querySelector(".tm-quiz-submit").addEventListener("click", check);
    input.addEventListener("keydown", function (event) { if (event.key === "Enter") { check(); } });
  }
})();
</script>"""


@dataclass(frozen=True)
class Quiz:
    """One self-check question, rendered as HTML by Jupyter (``_repr_html_``) and by the site.

    Build it with :func:`choice` or :func:`numeric`.
    """
    name: str
    kind: str  # "choice" or "numeric"
    question: str
    explanation: str
    options: tuple[tuple[str, bool, str], ...] = ()  # (text, correct, feedback) for "choice"
    answer: float | None = None  # for "numeric"
    tolerance: float | None = None
    hints: tuple[tuple[float, str], ...] = ()  # (wrong value, note) for "numeric": the note shown for that value
    title: str = "Check yourself"

    @property
    def element_id(self) -> str:
        return f"tm-quiz-{self.name}"

    def to_html(self) -> str:
        """The question as one self-contained HTML fragment (style, markup, script)."""
        e = html.escape
        attrs = f'class="tm-quiz" id="{self.element_id}" data-kind="{self.kind}" data-state="unanswered"'
        if self.kind == "numeric":
            attrs += f' data-answer="{self.answer!r}" data-tolerance="{self.tolerance!r}"'
            if self.hints:
                attrs += f' data-hints="{html.escape(json.dumps([list(h) for h in self.hints]))}"'
            body = ('<div class="tm-quiz-answer"><input class="tm-quiz-input" type="text" inputmode="decimal" '
                    f'aria-label="your answer"> <button type="button" class="tm-quiz-submit">Check</button></div>')
        else:
            buttons = "".join(
                f'<button type="button" class="tm-quiz-option" data-correct="{"true" if ok else "false"}" '
                f'data-picked="false" data-feedback="{e(note)}">{e(text)}</button>'
                for text, ok, note in self.options)
            body = f'<div class="tm-quiz-options">{buttons}</div>'
        return (f'{_STYLE}<div {attrs}><p class="tm-quiz-title">{e(self.title)}</p>'
                f'<p class="tm-quiz-question">{e(self.question)}</p>{body}'
                f'<div class="tm-quiz-feedback" role="status" hidden></div>'
                f'<div class="tm-quiz-explanation" hidden>{e(self.explanation)}</div></div>'
                + _SCRIPT % {"id": json.dumps(self.element_id)})

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:  # the plain-text output next to the HTML (e.g. in a terminal)
        return f"Quiz {self.name!r}: {self.question}"


def _check_common(name: str, question: str, explanation: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"quiz name must be lower-case words joined by '-', e.g. 'nb06-label-smoothing'; got {name!r}")
    for label, text in (("question", question), ("explanation", explanation)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"quiz {name!r}: the {label} must be a non-empty string")


def choice(name: str, question: str, options, explanation: str, title: str = "Check yourself") -> Quiz:
    """A multiple-choice question.

    Args:
        name: a unique id on the site (lower-case words joined by ``-``); the element id is ``tm-quiz-<name>``.
        question, explanation: plain text (HTML is escaped); the explanation appears after the first try.
        options: a sequence of ``(text, correct)`` or ``(text, correct, feedback)``; at least two, at least one
            correct. The feedback is shown when that option is picked.

    Raises:
        ValueError: a malformed name, an empty text, fewer than two options or none correct.
    """
    _check_common(name, question, explanation)
    opts = []
    for opt in options:
        if len(opt) not in (2, 3) or not isinstance(opt[1], bool):
            raise ValueError(f"quiz {name!r}: each option is (text, correct: bool[, feedback]), got {opt!r}")
        opts.append((str(opt[0]), opt[1], str(opt[2]) if len(opt) == 3 else ""))
    if len(opts) < 2 or not any(ok for _, ok, _ in opts):
        raise ValueError(f"quiz {name!r}: needs at least two options and at least one correct one")
    return Quiz(name, "choice", question, explanation, options=tuple(opts), title=title)


def numeric(name: str, question: str, answer: float, tolerance: float, explanation: str,
            title: str = "Check yourself", hints=()) -> Quiz:
    """A question whose answer is a number, accepted when ``|typed - answer| <= tolerance``.

    Args:
        answer: the right value; compute it in the cell (with tmlib) rather than typing it.
        tolerance: the accepted absolute error (state it in the question when it matters).
        hints: a sequence of ``(value, note)`` for likely wrong answers: a typed value within ``tolerance`` of
            ``value`` gets its ``note`` after the verdict (a hint that does not give the answer away).

    Raises:
        TypeError: ``answer``, ``tolerance`` or a hint's value is not a number.
        ValueError: a malformed name, an empty text, a non-finite answer, a negative or non-finite tolerance, or a
            hint whose value would be accepted as right or whose note is empty.
    """
    _check_common(name, question, explanation)
    answer = check_float(answer, f"quiz {name!r}: answer")
    tolerance = check_float(tolerance, f"quiz {name!r}: tolerance", minimum=0.0)
    checked = []
    for hint in hints:
        if len(hint) != 2:
            raise ValueError(f"quiz {name!r}: each hint is (value, note), got {hint!r}")
        value = check_float(hint[0], f"quiz {name!r}: hint value")
        if abs(value - answer) <= tolerance:
            raise ValueError(f"quiz {name!r}: the hint for {value!r} would be shown for a right answer")
        if not isinstance(hint[1], str) or not hint[1].strip():
            raise ValueError(f"quiz {name!r}: the hint for {value!r} needs a non-empty note")
        checked.append((value, hint[1]))
    return Quiz(name, "numeric", question, explanation, answer=answer, tolerance=tolerance, hints=tuple(checked),
                title=title)


# The paper page's closing quiz (book/paper.md), after a common tutorial's review questions. Answers follow the
# paper (Vaswani et al., 2017, arXiv:1706.03762); see the errata for the tutorial's claims that do not hold.
#: Q5's answer: the fewest layers L of a width-3 dilated stack with 3^L >= 50 positions in view.
_DILATED_LAYERS = next(n for n in range(1, 64) if 3 ** n >= 50)
#: Q4's answer: BLEU's brevity penalty e^(1 - r/c) for c = 90 translated words against r = 100 reference words.
_BREVITY_PENALTY = math.exp(1 - 100 / 90)

_PAPER_QUESTIONS = (
    choice("paper-q1", "The paper splits d_model = 512 into h = 8 heads of d_k = d_v = 64 and says that the total "
           "cost is about that of one attention over all 512 dimensions. Why?", [
        ("The 8 heads share one set of projection matrices, so the layer learns and applies the weights of one "
         "head only.", False,
         "The heads share no projections: each head i has its own W_i^Q, W_i^K and W_i^V (the paper's §3.2.2), so "
         "the layer applies 8 sets of them, not one."),
        ("Each head attends to an eighth of the positions, so each one computes an eighth of the matrix of "
         "scores.", False,
         "Every head compares every query with every key: each head's matrix of scores is n × n, not an eighth of "
         "it."),
        ("Each head works in 64 dimensions, so the 8 heads' projections and dot products add up to those of one "
         "512-wide head.", True),
        ("The softmax is computed once for all the heads together, and the softmax is what dominates the cost "
         "of attention.", False,
         "Each head computes its own softmax over its own n × n scores: 8 softmaxes, not one."),
    ], "Each head projects to d_k = d_v = 512 / 8 = 64 dimensions. The 8 heads' projections together are as large "
       "as one 512 × 512 projection, and their dot products cost 8 · n² · 64 = n² · 512 multiply-adds, as those of "
       "one head of width 512 do (the paper's §3.2.2). Chapter 2 builds the heads."),
    choice("paper-q2", "What is the main advantage of the Transformer over a recurrent encoder-decoder?", [
        ("Its cost per layer grows only linearly with the sentence length, where a recurrent layer's cost grows "
         "quadratically.", False,
         "Self-attention costs O(n²·d) per layer: quadratic in the length n."),
        ("In training, all positions are processed in parallel, and any two positions are one attention step "
         "apart.", True),
        ("It reaches the same BLEU with far fewer parameters, since attention layers need smaller weight "
         "matrices than LSTMs.", False,
         "The paper makes no such claim: it never compares its parameter counts with those of recurrent models, "
         "and its models are not small (65 million parameters for the base model, 213 million for the big one)."),
        ("It needs no positional information, since attention sees every position of the sentence at once, in "
         "any order.", False, "It needs positional encodings, because attention ignores order."),
    ], "A recurrent layer needs n sequential steps for n tokens; self-attention needs O(1) sequential operations "
       "and connects every pair of positions directly (the paper's Table 1). That made training much faster on "
       "GPUs: the base model trained in 12 hours on 8 P100s."),
    choice("paper-q3", "Which components make up one encoder layer of the paper's Transformer?", [
        ("Self-attention and a feed-forward network, with one residual connection around the pair and one layer "
         "normalisation at the end of the layer.", False,
         "Count the residual arrows and the layer normalisations in Figure P.1's encoder layer: is there only one "
         "of each?"),
        ("Masked self-attention, cross-attention over the encoder's output and a feed-forward network.", False,
         "That is a decoder layer. An encoder layer cannot attend to the encoder's output: that output is what the "
         "encoder is computing. Nor does it need a causal mask: the whole source sentence is given, so every "
         "source position may attend to every other."),
        ("Layer normalisation, then multi-head self-attention, then a residual connection; the same again around "
         "a feed-forward network.", False,
         "Normalising before each sub-layer is the order of later pre-LN models, not the paper's. Look at where "
         "Figure P.1 puts its layer normalisation."),
        ("Self-attention and a feed-forward network, each followed by a residual addition and then layer "
         "normalisation.", True,
         "Two sub-layers, each wrapped as LayerNorm(x + Sublayer(x)): the sub-layer's output is added to its "
         "input, and the sum is normalised."),
    ], "An encoder layer computes LayerNorm(x + SelfAttention(x)), then LayerNorm(x + FFN(x)): the post-LN order "
       "of the paper (Figure P.1). A decoder layer has a third sub-layer, cross-attention over the encoder's "
       "output, and masks its self-attention. Chapters 2, 3 and 5 build each piece."),
    numeric("paper-q4", "The translations of a test set hold c = 90 words in all, their reference translations "
            "r = 100. By what factor does BLEU's brevity penalty multiply the score? Give three decimals.",
            _BREVITY_PENALTY, 0.0006,
            "The translations are shorter than the references (c = 90 ≤ r = 100), so BP = e^(1 − r/c) = "
            "e^(1 − 100/90) = e^(−1/9) ≈ 0.895: the score drops by about a tenth, though the precisions p_n "
            "alone would not notice the 10 missing words. BP is not the ratio c/r = 0.9 itself; with c ≥ r it "
            "would be 1.",
            hints=[(0.9, "That is the length ratio c/r itself. Look again at the formula for BP: what is the "
                         "exponent, and what is raised to it?"),
                   (0.905, "Is r/c = 100/90 exactly 1.1? Keep more digits in the exponent."),
                   (1.105, "A penalty above 1 would reward short translations. Which length goes on top of the "
                           "fraction in the exponent?"),
                   (1.111, "That is r/c itself. BP raises e to a power: which power?"),
                   (1.0, "BP is 1 only when the translations are longer than the references. Is c > r here?"),
                   (0.89, "Close, but give three decimals."),
                   (0.894, "Round the fourth decimal rather than cutting it off."),
                   (0.896, "Is r/c = 100/90 exactly 1.11? Keep more digits in the exponent."),
                   (89.5, "Give BP as a factor, not as a per cent."),
                   (-0.111, "That is the exponent. What is BP, given the exponent?")]),
    numeric("paper-q5", "A stack of causal dilated convolutions with kernel width 3 (dilations 1, 3, 9, ...), "
            "each position reading only itself and earlier positions, reads a sentence of 50 tokens. How many "
            "layers must information from the first token pass through to reach the last one? (A recurrent "
            "layer needs 49 steps; self-attention needs one.)",
            _DILATED_LAYERS, 0, "Each layer of kernel width w multiplies the span a position sees by w: after L "
            "layers it covers w to the power L positions, and 3³ = 27 < 50 ≤ 81 = 3⁴, so 4 layers. This is the "
            "O(log_w n) path of the paper's Table 1, against O(n) for recurrence and O(1) for self-attention; "
            "undilated causal kernels of width 3 would need 25 layers. Short paths make "
            "long-range dependencies easier to learn (§4).",
            hints=[(25, "That is the count for kernels without dilation, each layer reaching 2 positions further "
                        "back. With dilations 1, 3, 9, ..., how far back does each layer reach?"),
                   (24, "Close to the count for kernels without dilation, but the dilations change it. With "
                        "dilations 1, 3, 9, ..., how far back does each layer reach?"),
                   (3, "How many positions do 3 layers cover, the position itself included? Is that enough for a "
                       "sentence of 50 tokens?"),
                   (3.56, "Layers come in whole numbers: how many do you need so that the positions they cover "
                          "reach 50?"),
                   (3.6, "Layers come in whole numbers: how many do you need so that the positions they cover "
                         "reach 50?")]),
)
#: The five questions, each titled with its number (the page's section heading already says "Check yourself").
PAPER_QUIZ = tuple(replace(q, title=f"Question {i}") for i, q in enumerate(_PAPER_QUESTIONS, 1))


def paper_quiz_block() -> str:
    """The ``{raw} html`` block of :data:`PAPER_QUIZ` that ``book/paper.md`` holds (exactly)."""
    return "```{raw} html\n" + "\n".join(q.to_html() for q in PAPER_QUIZ) + "\n```\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["paper"]:
        raise SystemExit("usage: python -m tmlib.course.quiz paper   (prints the block for book/paper.md)")
    sys.stdout.write(paper_quiz_block())
