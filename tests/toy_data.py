"""The toy translation task shared by the training and distributed tests (imported as ``toy_data``: pytest puts
``tests/`` on ``sys.path``, as for ``browser_checks``)."""
import numpy as np


def toy_examples(n: int = 120, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Reverse-a-sequence task over ids 4..19 with varied lengths 2..8 (so that batches differ in size).

    Returns:
        ``n`` pairs ``(src_ids, tgt_ids)`` with ``tgt_ids = src_ids[::-1]``.
    """
    rng = np.random.default_rng(seed)
    ex = []
    for _ in range(n):
        s = rng.integers(4, 20, rng.integers(2, 9)).tolist()
        ex.append((s, s[::-1]))
    return ex
