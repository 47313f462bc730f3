"""What every test shares: the repository's script folders on ``sys.path``, so that tests import the modules of
``tools/`` (the assignments, the grader, the student notebooks), the scripts of ``benchmarks/`` and the Sphinx
extensions of ``_ext/`` by name, as those scripts import each other. (``tests/`` itself is there already: pytest puts
each test file's folder first, so ``toy_data`` and ``browser_checks`` import by name.)"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

for _folder in ("tools", "benchmarks", "_ext"):
    if str(ROOT / _folder) not in sys.path:
        sys.path.insert(0, str(ROOT / _folder))
