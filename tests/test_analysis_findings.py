"""Tests of tmlib.analysis.findings, what chapter 11's measurements say: hand-made tables of head statistics,
ablations and permutations whose answers are known, and the yardstick of the permutation test against weights
zeroed by hand on a tiny random model."""
from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tmlib import analysis as I
from tmlib.analysis.findings import WIDTH
from tmlib.model import make_model

NAN = float("nan")


def _stats() -> pd.DataFrame:
    """Two layers of encoder self-attention, one of decoder self-attention and one of cross-attention, two heads
    each; the shares not defined for a kind are NaN, as in head_statistics."""
    rows = [  # kind, layer, head, entropy, max_entropy, previous, same, first, last, diagonal
        ("encoder self", 0, 0, 1.8, 2.0, 0.10, 0.20, 0.05, 0.04, NAN),
        ("encoder self", 0, 1, 1.6, 2.0, 0.45, 0.10, 0.30, 0.02, NAN),
        ("encoder self", 1, 0, 0.4, 2.0, 0.05, 0.70, 0.01, 0.60, NAN),
        ("encoder self", 1, 1, 0.8, 2.0, 0.20, 0.30, 0.02, 0.01, NAN),
        ("decoder self", 0, 0, 0.2, 1.0, 0.30, 0.90, 0.10, NAN, NAN),
        ("decoder self", 0, 1, 0.5, 1.0, 0.60, 0.20, 0.20, NAN, NAN),
        ("cross", 0, 0, 1.0, 2.0, NAN, NAN, 0.10, 0.10, 0.30),
        ("cross", 0, 1, 1.2, 2.0, NAN, NAN, 0.20, 0.05, 0.70),
    ]
    return pd.DataFrame(rows, columns=["kind", "layer", "head", "entropy", "max_entropy", "previous", "same",
                                       "first", "last", "diagonal"])


def _ablation() -> pd.DataFrame:
    """An ablation table of the heads of _stats, as ablation_table returns it."""
    single = {("encoder self", 0, 0): 0.01, ("encoder self", 0, 1): 0.30, ("encoder self", 1, 0): 0.05,
              ("encoder self", 1, 1): 0.02, ("decoder self", 0, 0): 0.04, ("decoder self", 0, 1): 0.03,
              ("cross", 0, 0): 0.06, ("cross", 0, 1): 0.50}
    kept = {("encoder self", 0): [0.20, 0.35], ("encoder self", 1): [0.03, 0.40], ("decoder self", 0): [0.25, 0.10],
            ("cross", 0): [1.50, 0.90]}
    whole = {("encoder self", 0): 0.6, ("encoder self", 1): 0.2, ("decoder self", 0): 0.8, ("cross", 0): 2.0}
    rows = [("none", None, NAN, NAN, 0, 0.0, 30.0)]
    rows += [("one head", k, layer, h, 1, d, NAN) for (k, layer, h), d in single.items()]
    rows += [("all but one", k, layer, h, 1, d, NAN) for (k, layer), ds in kept.items() for h, d in enumerate(ds)]
    rows += [("whole layer", k, layer, -1, 2, d, b) for ((k, layer), d), b in zip(whole.items(), (25, 28, 20, 2))]
    rows.append(("all heads", None, NAN, NAN, 8, 3.5, NAN))
    table = pd.DataFrame(rows, columns=["experiment", "kind", "layer", "head", "n_off", "delta_nll", "bleu"])
    table["nll"] = 2.0 + table["delta_nll"]
    table["delta_bleu"] = table["bleu"] - 30.0
    return table


def test_head_names():
    assert I.head_name(I.Head("cross", 1, 2)) == "cross L1 H2"
    assert I.head_name(pd.Series({"kind": "encoder self", "layer": 0.0, "head": 3.0})) == "enc-self L0 H3"
    assert I.head_name({"kind": "decoder self", "layer": 1, "head": -1}) == "dec-self L1"  # a whole layer
    assert I.head_name({"kind": "cross", "layer": 0, "head": NAN}) == "cross L0"


