"""Draw the course's diagrams as SVG: the encoder-decoder (the paper's Figure 1) and multi-head attention (its
Figure 2), each part labelled with the chapter that builds it, and the tensor layout of splitting and merging the
heads (chapter 7).

    python tools/draw_figures.py               # writes every figure into book/figures/
    python tools/draw_figures.py head_layout   # writes only book/figures/head_layout.svg (any of the names below)

The drawings are the course's own (boxes and arrows written here), not copies of the paper's figures.
"""
from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "book" / "figures"
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
MONO = "font-family='DejaVu Sans Mono, Menlo, Consolas, monospace'"  # code, as the pages set it
# Font sizes as drawn: the pages show the diagrams at the column's width (about 700 px at a 1280 px window), so
# no label is set below 12 px of the drawing.
LEGIBLE = {9: 11, 10: 12, 11: 12.5, 12: 13.5, 13: 14.5}
COLOURS = {"attn": "#f9d9a6", "ffn": "#b9dcf2", "norm": "#f4f1bb", "embed": "#f6c3c3", "out": "#d7c8ee",
           "plain": "#ffffff"}


def sub(base: str, script: str, size: float = 11) -> str:
    """A symbol with a subscript as the pages write it in LaTeX: d_k gives italic d and k, d_model an upright
    "model" (a name, as in $d_{\\text{model}}$)."""
    style = "italic" if len(script) == 1 else "normal"
    return (f"<tspan font-style='italic'>{base}</tspan>"
            f"<tspan baseline-shift='sub' font-size='{size}' font-style='{style}'>{script}</tspan>")


class Canvas:
    """A minimal SVG writer: rounded boxes with a title and a chapter label, arrows, frames and text."""

    def __init__(self, width: int, height: int, title: str):
        self.width, self.height = width, height
        self.items = [f"<title>{title}</title>",
                      "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
                      "markerHeight='7' orient='auto-start-reverse'><path d='M 0 0 L 10 5 L 0 10 z' fill='#333'/>"
                      "</marker></defs>",
                      f"<rect width='{width}' height='{height}' fill='white'/>"]

    def box(self, x, y, w, h, text, chapter=None, kind="plain"):
        self.items.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='6' fill='{COLOURS[kind]}' "
                          f"stroke='#333' stroke-width='1.2'/>")
        ty = y + h / 2 + (0 if chapter is None else -5)
        self.text(x + w / 2, ty + 5, text, size=13)
        if chapter is not None:
            self.text(x + w / 2, y + h - 6, chapter, size=13, colour="#555", italic=True)  # ~11 px on the page

    def text(self, x, y, s, size=12, colour="#111", anchor="middle", italic=False, bold=False, mono=False):
        size = LEGIBLE.get(size, size)
        style = (" font-style='italic'" if italic else "") + (" font-weight='bold'" if bold else "")
        self.items.append(f"<text x='{x}' y='{y}' {MONO if mono else FONT} font-size='{size}' fill='{colour}' "
                          f"text-anchor='{anchor}'{style}>{s}</text>")

    def arrow(self, *points):
        d = " ".join(f"{'M' if i == 0 else 'L'} {x} {y}" for i, (x, y) in enumerate(points))
        self.items.append(f"<path d='{d}' fill='none' stroke='#333' stroke-width='1.4' marker-end='url(#arrow)'/>")

    def arrows_up(self, x, spans):
        """Vertical arrows at ``x``, one per ``(from_y, to_y)`` span: the flow between stacked boxes."""
        for y0, y1 in spans:
            self.arrow((x, y0), (x, y1))

    def residual(self, x_main, y_from, x_lane, y_to, x_edge):
        """A residual (skip) connection: it branches off the main flow at ``(x_main, y_from)``, below a
        sub-layer, runs up a lane at ``x_lane`` past the sub-layer, and enters the side of the Add & LayerNorm
        box above it at ``(x_edge, y_to)``."""
        self.items.append(f"<circle cx='{x_main}' cy='{y_from}' r='3' fill='#333'/>")
        self.arrow((x_main, y_from), (x_lane, y_from), (x_lane, y_to), (x_edge, y_to))

    def frame(self, x, y, w, h, label):
        self.items.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='10' fill='#f4f4f4' "
                          f"stroke='#888' stroke-dasharray='5 3'/>")
        self.text(x + w + 8, y + h / 2, label, size=14, anchor="start", bold=True)

    def svg(self) -> str:
        body = "\n".join(self.items)
        return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{self.width}' height='{self.height}' "
                f"viewBox='0 0 {self.width} {self.height}'>\n{body}\n</svg>\n")


