"""Write the hours of the instructors' page's planning table (`book/instructors.md`) by the rule the page states:
the words of the Markdown cells of a chapter's student notebook at 100 words a minute, plus 20 minutes an exercise,
plus 40 minutes for each build-and-debug exercise, rounded to the nearest half hour; the total row and the two
course plans ("about N hours by the table") add them up.

    python tools/instructor_hours.py            # rewrite the column and the sums (tools/student_notebooks.py runs it)
    python tools/instructor_hours.py --check    # write nothing; exit 1 if the page is stale
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "instructors.md"
#: the exercises that build and debug a component (40 minutes more each)
BUILDS = {"ex-07-mha-module", "ex-08-train-step", "ex-08-greedy", "ex-12-causal"}
SHORT_COURSE = 9  # the short course: chapters 1 to 9


def chapter_hours(root: Path = ROOT) -> dict[int, tuple[str, float]]:
    """``{chapter number: (title, hours)}`` for every chapter notebook, by the rule of the module docstring."""
    hours = {}
    for path in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        labels = [x for c in cells if c["cell_type"] == "markdown"
                  for x in re.findall(r"```\{exercise\}[^\n]*\n:label: (ex-[\w-]+)", "".join(c["source"]))]
        student = json.loads((root / "student" / path.name).read_text(encoding="utf-8"))["cells"]
        words = sum(len("".join(c["source"]).split()) for c in student if c["cell_type"] == "markdown")
        minutes = words / 100 + 20 * len(labels) + 40 * len(BUILDS & set(labels))
        title = "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()
        hours[int(path.name[:2])] = (title, round(minutes / 30) / 2)
    return hours


def render(text: str, hours: dict[int, tuple[str, float]]) -> str:
    """``text`` (the page) with the hours column of each chapter's row, the total row and the two plans' sums."""
    lines = text.split("\n")
    for title, h in hours.values():
        for k, line in enumerate(lines):
            if line.startswith(f"| {title} |"):
                parts = line.split("|")
                parts[5] = f" {h:g} "
                lines[k] = "|".join(parts)
    text = "\n".join(lines)
    full = sum(h for _, h in hours.values())
    short = sum(h for n, (_, h) in hours.items() if n <= SHORT_COURSE)
    text = re.sub(r"\*\*about [0-9.]+\*\* \|", f"**about {full:g}** |", text)
    text = re.sub(r"about [0-9.]+ hours by the table\): chapters 1 to 6", f"about {full:g} hours by the table): "
                  "chapters 1 to 6", text)
    return re.sub(r"\(about 9 weeks, about [0-9.]+ hours by the table\)",
                  f"(about 9 weeks, about {short:g} hours by the table)", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is stale")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    new = render(text, chapter_hours())
    if args.check:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)}: the hours are stale (run `python tools/instructor_hours.py`)")
            return 1
        return 0
    if new != text:
        PAGE.write_text(new, encoding="utf-8")
        print(f"{PAGE.relative_to(ROOT)}: hours rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