def test_run_summary_names_the_run_and_the_weights_it_kept():
    trained = SimpleNamespace(loaded=True, path=Path("runs/multi30k/checkpoint.pt"), step=1887, epoch=7,
                              elapsed_s=900.0, best_step=1429, history={"val_nll": [2.5, 1.865, 1.9]})
    assert I.run_summary(trained).splitlines() == [
        "loaded from runs/multi30k: 1,887 steps, 7 epochs, 15.0 min of training",
        "kept: the weights of step 1,429, its best validation pass (1.865 nats/token)"]
    trained.best_step, trained.loaded = None, False
    assert I.run_summary(trained).splitlines()[0].startswith("trained into runs/multi30k")
    assert "the last weights (1.900" in I.run_summary(trained)


def test_alignment_reading_of_a_hand_made_panel():
    w = np.array([[0.8, 0.2, 0.0, 0.0],   # A -> Ein
                  [0.1, 0.9, 0.0, 0.0],   # man -> Mann
                  [0.0, 0.1, 0.6, 0.3],   # loads -> lädt
                  [0.0, 0.3, 0.5, 0.2],   # it -> lädt, the same German word again
                  [0.0, 0.0, 0.3, 0.7]])  # <eos> -> .
    r = I.alignment_reading(w, ["Ein", "Mann", "lädt", "."], ["A", "man", "loads", "it", "<eos>"], title="toy")
    assert r["best"][2] == ("loads", "lädt", 0.6) and r["best"][-1] == ("<eos>", ".", 0.7)
    assert r["forward"] == 1.0 and r["shared"] == {"lädt": ["loads", "it"]}
    assert (r["lowest"], r["highest"]) == (0.5, 0.9)
    assert "read by several English words: lädt (loads, it)" in str(r)
    back = I.alignment_reading(w[[1, 0, 4]], ["Ein", "Mann", "lädt", "."], ["man", "A", "<eos>"])
    assert back["forward"] == 0.0 and back["shared"] == {}  # A reads a German word before man's
    many = I.alignment_reading(np.eye(30), [f"w{i}" for i in range(30)], [f"word{i}" for i in range(30)])
    assert all(len(line) <= WIDTH for line in many.lines) and len(many.lines) > 4


def test_layer_breadth_and_strongest_heads():
    stats = _stats()
    breadth = I.layer_breadth(stats)
    assert list(breadth.index) == [("encoder self", 0), ("encoder self", 1), ("decoder self", 0), ("cross", 0)]
    np.testing.assert_allclose(breadth.loc[("encoder self", 0)], [0.8, 0.9, 0.85])
    np.testing.assert_allclose(breadth.loc[("decoder self", 0)], [0.2, 0.5, 0.35])
    top = I.strongest_heads(stats)
    assert list(top.columns) == ["encoder self", "decoder self", "cross"]
    assert top.loc["previous", "encoder self"] == "L0 H1: 45%" and top.loc["same", "decoder self"] == "L0 H0: 90%"
    assert top.loc["diagonal", "cross"] == "L0 H1: 70%" and top.loc["last", "encoder self"] == "L1 H0: 60%"
    assert top.loc["previous", "cross"] == "–" and top.loc["last", "decoder self"] == "–"


def test_sink_and_standout_heads():
    stats = _stats()
    assert I.sink_heads(stats) == ["enc-self L1 H0"]  # 60% on the last key
    assert I.sink_heads(stats, share=0.7) == []
    standout = I.standout_heads(stats)
    assert standout["cross L0 H1"] == ["the most diagonal cross head"]
    assert standout["enc-self L0 H1"] == ["the most previous-token enc-self head"]
    assert standout["dec-self L0 H1"] == ["the most previous-token dec-self head"]
    assert standout["dec-self L0 H0"] == ["the most self-looking dec-self head"]
    assert standout["enc-self L1 H0"] == ["the most self-looking enc-self head"]
    assert len(standout) == 5