def transformer() -> str:
    """The encoder-decoder of §3.1 (the paper's Figure 1), bottom to top."""
    c = Canvas(850, 760, "The Transformer: encoder (left) and decoder (right)")
    bw, bh = 220, 40
    ex, dx = 120, 490  # left edges of the encoder and decoder columns
    # inputs and embeddings
    c.text(ex + bw / 2, 745, "source tokens (German)", size=12)
    c.text(dx + bw / 2, 745, "target tokens, shifted right", size=12)
    c.box(ex, 670, bw, bh + 6, f"Embedding × √{sub('d', 'model')}", "chapter 8", "embed")
    c.box(dx, 670, bw, bh + 6, f"Embedding × √{sub('d', 'model')}", "chapter 8", "embed")
    for x, side in ((ex, -1), (dx, 1)):
        cx = x + bw / 2
        c.arrow((cx, 732), (cx, 718))
        c.arrow((cx, 670), (cx, 638))  # into the sum
        c.items.append(f"<circle cx='{cx}' cy='{628}' r='10' fill='white' stroke='#333' stroke-width='1.2'/>")
        c.text(cx, 633, "+", size=16)
        px = cx + side * 30 if side > 0 else cx - 30 - 150
        c.box(px, 610, 150, 36, "positional encoding", None, "embed")
        c.text(px + 75, 660, "chapter 4", size=13, colour="#555", italic=True)
        c.arrow((px if side > 0 else px + 150, 628), (cx + side * 10, 628))
        c.arrow((cx, 618), (cx, 594))
    # encoder layer
    c.frame(ex - 20, 290, bw + 40, 300, "")
    c.text(ex - 30, 445, "N ×", size=15, anchor="end", bold=True)
    c.box(ex, 520, bw, bh + 6, "Multi-head self-attention", "chapters 1, 2, 7", "attn")
    c.box(ex, 470, bw, 36, "Add &amp; LayerNorm", None, "norm")
    c.box(ex, 380, bw, bh + 6, "Feed-forward network", "chapter 3", "ffn")
    c.box(ex, 330, bw, 36, "Add &amp; LayerNorm", None, "norm")
    c.text(ex + bw / 2, 308, "encoder layer · chapters 3, 5, 8", size=11, colour="#555", italic=True)
    c.arrows_up(ex + bw / 2, ((594, 566), (520, 506), (470, 426), (380, 366)))
    # residual connections: each branches off below a sub-layer and joins the sum in the Add & LayerNorm above it
    c.residual(ex + bw / 2, 580, ex - 12, 488, ex)  # around self-attention
    c.residual(ex + bw / 2, 450, ex - 12, 348, ex)  # around the FFN
    c.text(ex - 26, 536, "residual", size=10, colour="#555", anchor="end", italic=True)
    # decoder layer
    c.frame(dx - 20, 140, bw + 40, 450, "")
    c.text(dx + bw + 30, 370, "× N", size=15, anchor="start", bold=True)
    c.box(dx, 520, bw, bh + 6, "Masked multi-head self-attn.", "chapter 5", "attn")
    c.box(dx, 470, bw, 36, "Add &amp; LayerNorm", None, "norm")
    c.box(dx, 380, bw, bh + 6, "Cross-attention", "chapter 5", "attn")
    c.box(dx, 330, bw, 36, "Add &amp; LayerNorm", None, "norm")
    c.box(dx, 240, bw, bh + 6, "Feed-forward network", "chapter 3", "ffn")
    c.box(dx, 190, bw, 36, "Add &amp; LayerNorm", None, "norm")
    c.text(dx + bw / 2, 160, "decoder layer · chapters 5, 8", size=11, colour="#555", italic=True)
    c.arrows_up(dx + bw / 2, ((594, 566), (520, 506), (470, 426), (380, 366), (330, 286), (240, 226)))
    for y_from, y_to in ((580, 488), (450, 348), (310, 208)):  # around the three sub-layers
        c.residual(dx + bw / 2, y_from, dx + bw + 12, y_to, dx + bw)
    c.text(dx + bw + 26, 536, "residual", size=10, colour="#555", anchor="start", italic=True)
    # memory: the encoder's output feeds every decoder layer's cross-attention (keys and values)
    mx = (ex + bw + dx) / 2  # the memory's path runs between the two columns
    c.arrow((ex + bw / 2, 330), (ex + bw / 2, 270), (mx, 270), (mx, 403), (dx, 403))
    c.text((ex + bw / 2 + mx) / 2, 262, "memory", size=11, colour="#555", italic=True)
    c.text(mx, 420, "keys, values", size=10, colour="#555", italic=True)
    # output
    c.box(dx, 80, bw, bh + 6, "Linear + softmax (tied)", "chapter 8", "out")
    c.arrow((dx + bw / 2, 140), (dx + bw / 2, 126))
    c.arrow((dx + bw / 2, 80), (dx + bw / 2, 52))
    c.text(dx + bw / 2, 42, "next-token probabilities (English)", size=12)
    c.text(ex + bw / 2, 100, "trained with the recipe of chapter 6,", size=11, colour="#555", italic=True)
    c.text(ex + bw / 2, 116, "on Multi30k in chapter 9; decoded by", size=11, colour="#555", italic=True)
    c.text(ex + bw / 2, 132, "greedy and beam search (chapter 9)", size=11, colour="#555", italic=True)
    return c.svg()


