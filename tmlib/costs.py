"""Cost arithmetic of the Transformer: parameter counts, attention memory, complexity.

Plain Python/NumPy (no torch), so Part I can use it.  Sources: the paper's Table 1
(complexity per layer) and Table 3 (model sizes), and the slides' practice problems.
"""
from __future__ import annotations