def test_layer_table_labels_the_all_heads_row():
    table = I.layer_table(_ablation())
    assert list(table.index)[-1] == ("all heads", "all", "all")
    assert ("whole layer", "cross", "0") in table.index
    assert list(table.columns) == ["n_off", "nll", "delta_nll", "bleu", "delta_bleu", "delta_nll_best_alone"]
    row = table.loc[("whole layer", "encoder self", "1")]
    assert (row["n_off"], row["nll"], row["delta_nll"], row["bleu"], row["delta_nll_best_alone"]) == (
        2, "2.200", "0.200", "28.0", "0.030")  # fixed decimals: 3, BLEU 1
    last = table.loc[("all heads", "all", "all")]
    assert last["delta_nll"] == "3.500" and last["bleu"] == "–" and last["delta_nll_best_alone"] == "–"


def test_ablation_findings_of_a_hand_made_table():
    f = I.ablation_findings(_stats(), _ablation())
    assert f["n_heads"] == 8 and f["median"] == pytest.approx(0.045)  # (0.04 + 0.05) / 2
    assert f["cheap"] == 1  # only 0.01 costs less than 0.02
    assert [c[:2] for c in f["costliest"]] == [("cross L0 H1", 0.5), ("enc-self L0 H1", 0.3)]
    assert f["costliest"][0][2] == "the most diagonal cross head"
    assert f["looker"] == ("dec-self L0 H0", 0.9, 0.04, 5)  # 90% on itself, fifth costliest
    assert f["kept_alone"] == {"enc-self L0": 0.2, "enc-self L1": 0.03, "dec-self L0": 0.1, "cross L0": 0.9}
    assert f["prunable"] == ["enc-self L1"]  # its best head alone costs 0.03 <= the median 0.045
    assert all(len(line) <= WIDTH for line in f.lines)
    assert "one head kept per layer: +0.030 (enc-self L1, 0.7 × median) to +0.900 (cross L0)" in str(f)


def test_ablation_findings_names_what_a_costly_head_is_not():
    """A costliest head that is no standout head is named by what it is not, per kind (a reader of r61 found
    "not one of the heads that stood out" vague); the lines stay within WIDTH."""
    table = _ablation()
    one = table["experiment"] == "one head"
    table.loc[one & (table["kind"] == "cross") & (table["head"] == 0), "delta_nll"] = 0.7
    table.loc[one & (table["kind"] == "encoder self") & (table["layer"] == 1) & (table["head"] == 1), "delta_nll"] = 0.6
    f = I.ablation_findings(_stats(), table)
    assert [c[:2] for c in f["costliest"]] == [("cross L0 H0", 0.7), ("enc-self L1 H1", 0.6)]
    assert f["costliest"][0][2] == "not the most diagonal cross head"
    assert f["costliest"][1][2] == "not the most previous-token or self-looking enc-self head"
    assert "stood out" not in str(f) and all(len(line) <= WIDTH for line in f.lines)


def test_ablation_findings_counts_heads_strictly_below_the_threshold():
    table = _ablation()
    assert I.ablation_findings(_stats(), table)["cheap"] == 1  # 0.02 is not below 0.02
    assert I.ablation_findings(_stats(), table, cheap=0.0201)["cheap"] == 2
    assert I.ablation_findings(_stats(), table, cheap=0.035)["cheap"] == 3


