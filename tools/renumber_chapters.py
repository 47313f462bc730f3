"""Insert the chapter "Finding the bugs that break Transformers" as chapter 10 and renumber chapters 10-13 to 11-14.

One run, from the repository root, on a clean work tree (``--dry-run`` lists what would change):

1. ``git mv`` the chapter notebooks (and their student copies): ``13_your_model_everywhere`` -> ``14_...``, ...,
   ``10_looking_inside`` -> ``11_looking_inside``, then ``finding_bugs`` -> ``10_finding_bugs``;
2. in every tracked text file (not the measured records under ``benchmarks/results``, not vendored assets), shift
   every reference to chapters 10-13 by one, highest first so that nothing moves twice: notebook names, labels
   (``nb10-``, ``ex-10-``, ``fig-10-`` and the gradebook's ``ex_10_``), "chapter 10" and lists such as "chapters
   9, 10 and 13" or "chapters 11-13", "Figure 10.2", "Exercise 10.1" and the chapters' own titles "# 10. ...";
   then give the new chapter its number (its labels ``bugs-``, ``ex-bugs-``, ``fig-bugs-`` become ``nb10-``,
   ``ex-10-``, ``fig-10-``);
3. the few places that list the chapters by hand (the table of contents, the course map of the welcome page, the
   README's contents, chapter 9's link to the next chapter) get the new chapter.

Afterwards run ``tools/student_notebooks.py`` and ``tools/sync_repository.py`` (the student copies are remade).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD = {10: "looking_inside", 11: "efficiency", 12: "modern_transformer", 13: "your_model_everywhere"}
NEW_STEM, NEW_NUMBER = "finding_bugs", 10
NEW_TITLE = "Finding the bugs that break Transformers"
SKIP = ("benchmarks/results/", "assets/", "book/figures/", "tests/fixtures/")
TEXT = (".py", ".md", ".ipynb", ".yml", ".yaml", ".cfg", ".toml", ".txt", ".html", ".js", ".json", ".tex", ".bib",
        ".css", ".sh", ".in")


def shift(n: int) -> int:
    """The new number of chapter ``n`` (only chapters 10-13 exist to move)."""
    return n + 1 if n in OLD else n


_LIST = r"\d+(?:(?:\s*(?:,|and|or|to|-|–|&)\s*|,\s*and\s+)\d+)*"
CHAPTERS = re.compile(r"(?<![\w-])([Cc]hapters?|[Cc]h\.)(\s+|\u00a0)(" + _LIST + r")(?![\d.]\d)")
NUMBERED = re.compile(r"(?<![\w-])(Figures?|Fig\.|Exercises?|Tables?|Listings?)(\s+|\u00a0)(\d+)\.(\d+)")
SECOND = re.compile(r"(?<=\d\.\d)(\s*(?:,|and|-|–)\s*)(\d+)\.(\d+)")


def _shift_list(text: str) -> str:
    return re.sub(r"\d+", lambda m: str(shift(int(m.group(0)))) if int(m.group(0)) in OLD else m.group(0), text)


def rewrite(text: str, *, new_chapter: bool = False) -> str:
    """``text`` with every reference to chapters 10-13 shifted by one (see the module docstring). ``new_chapter``:
    the new chapter's own notebook, whose figures and exercises already carry its number."""
    for n in sorted(OLD, reverse=True):
        stem = OLD[n]
        text = re.sub(rf"\b{n}_{stem}\b", f"{shift(n)}_{stem}", text)
        for prefix in ("nb", "ex-", "fig-", "ex_", "tab-", "lst-"):
            sep = "_" if prefix == "ex_" else "-"
            text = re.sub(rf"(?<![\w-]){re.escape(prefix)}{n}{sep}", f"{prefix}{shift(n)}{sep}", text)
    text = re.sub(rf"\b{NEW_STEM}\b", f"{NEW_NUMBER:02d}_{NEW_STEM}", text)  # "10_finding_bugs" has no \b inside
    text = CHAPTERS.sub(lambda m: m.group(1) + m.group(2) + _shift_list(m.group(3)), text)
    if not new_chapter:
        def numbered(m):
            return f"{m.group(1)}{m.group(2)}{_shift_list(m.group(3))}.{m.group(4)}"
        text = NUMBERED.sub(numbered, text)
        text = re.sub(r"((?:Figures|Exercises|Tables)\s+\d+\.\d+(?:\s*(?:,|and|-|–)\s*\d+\.\d+)+)",
                      lambda m: SECOND.sub(lambda k: f"{k.group(1)}{_shift_list(k.group(2))}.{k.group(3)}", m.group(1)),
                      text)
    for old, new in (("ex-bugs-", f"ex-{NEW_NUMBER}-"), ("ex_bugs_", f"ex_{NEW_NUMBER}_"),
                     ("fig-bugs-", f"fig-{NEW_NUMBER}-")):
        text = text.replace(old, new)
    text = re.sub(r"(?<![\w-])bugs-(?=[a-z])", f"nb{NEW_NUMBER}-", text)
    return text


