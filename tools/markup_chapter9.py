"""One-off, for the lead: add the assignment markup (CONTRIBUTING.md, "Assignments") to notebook 9's exercises.

    python tools/markup_chapter9.py notebooks/09_training_translator.ipynb

Finds each exercise's first solution code cell by its label (the code cell after ```{solution-start} LABEL```),
gives it a stub, and inserts a public check and a hidden test (cells tagged `remove-cell`) after it. Re-execute
the notebook afterwards; then `python tools/assignments.py build notebooks/09_training_translator.ipynb`.
Tested on the notebook of commit a76af29 in smoke mode (TMLIB_SMOKE=1): every check passes. Delete this file
once the markup is in. Grading chapter 9 executes the whole notebook: run `TMLIB_SMOKE=1 make grade ...` or keep
runs/multi30k/checkpoint.pt next to the grader, or grading trains for 15 minutes per submission.
"""
import sys

import nbformat


def _solution_code_id(nb, label):
    start = next(i for i, c in enumerate(nb.cells)
                 if c.cell_type == "markdown" and f"{{solution-start}} {label}" in c.source)
    return next(c["id"] for c in nb.cells[start + 1:] if c.cell_type == "code")


def mark(nb, label_or_id, ex, stub=None, source=None):
    cid = _solution_code_id(nb, ex)
    c = next(c for c in nb.cells if c.get("id") == cid)
    if source is not None:
        c.source = source
    c.metadata["assignment"] = {"exercise": ex, "stub": stub}

def checks(nb, after, ex, items):
    after = _solution_code_id(nb, ex)
    i = next(i for i, c in enumerate(nb.cells) if c.get("id") == after)
    for n, (kind, code) in enumerate(items, start=1):
        c = nbformat.v4.new_code_cell(code)
        c["id"] = f"chk-{ex[3:]}-{kind[0]}{n}"
        c.metadata["tags"] = ["remove-cell"]
        c.metadata["assignment"] = {"exercise": ex, "check": kind, "points": 1}
        nb.cells.insert(i + n, c)

path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
mark(nb, "a7ec667f", "ex-09-peak",
     "peak = ...    # the peak learning rate: d_model 256, 200 warm-up steps, factor 0.3, by hand\n"
     "at_800 = ...  # the learning rate at step 800")
checks(nb, "a7ec667f", "ex-09-peak", [
    ("public", "# Check against the library (4 significant digits are enough)\n"
               "print(check_close(peak, R.noam_lr(200, 256, 200, 0.3), \"peak\", rtol=5e-4, atol=0))\n"
               "print(check_close(at_800, R.noam_lr(800, 256, 200, 0.3), \"lr at step 800\", rtol=5e-4, atol=0))"),
    ("hidden", "check_close([peak, at_800], [0.3 / (16 * 200**0.5), 0.3 / (16 * 800**0.5)], \"learning rates\", rtol=5e-4, atol=0)"),
])
mark(nb, "7c023c03", "ex-09-floor",
     "floor = ...  # the smallest smoothed loss in nats per token (V = tokenizer.vocab_size, eps = 0.1)")
checks(nb, "7c023c03", "ex-09-floor", [
    ("public", "# Check against translation_loss on logits equal to the log of the target distribution\n"
               "V_, eps_ = tokenizer.vocab_size, 0.1\n"
               "q_ = torch.full((1, 1, V_), eps_ / V_, dtype=torch.float64)\n"
               "q_[0, 0, 5] = 1 - eps_ + eps_ / V_\n"
               "print(check_close(floor, float(translation_loss(q_.log(), torch.tensor([[5]]), pad_id=0, label_smoothing=eps_)), "
               "\"loss floor\", decimals=3))"),
    ("hidden", "V_ = tokenizer.vocab_size\n"
               "pt_, po_ = 0.9 + 0.1 / V_, 0.1 / V_\n"
               "check_close(floor, -(pt_ * np.log(pt_) + (V_ - 1) * po_ * np.log(po_)), \"loss floor (entropy)\", decimals=3)"),
])
mark(nb, "6a44c73e", "ex-09-bucket",
     "padding = ...  # dict: chunk_size -> padding fraction of token_batches(lengths, RECOMMENDED.max_tokens, seed=0,\n"
     "               # epoch=0, chunk_size=chunk_size), for chunk_size in (1, 10, 100, 10_000)",
     source="padding = {}\n"
            "for chunk in (1, 10, 100, 10_000):\n"
            "    b = token_batches(lengths, RECOMMENDED.max_tokens, seed=0, epoch=0, chunk_size=chunk)\n"
            "    padding[chunk] = padding_fraction(b, lengths)\n"
            "    print(f\"chunk_size {chunk:>6}: {len(b)} batches, padding {padding[chunk]:.1%}\")")
checks(nb, "6a44c73e", "ex-09-bucket", [
    ("public", "# Check: one fraction per chunk size, falling as the chunks grow\n"
               "assert sorted(padding) == [1, 10, 100, 10_000], f\"padding needs the keys 1, 10, 100, 10_000, got {sorted(padding)}\"\n"
               "assert padding[1] > padding[100] > padding[10_000], \"padding should fall as chunk_size grows\"\n"
               "print(\"correct: padding falls from\", f\"{padding[1]:.1%} to {padding[10_000]:.1%}\")"),
    ("hidden", "for c_ in (1, 10, 100, 10_000):\n"
               "    b_ = token_batches(lengths, RECOMMENDED.max_tokens, seed=0, epoch=0, chunk_size=c_)\n"
               "    check_close(padding[c_], padding_fraction(b_, lengths), f\"padding at chunk_size {c_}\", atol=1e-12)"),
])
nbformat.write(nb, path)