def test_permutation_findings_of_a_hand_made_table():
    stats, ablation = _stats(), _ablation()
    heads = stats[["kind", "layer", "head"]].copy()
    perm = heads.assign(attention_tvd=[0.5, 0.6, 0.9, 0.8, 0.7, 0.4, 0.85, 0.3],
                        attention_jsd=[0.4, 0.5, 0.7, 0.6, 0.6, 0.3, 0.7, 0.2],
                        output_tvd=[0.05, 0.06, 0.1, 0.08, 0.07, 0.04, 0.02, 0.03],
                        argmax_changed=[0.04, 0.05, 0.10, 0.08, 0.06, 0.02, 0.01, 0.20],
                        argmax_changed_off=[0.04, 0.10, 0.10, 0.04, 0.06, 0.04, 0.01, 0.10])
    f = I.permutation_findings(perm, ablation, stats)
    assert f["tvd"] == (0.3, 0.9) and f["changed"] == (0.01, 0.2) and f["changed_off"] == (0.01, 0.1)
    assert f["ratio"] == pytest.approx(1.0)  # ratios 1, 0.5, 1, 2, 1, 0.5, 1, 2: median 1
    assert f["moved_median"] == pytest.approx(0.65)
    assert f["below_one"] == 2 and f["above_one"] == 2  # two heads at 0.5, two at 2, four at 1
    assert f["lowest"] == I.Head(*stats.iloc[1][["kind", "layer", "head"]])  # the first head of ratio 0.5
    assert f["highest"] == I.Head(*stats.iloc[3][["kind", "layer", "head"]])  # the first head of ratio 2
    assert f"shuffled / switched off, lowest: {I.head_name(f['lowest'])} 0.50 (5.0% / 10.0%)" in str(f)
    assert f"  highest: {I.head_name(f['highest'])} 2.00 (8.0% / 4.0%)" in str(f)
    assert f["loud"] == ("cross L0 H1", 0.2, 1)  # the costliest single head too
    assert f["loud_head"] == I.Head("cross", 0, 1)  # the same head, for chapter 11 to run it again
    assert f["layer_ratio"] == ("cross L0", 2.0, 0.5, 4.0)
    assert all(len(line) <= WIDTH for line in f.lines)
    assert "the most diagonal cross head" in str(f)


def test_permutation_findings_ratios_where_switching_off_changes_nothing():
    stats, ablation = _stats(), _ablation()
    perm = stats[["kind", "layer", "head"]].assign(attention_tvd=0.5, attention_jsd=0.4, output_tvd=0.05,
                                                  argmax_changed=[0.0, 0.02, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04],
                                                  argmax_changed_off=[0.0, 0.0, 0.02, 0.08, 0.04, 0.04, 0.04, 0.04])
    f = I.permutation_findings(perm, ablation, stats)
    assert f["ratios"].tolist() == [1.0, np.inf, 2.0, 0.5, 1.0, 1.0, 1.0, 1.0]  # 0 / 0 counts 1, 0.02 / 0 infinity
    assert f["below_one"] == 1 and f["above_one"] == 2 and f["ratio"] == 1.0
    assert f["highest"] == I.Head(*stats.iloc[1][["kind", "layer", "head"]])
    assert f["lowest"] == I.Head(*stats.iloc[3][["kind", "layer", "head"]])


def test_argmax_changed_off_against_weights_zeroed_by_hand():
    torch.manual_seed(0)
    model = make_model("tiny", 40, pad_id=0, dropout=0.0).eval()  # 2 + 2 layers, 2 heads, d_model 32
    src = I.pad_batch([[5, 6, 7, 8, 9], [10, 11, 12]])
    tgt_in = I.pad_batch([[1, 20, 21, 22, 23, 24], [1, 23, 30]])  # (2, 6), second row padded
    heads = [I.Head("cross", 1, 0), I.Head("decoder self", 0, 1), I.Head("encoder self", 1, 1)]
    got = I.argmax_changed_off(model, [(src, tgt_in)], heads)
    real = tgt_in != 0
    with torch.no_grad():
        kept = model(src, tgt_in).argmax(-1)
    for h, share in zip(heads, got):
        zeroed = copy.deepcopy(model)
        module = I.attention_module(zeroed, h.kind, h.layer)
        with torch.no_grad():
            module.w_o.weight[:, h.head * module.d_k:(h.head + 1) * module.d_k] = 0.0
            changed = (zeroed(src, tgt_in).argmax(-1) != kept)[real]
        assert share == changed.sum().item() / real.sum().item()
    assert model.training is False
    with pytest.raises(ValueError):
        I.argmax_changed_off(model, [(src, torch.zeros_like(tgt_in))], heads)