def _scaled_dot_product(c: Canvas, x: int, title: str, w: int = 200) -> None:
    """Equation 1 of the paper, bottom to top, in the column from ``x`` to ``x + w`` (and V's lane right of it)."""
    c.text(x + w / 2, 18, title, size=13, bold=True)
    c.box(x, 340, w, 34, "MatMul  Q K<tspan baseline-shift='super' font-size='11'>T</tspan>", None, "attn")
    c.box(x, 286, w, 34, f"Scale  ÷ √{sub('d', 'k')}", None, "plain")
    c.box(x, 232, w, 34, "Mask (optional)", None, "plain")
    c.box(x, 178, w, 34, "Softmax over keys", None, "attn")
    c.box(x, 90, w, 34, "MatMul  with V", None, "attn")
    c.arrows_up(x + w / 2, ((340, 320), (286, 266), (232, 212), (178, 124)))
    c.text(x + w / 2 - 50, 408, "Q", size=14, bold=True)
    c.text(x + w / 2 + 50, 408, "K", size=14, bold=True)
    c.text(x + w + 30, 408, "V", size=14, bold=True)
    c.arrow((x + w / 2 - 50, 394), (x + w / 2 - 50, 374))
    c.arrow((x + w / 2 + 50, 394), (x + w / 2 + 50, 374))
    c.arrow((x + w + 30, 394), (x + w + 30, 107), (x + w, 107))
    c.arrow((x + w / 2, 90), (x + w / 2, 50))
    c.text(x + w / 2 + 8, 48, "output", size=12, anchor="start")


def scaled_dot_product_attention() -> str:
    """Scaled dot-product attention of §3.2.1 alone (chapter 1): the left half of :func:`multi_head_attention`."""
    c = Canvas(330, 430, "Scaled dot-product attention")
    _scaled_dot_product(c, 45, "Scaled dot-product attention")
    return c.svg()


def multi_head_attention() -> str:
    """Multi-head attention of §3.2.2 (right) built from scaled dot-product attention of §3.2.1 (left)."""
    c = Canvas(790, 430, "Scaled dot-product attention (left) and multi-head attention (right)")
    _scaled_dot_product(c, 85, "Scaled dot-product attention · chapter 1")  # left: equation 1, bottom to top
    # right: multi-head; one head's column (its projections and its attention) drawn in front of two shadowed
    # copies, as the paper's Figure 2 stacks its h layers
    rx = 450
    c.text(rx + 140, 18, "Multi-head attention · chapters 2, 7", size=13, bold=True)
    for off in (16, 8):  # the copies behind: heads 2 to h
        c.items.append(f"<rect x='{rx - 10 + off}' y='{198 - off}' width='300' height='182' rx='10' fill='#e4e4e4' "
                       "stroke='#888' stroke-dasharray='5 3'/>")
    c.items.append(f"<rect x='{rx - 10}' y='198' width='300' height='182' rx='10' fill='#f4f4f4' stroke='#888' "
                   "stroke-dasharray='5 3'/>")
    c.text(rx + 306, 176, "× h heads", size=12, anchor="end", italic=True)
    # the unprojected inputs X_q, X_k, X_v (the paper's Q, K, V); the course keeps Q, K, V for the projections
    for i, name in enumerate(("Q", "K", "V")):
        bx = rx + i * 100
        c.text(bx + 40, 408, f"X<tspan baseline-shift='sub' font-size='11'>{name.lower()}</tspan>", size=14,
               bold=True)
        c.box(bx, 330, 80, 40, f"Linear W<tspan baseline-shift='super' font-size='11'>{name}</tspan>"
              "<tspan baseline-shift='sub' font-size='11' font-style='italic'>i</tspan>", None, "plain")
        c.arrow((bx + 40, 394), (bx + 40, 370))
        c.arrow((bx + 40, 330), (bx + 40, 262))
    c.box(rx, 208, 280, 54, "Scaled dot-product attention",
          f"head<tspan baseline-shift='sub' font-size='10' font-style='italic'>i</tspan>, of width {sub('d', 'k', 10)}"
          f" (paper: {sub('d', 'model', 10)} / h)", "attn")  # the label is italic
    c.box(rx + 40, 132, 200, 34, "Concat(head<tspan baseline-shift='sub' font-size='11'>1</tspan>, …, "
          "head<tspan baseline-shift='sub' font-size='11' font-style='italic'>h</tspan>)", None, "plain")
    c.box(rx + 60, 76, 160, 34, "Linear W<tspan baseline-shift='super' font-size='11'>O</tspan>", None, "plain")
    c.arrow((rx + 140, 198), (rx + 140, 166))
    c.arrow((rx + 140, 132), (rx + 140, 110))
    c.arrow((rx + 140, 76), (rx + 140, 50))
    c.text(rx + 148, 48, "output", size=12, anchor="start")
    return c.svg()