def retitle(text: str, n: int) -> str:
    """A renamed chapter notebook's own title, ``# n. ...`` -> ``# n+1. ...`` (its first heading only)."""
    return re.sub(rf'"# {n}\. ', f'"# {shift(n)}. ', text, count=1)


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split("\n")
    return [ROOT / p for p in out if p and (p.endswith(TEXT) or p.rsplit("/", 1)[-1] == "Makefile")
            and not p.startswith(SKIP) and (ROOT / p).is_file()]


def git(*args) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


MAP_ENTRY = ("* - II\n  - {doc}`../notebooks/10_finding_bugs`\n"
             "  - The six tests a Transformer must pass, and what silent bugs do to attention maps and loss curves:\n"
             "    flipped, off-by-one and inverted masks, a softmax over the wrong axis, a missing $\\sqrt{d_k}$, $\\log 0$ in\n"
             "    label smoothing, an unshifted target, unscaled embeddings, dropout at evaluation; nine bugs to fix.\n")
README_ENTRY = ("10. Finding the bugs that break Transformers: causality, padding invariance, references, the first loss and\n"
                "    one batch; what each silent bug does to attention maps and loss curves; nine planted bugs to fix\n")


def by_hand(text: str, rel: str) -> str:
    """The places that list the chapters by hand get the new one (after the chapters were shifted)."""
    new = f"notebooks/{NEW_NUMBER:02d}_{NEW_STEM}"
    if rel == "_toc.yml" and new not in text:
        text = text.replace("      - file: notebooks/09_training_translator\n",
                            f"      - file: notebooks/09_training_translator\n      - file: {new}\n")
    if rel == "book/intro.md" and f"../{new}" not in text:
        anchor = "* - II\n  - {doc}`../notebooks/11_looking_inside`"
        assert anchor in text, "the course map of book/intro.md changed: add the new chapter by hand"
        text = text.replace(anchor, MAP_ENTRY + anchor)
    if rel == "README.md" and NEW_TITLE not in text:
        head, sep, rest = text.partition("## Contents")
        contents, sep2, tail = rest.partition("\n## ")
        contents = re.sub(r"^(1[0-3])\. ", lambda m: f"{shift(int(m.group(1)))}. ", contents, flags=re.M)
        anchor = "\n11. Looking inside"
        assert anchor in contents, "README's contents changed: add the new chapter by hand"
        contents = contents.replace(anchor, "\n" + README_ENTRY.rstrip("\n") + anchor)
        text = head + sep + contents + sep2 + tail
    for path, old, new_text in LITERALS:
        if rel == path:
            if old not in text:
                print(f"WARNING {rel}: {old!r} not found: edit it by hand", file=sys.stderr)
            text = text.replace(old, new_text)
    return text


#: Chapter numbers written as code literals, after the general rewrite: (file, old, new).
LITERALS = [
    ("tests/test_repository.py", 'nb.name[:2] in ("09", "10", "13")', 'nb.name[:2] in ("09", "11", "14")'),
    ("tests/test_student_notebooks.py", 'page_prefix("notebooks/13_modern_transformer") == "12"',
     'page_prefix("notebooks/13_modern_transformer") == "13"'),
    ("notebooks/09_training_translator.ipynb",
     "{doc}`11_looking_inside` opens the trained model and looks at what its attention heads do.",
     "{doc}`10_finding_bugs` shows how to find the silent bugs that break a Transformer like this one, with tests "
     "that run in seconds; {doc}`11_looking_inside` then opens the trained model and looks at what its attention "
     "heads do."),
    ("tests/test_assignments.py", 'GRADED_LATER = {"efficiency", "modern_transformer"}',
     'GRADED_LATER = {"finding_bugs", "efficiency", "modern_transformer"}'),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="list the files that would change, change nothing")
    args = parser.parse_args(argv)
    if not (ROOT / "notebooks" / f"{NEW_STEM}.ipynb").exists():
        print(f"notebooks/{NEW_STEM}.ipynb is not there: already renumbered?", file=sys.stderr)
        return 1
    moves = [(f"{n:02d}_{OLD[n]}", f"{shift(n):02d}_{OLD[n]}") for n in sorted(OLD, reverse=True)]
    moves.append((NEW_STEM, f"{NEW_NUMBER:02d}_{NEW_STEM}"))
    changed = []
    for path in tracked():
        rel = str(path.relative_to(ROOT))
        if rel.startswith("student/"):
            continue  # remade from the chapters
        before = path.read_text(encoding="utf-8")
        after = rewrite(before, new_chapter=rel == f"notebooks/{NEW_STEM}.ipynb")
        for n, stem in OLD.items():
            if rel == f"notebooks/{n:02d}_{stem}.ipynb":
                after = retitle(after, n)
        after = by_hand(after, rel)
        if after != before:
            changed.append(rel)
            if not args.dry_run:
                path.write_text(after, encoding="utf-8")
    for old, new in moves:
        for folder in ("notebooks", "student"):
            if (ROOT / folder / f"{old}.ipynb").exists():
                print(f"git mv {folder}/{old}.ipynb {folder}/{new}.ipynb")
                if not args.dry_run:
                    git("mv", f"{folder}/{old}.ipynb", f"{folder}/{new}.ipynb")
    print(f"{len(changed)} files {'would change' if args.dry_run else 'changed'}:", *changed, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