def _flat(findings) -> str:
    """The printout of ``findings`` with its wrapped lines joined."""
    return " ".join(line.strip() for line in findings.lines)


def _verdicts(findings) -> list[str]:
    """The verdict lines ("finding: ...") of ``findings``, each with its continuation lines joined; they end the
    printout."""
    out = []
    for line in findings.lines:
        if line.startswith("finding: "):
            out.append(line)
        elif out:
            assert line.startswith("  "), "only a verdict's continuation lines follow the first verdict"
            out[-1] += " " + line.strip()
    return out


def test_alignment_reading_prints_no_verdict_but_keeps_the_steps_back():
    """The page counts the steps back in view: the printout has no verdict line; ``verdicts`` and ``back`` hold
    the same decision, unprinted."""
    names = ["Ein", "Mann", "lädt", "."]
    diagonal = I.alignment_reading(np.eye(4), names, ["A", "man", "loads", "<eos>"])
    assert diagonal["verdicts"] == ["in order", "one each"] and diagonal["back"] == []
    assert _verdicts(diagonal) == [] and "finding" not in str(diagonal)
    w = np.array([[0.1, 0.9, 0.0, 0.0], [0.8, 0.2, 0.0, 0.0], [0.0, 0.0, 0.6, 0.4], [0.0, 0.0, 0.7, 0.3],
                  [0.0, 0.0, 0.0, 1.0]])  # man -> Mann, A -> Ein (back), loads and it -> lädt
    r = I.alignment_reading(w, names, ["man", "A", "loads", "it", "<eos>"])
    assert r["verdicts"] == ["moves back", "shared"] and r["back"] == [(0, "man", "Mann", "A", "Ein")]
    assert _verdicts(r) == [] and r["forward"] == pytest.approx(2 / 3)


def test_head_findings_gives_each_verdict():
    stats = _stats()
    f = I.head_findings(stats)
    assert f["breadth"] == {"encoder self": pytest.approx((0.85, 0.30))} and f["broader"] == ["encoder self"]
    assert f["positional"] == ["dec-self L0 H1"] and f["sinks"] == ["enc-self L1 H0"] and f["self_looking"] == []
    assert f["verdicts"] == ["broad first", "positional", "sinks", "no self-looking head"]
    assert "finding: no self-looking head (largest share on its own position" in _flat(f)
    assert all(line.startswith(("finding: ", "  ")) for line in f.lines) and all(len(x) <= WIDTH for x in f.lines)
    # the opposite verdicts: shares below the thresholds, a decoder layer 1 broader than layer 0, a copying head
    quiet = stats.copy()
    quiet["previous"] = quiet["previous"].clip(upper=0.39)
    quiet[["first", "last"]] = quiet[["first", "last"]].clip(upper=0.16)
    quiet.loc[quiet.kind == "encoder self", "same"] = [0.2, 0.1, 0.95, 0.3]
    extra = pd.DataFrame([("decoder self", 1, 0, 0.9, 1.0, 0.1, 0.2, 0.1, NAN, NAN),
                          ("decoder self", 1, 1, 0.8, 1.0, 0.1, 0.2, 0.1, NAN, NAN)], columns=stats.columns)
    quiet = pd.concat([quiet, extra], ignore_index=True)
    g = I.head_findings(quiet)
    assert g["verdicts"] == ["mixed", "no positional head", "no sink head", "self-looking"]
    text = _flat(g)
    assert "the first layer is broader than the last only in enc-self" in text
    assert "no positional head (largest previous-token share 39%" in text and "below the 50%" not in text
    assert "no sink head (largest share on the first or last key 16%" in text
    assert "enc-self L1 H0 95%" in text
    assert I.head_findings(quiet, positional=0.3)["positional"] == ["enc-self L1 H2"] or \
        I.head_findings(quiet, positional=0.3)["verdicts"][1] == "positional"
    flat = quiet[quiet.kind != "encoder self"]
    assert I.head_findings(flat)["verdicts"][0] == "focused first"


