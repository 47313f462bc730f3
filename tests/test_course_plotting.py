"""Course figures: mask_panels' colour conventions, legend and footnote (chapter 5's Figure 5.3)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tmlib.course import mask_panels  # noqa: E402


def _cell_grey(fig, panel: int, i: int, j: int) -> float:
    """The drawn brightness (0 black, 1 white) of cell (i, j) of a panel."""
    image = fig.axes[panel].get_images()[0]
    return float(np.mean(image.to_rgba(image.get_array())[i, j, :3]))


def test_mask_panels_draws_allowed_dark_by_default_and_blocked_dark_on_request():
    causal = np.tril(np.ones((3, 3), dtype=bool))
    fig = mask_panels([causal], ["causal"])
    assert _cell_grey(fig, 0, 0, 0) < _cell_grey(fig, 0, 0, 2)  # may attend: dark
    assert not fig.legends and "a note" not in [t.get_text() for t in fig.texts]
    plt.close(fig)
    fig = mask_panels([causal], ["causal"], blocked_dark=True, footnote="a note")
    assert _cell_grey(fig, 0, 0, 2) < _cell_grey(fig, 0, 0, 0)  # blocked: dark, as a weight of 0 in viridis
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["may attend", "blocked"]
    assert "a note" in [t.get_text() for t in fig.texts]
    plt.close(fig)


def test_mask_panels_square_cells_puts_the_panel_tops_on_one_line():
    fig = mask_panels([np.ones((5, 5), dtype=bool), np.ones((3, 4), dtype=bool)], ["a", "b"], square_cells=True)
    tops = [ax.get_position().y1 for ax in fig.axes]
    assert tops[0] == pytest.approx(tops[1])
    plt.close(fig)


def test_mask_panels_refuses_a_non_boolean_mask():
    with pytest.raises(TypeError, match="must be boolean"):
        mask_panels([np.ones((2, 2))], ["x"])
