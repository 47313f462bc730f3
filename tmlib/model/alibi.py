"""ALiBi: attention with linear biases (Press, Smith & Lewis 2022, "Train Short, Test Long", §3).

ALiBi adds no position vector at all. Instead, each head h adds to its score between query position i and
key position j a penalty proportional to their distance:

    softmax(q_i K^T / sqrt(d_k) + m_h · [−(i − 0), …, −2, −1, 0])        (ALiBi §3, Figure 3)

The slopes m_h are fixed, not learned: a geometric sequence that starts at 2^(−8/n) and multiplies by that
ratio, for n heads (n = 8: 1/2, 1/4, …, 1/256). For a number of heads that is not a power of two the
paper's code takes the slopes of the closest smaller power of two and fills up with every other slope of
the next one (:func:`alibi_slopes`). Heads with a large slope look mostly at recent tokens, heads with a small
one far back; the authors show that a model trained on short sequences then evaluates well on longer ones
("extrapolation"), which the sinusoids of the paper do poorly.

The paper defines ALiBi for causal language models (keys j ≤ i). For bidirectional attention (an encoder)
this module uses the symmetric penalty ``−m_h·|i − j|``, which equals the paper's on every key a causal
query may see, so one definition serves both.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tmlib.validation import check_int

__all__ = ["alibi_slopes", "ALiBi"]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The head slopes m_h of ALiBi (Press et al. 2022, §3 and their reference code), float64 ``(n_heads,)``.

    For n a power of two: ``m_h = 2^(−8h/n)``, h = 1 … n. Otherwise, with k the largest power of two below n:
    the k slopes for k heads, then the odd-numbered slopes of the 2k-head sequence (m_1, m_3, …) until there
    are n.

    Raises:
        ValueError: ``n_heads`` is not a positive integer.
    """
    check_int(n_heads, "n_heads", minimum=1)

    def geometric(n: int) -> list[float]:  # 2^(-8/n), 2^(-16/n), ...: start 2^(-8/n), ratio 2^(-8/n)
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    k = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(k) + geometric(2 * k)[0::2][: n_heads - k]
    return torch.tensor(slopes, dtype=torch.float64)


class ALiBi(nn.Module):
    """The ALiBi bias of one attention module: ``forward(n_q, n_k, offset, dtype, device)`` → ``−m_h·|i − j|``
    ``(n_heads, n_q, n_k)``, query row r at position ``i = offset + r``, key j at j; float64 by default, float32 work
    for any other dtype. ``slopes`` (``(n_heads,)``, :func:`alibi_slopes`) is a buffer, not in the state dict.

    Raises:
        ValueError: ``n_heads`` not a positive integer.
    """

    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = check_int(n_heads, "n_heads", minimum=1)
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}"

    def forward(self, n_q: int, n_k: int, offset: int = 0, dtype=None, device=None) -> torch.Tensor:
        device = self.slopes.device if device is None else device
        i = torch.arange(offset, offset + n_q, device=device)[:, None]  # (n_q, 1): query positions
        j = torch.arange(n_k, device=device)[None, :]  # (1, n_k): key positions
        work = torch.float64 if dtype in (None, torch.float64) else torch.float32  # no float64 work on a GPU
        distance = (i - j).abs().to(work)  # (n_q, n_k)
        bias = -self.slopes.to(device=device, dtype=work)[:, None, None] * distance  # (n_heads, n_q, n_k)
        return bias if dtype is None else bias.to(dtype)