HEAD_COLOURS = (COLOURS["attn"], COLOURS["ffn"])  # head 1, head 2
CELL_W, CELL_H = 40, 26
Q_EXAMPLE = ((2, 2, 3, 2), (1, 2, 2, 1), (3, 1, 2, 3))  # chapter 7's projected queries Q W^Q, (seq_len, d_model)


def _cell(c: Canvas, x, y, head, value=None, w=CELL_W, h=CELL_H):
    c.items.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' fill='{HEAD_COLOURS[head]}' stroke='#333' "
                   f"stroke-width='1'/>")
    if value is not None:
        c.text(x + w / 2, y + h / 2 + 5, value, size=12)


def _token_grid(c: Canvas, x, y, values, labels_at):
    """(seq_len, d_model): a row per token, the heads' columns coloured; token labels on the side ``labels_at``."""
    for i in range(3):
        for j in range(4):
            _cell(c, x + j * CELL_W, y + i * CELL_H, j // 2, None if values is None else values[i][j])
        lx, anchor = (x - 8, "end") if labels_at == "left" else (x + 4 * CELL_W + 8, "start")
        c.text(lx, y + i * CELL_H + CELL_H / 2 + 5, f"token {i + 1}", size=10, colour="#555", anchor=anchor)


def _token_blocks(c: Canvas, x, y, values, w=30, gap=10):
    """(seq_len, n_heads, d_k): an (n_heads, d_k) block per token, a row per head, the token named below."""
    for t in range(3):
        bx = x + t * (2 * w + gap)
        for head in range(2):
            for j in range(2):
                _cell(c, bx + j * w, y + head * CELL_H, head, None if values is None else values[t][2 * head + j],
                      w=w)
        c.text(bx + w, y + 2 * CELL_H + 17, f"token {t + 1}", size=10, colour="#555")


def _head_matrices(c: Canvas, x, y, gap, values, labels_at):
    """(n_heads, seq_len, d_k): a (seq_len, d_k) matrix per head, side by side, a row per token."""
    for head in range(2):
        for i in range(3):
            for j in range(2):
                _cell(c, x + head * (2 * CELL_W + gap) + j * CELL_W, y + i * CELL_H, head,
                      None if values is None else values[i][2 * head + j])
    for i in range(3):
        lx, anchor = (x - 8, "end") if labels_at == "left" else (x + 4 * CELL_W + gap + 8, "start")
        c.text(lx, y + i * CELL_H + CELL_H / 2 + 5, f"token {i + 1}", size=10, colour="#555", anchor=anchor)


def _bracket(c: Canvas, x0, x1, y, label, below=True, colour="#555", dashed=False):
    """A bracket over ``x0..x1`` at ``y``, its ticks pointing at the cells (up when below them), with a label."""
    tick = -6 if below else 6
    dash = " stroke-dasharray='4 3'" if dashed else ""
    c.items.append(f"<path d='M {x0 + 2} {y + tick} L {x0 + 2} {y} L {x1 - 2} {y} L {x1 - 2} {y + tick}' "
                   f"fill='none' stroke='{colour}' stroke-width='1.4'{dash}/>")
    c.text((x0 + x1) / 2, y + (17 if below else -7), label, size=10, colour=colour)


def head_layout() -> str:
    """Chapter 7's split and merge of the heads on its two-head example (batch 1, seq_len 3, d_model 4, h 2):
    the shapes at each step, and the order in which the numbers lie in memory."""
    width, mid = 730, 365
    c = Canvas(width, 618, "Splitting and merging the heads: the shapes, and the order of the numbers in memory")
    gap = 12
    lc, rc = 148, 582  # centres of the split (left) and merge (right) columns
    rows = (44, 166, 288)  # top of the three levels: (b, s, d_model), (b, s, h, d_k), (b, h, s, d_k)
    c.text(lc, 24, "split the heads (step 2)", size=13, bold=True)
    c.text(rc, 24, "merge the heads (step 4)", size=13, bold=True)
    for head, (x, name) in enumerate(((mid - 58, "head 1"), (mid + 8, "head 2"))):  # the legend
        _cell(c, x, 11, head, w=16, h=16)
        c.text(x + 21, 24, name, size=10, anchor="start")
    blocks_w = 3 * 60 + 2 * 10
    for centre, values, side in ((lc, Q_EXAMPLE, "left"), (rc, None, "right")):
        _token_grid(c, centre - 2 * CELL_W, rows[0], values, side)
        _token_blocks(c, centre - blocks_w / 2, rows[1] + 6, values)
        _head_matrices(c, centre - 2 * CELL_W - gap / 2, rows[2], gap, values, side)
    # the middle column: each level's shape, the same on both sides
    shapes = (("q, and Concat(head 1, head 2)", "(batch, seq_len, d_model)", "= (1, 3, 4)"),
              ("an (n_heads, d_k) block per token", "(batch, seq_len, n_heads, d_k)", "= (1, 3, 2, 2)"),
              ("qh, and heads: a matrix per head", "(batch, n_heads, seq_len, d_k)", "= (1, 2, 3, 2)"))
    for top, (name, axes, sizes) in zip(rows, shapes):
        y = top + 3 * CELL_H / 2
        c.text(mid, y - 16, name, size=10, colour="#555", italic=True)
        c.text(mid, y + 2, axes, size=10, mono=True)
        c.text(mid, y + 19, sizes, size=10, mono=True)
    # split: down the left column; merge: up the right column; the operations face the middle
    for top, op in ((rows[0], ".view(1, 3, 2, 2)"), (rows[1], ".transpose(1, 2)")):
        y0, y1 = top + 3 * CELL_H + 6, top + 122 - 6
        c.arrow((lc, y0), (lc, y1))
        c.text(lc + 8, (y0 + y1) / 2 + 5, op, size=11, mono=True, anchor="start")
    for top, op in ((rows[0], ".reshape(1, 3, 4)"), (rows[1], ".transpose(1, 2)")):
        y0, y1 = top + 122 - 6, top + 3 * CELL_H + 6
        c.arrow((rc, y0), (rc, y1))
        c.text(rc - 8, (y0 + y1) / 2 + 5, op, size=11, mono=True, anchor="end")
    bottom = rows[2] + 3 * CELL_H
    c.arrow((lc, bottom + 6), (lc, bottom + 30), (rc, bottom + 30), (rc, bottom + 6))
    c.text(mid, bottom + 24, "step 3: attention in each head", size=11)
    # memory: the numbers of q token by token; heads, head by head (what a view without the transpose reads is
    # left to exercise 7.2)
    x0 = mid - 6 * CELL_W
    c.text(10, 450, "In memory (row-major order)", size=13, bold=True, anchor="start")
    y = 490
    c.text(x0 - 12, y + 18, "q", size=12, mono=True, anchor="end")
    for k in range(12):
        _cell(c, x0 + k * CELL_W, y, (k % 4) // 2, Q_EXAMPLE[k // 4][k % 4])
    for t in range(3):
        _bracket(c, x0 + 4 * t * CELL_W, x0 + 4 * (t + 1) * CELL_W, y + CELL_H + 8, f"token {t + 1}")
    y = 556
    c.text(x0 - 12, y + 18, "heads", size=12, mono=True, anchor="end")
    for k in range(12):
        _cell(c, x0 + k * CELL_W, y, k // 6)
    for p in range(6):
        _bracket(c, x0 + 2 * p * CELL_W, x0 + 2 * (p + 1) * CELL_W, y + CELL_H + 8, f"token {p % 3 + 1}")
    return c.svg()


FIGURES = {"transformer": transformer, "scaled_dot_product_attention": scaled_dot_product_attention,
           "multi_head_attention": multi_head_attention, "head_layout": head_layout}


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(FIGURES))
    if unknown:
        raise SystemExit(f"unknown figure(s) {unknown}; choose from {sorted(FIGURES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or FIGURES:
        (OUT / f"{name}.svg").write_text(FIGURES[name]())
        print(f"wrote {OUT / f'{name}.svg'}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