def test_ablation_findings_print_numbers_only():
    """The one-head test and the whole layers are computed in view on the page: the printout gives single-head
    numbers and no verdict, no whole layer; ``prunable`` follows the median."""
    f = I.ablation_findings(_stats(), _ablation())
    assert not any(line.startswith("finding:") for line in f.lines) and "verdicts" not in f.numbers
    assert "whole layer" not in _flat(f) and "every head off" not in _flat(f) and "BLEU" not in _flat(f)
    table = _ablation()
    kept = table.experiment == "all but one"
    table.loc[kept, "delta_nll"] += 0.5  # no layer can be reduced to one head
    g = I.ablation_findings(_stats(), table)
    assert g["prunable"] == [] and g["kept_alone"]["enc-self L1"] == pytest.approx(0.53)
    assert all(len(line) <= WIDTH for line in g.lines)


def test_permutation_findings_end_with_a_verdict():
    stats, ablation = _stats(), _ablation()
    heads = stats[["kind", "layer", "head"]].copy()
    base = heads.assign(attention_tvd=np.linspace(0.3, 0.9, 8), attention_jsd=0.5, output_tvd=0.05,
                        argmax_changed=[0.04, 0.05, 0.10, 0.08, 0.06, 0.02, 0.01, 0.12],
                        argmax_changed_off=[0.04, 0.05, 0.10, 0.08, 0.06, 0.02, 0.01, 0.12])
    f = I.permutation_findings(base, ablation, stats)
    assert f["verdicts"] == ["about as much", "few changed"] and f["ratio"] == pytest.approx(1.0)
    assert _verdicts(f) == [] and "median over heads" not in _flat(f)  # the page compares in view
    assert "changed at 1.0% to 12.0% of the positions" in _flat(f)
    less = I.permutation_findings(base.assign(argmax_changed=base.argmax_changed / 2), ablation, stats)
    assert less["verdicts"] == ["less", "few changed"] and less["ratio"] == pytest.approx(0.5)
    more = I.permutation_findings(base.assign(argmax_changed=base.argmax_changed * 2), ablation, stats)
    assert more["verdicts"] == ["more", "many changed"] and _verdicts(more) == []
    assert "changed at 2.0% to 24.0% of the positions" in _flat(more)
    edge = I.permutation_findings(base.assign(argmax_changed=base.argmax_changed * 1.25), ablation, stats)
    assert edge["verdicts"][0] == "about as much"  # the range 0.8 to 1.25 includes its ends
    assert all(len(line) <= WIDTH for line in more.lines)


def test_permutation_findings_leave_the_layer_costs_to_the_ablation():
    stats, ablation = _stats(), _ablation()
    heads = stats[["kind", "layer", "head"]].copy()
    perm = heads.assign(attention_tvd=np.linspace(0.3, 0.9, 8), attention_jsd=0.5, output_tvd=0.05,
                        argmax_changed=0.05, argmax_changed_off=0.05)
    f = I.permutation_findings(perm, ablation, stats)
    assert f["layer_ratio"][0].startswith("cross L") and "times the costliest" not in _flat(f)


def test_ranks_in_cost_carry_their_direction():
    from tmlib.analysis.findings import _costliest
    got = [_costliest(r, 24) for r in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23)]
    assert got == ["the costliest of 24", "2nd costliest of 24", "3rd costliest of 24", "4th costliest of 24",
                   "11th costliest of 24", "12th costliest of 24", "13th costliest of 24", "21st costliest of 24",
                   "22nd costliest of 24", "23rd costliest of 24"]


def _perm(changed, changed_off, tvd=0.5) -> pd.DataFrame:
    """A permutation table of the heads of _stats, as permutation_effects returns it with argmax_changed_off."""
    return _stats()[["kind", "layer", "head"]].assign(attention_tvd=tvd, attention_jsd=0.4, output_tvd=0.05,
                                                     argmax_changed=changed, argmax_changed_off=changed_off)


def test_ratio_sharpness_merges_the_ratios_with_the_head_statistics():
    stats, ablation = _stats(), _ablation()
    breadth = (stats["entropy"] / stats["max_entropy"]).to_numpy()  # 0.9 0.8 0.2 0.4 0.2 0.5 0.5 0.6
    order = np.argsort(breadth, kind="stable")  # the sharpest first: give it the highest ratio
    changed = np.empty(8)
    changed[order] = np.linspace(0.16, 0.02, 8)
    f = I.permutation_findings(_perm(changed, 0.04, tvd=np.linspace(0.3, 0.9, 8)), ablation, stats)
    s = f["sharpness"]
    assert isinstance(s, I.Findings) and list(s["table"]["ratio"]) == sorted(f["ratios"], reverse=True)
    assert list(s["table"]["name"][:2]) == ["enc-self L1 H0", "dec-self L0 H0"]  # the two sharpest (0.2)
    row = s["table"].set_index("name").loc["cross L0 H1"]
    assert row["entropy / max"] == pytest.approx(0.6) and row["attention_tvd"] == pytest.approx(0.9)
    assert s["rho"]["entropy / max"] < -0.9 and s["verdict"] == "sharper higher"
    assert s["self_looking"]["name"] == "dec-self L0 H0" and s["highest"]["name"] == "enc-self L1 H0"
    text = " ".join(str(s).split())
    assert "finding: the ratio follows how sharp a head is (rank correlation with entropy / max -0.4 or lower)" in text
    assert "the lowest ratio, enc-self L0 H0's, is a broad head's (entropy / max 0.90, the median head's 0.50)" in text
    assert all(len(line) <= WIDTH for line in s.lines)


def test_ratio_sharpness_states_each_verdict_by_its_threshold():
    stats = _stats()
    breadth = (stats["entropy"] / stats["max_entropy"]).to_numpy()
    f = I.findings.ratio_sharpness(_perm(0.04, 0.04), stats, breadth * 2)  # the broader, the higher
    assert f["verdict"] == "broader higher" and f["rho"]["entropy / max"] == pytest.approx(1.0)
    assert "finding: the broader heads tend to have the higher ratios" in " ".join(str(f).split())
    unrelated = np.array([1.0, 1.2, 1.1, 0.9, 0.8, 1.3, 0.7, 1.05])
    rho = pd.Series(unrelated).rank().corr(pd.Series(breadth).rank())
    g = I.findings.ratio_sharpness(_perm(0.04, 0.04), stats, unrelated)
    assert abs(rho) < 0.4 and g["rho"]["entropy / max"] == pytest.approx(rho) and g["verdict"] == "independent"
    assert "finding: the ratio does not follow how sharp a head is" in " ".join(str(g).split())
    h = I.findings.ratio_sharpness(_perm(0.04, 0.04), stats, unrelated, threshold=abs(rho) / 2)  # a lower bar: it follows
    assert h["verdict"] == ("sharper higher" if rho < 0 else "broader higher")
    same = I.findings.ratio_sharpness(_perm(0.04, 0.04), stats, np.ones(8))  # one ratio: no ranks to correlate
    assert np.isnan(same["rho"]["entropy / max"]) and same["verdict"] == "independent"
    assert "every head has the same ratio or breadth" in " ".join(str(same).split())


def test_ratio_sharpness_checks_its_inputs():
    stats = _stats()
    with pytest.raises(ValueError, match="one value per row of perm"):
        I.findings.ratio_sharpness(_perm(0.04, 0.04), stats, [1.0, 2.0])
    with pytest.raises(ValueError, match="missing from stats: cross L0 H1"):
        I.findings.ratio_sharpness(_perm(0.04, 0.04), stats.iloc[:-1], np.ones(8))
