"""Measuring the model: what its attention does (chapter 11), what it costs (chapters 2, 3, 6, 12), and how fast
it runs on which machine (chapter 12, ``benchmarks/``).

* :mod:`~tmlib.analysis.capture`: the three kinds of attention, the heads, one forward pass's weights;
* :mod:`~tmlib.analysis.heads`: per-head statistics (entropy, previous token, diagonal, ...);
* :mod:`~tmlib.analysis.alignment`: BPE pieces merged into words, cross-attention as a soft word alignment;
* :mod:`~tmlib.analysis.ablation`: heads switched off, and what that costs in cross-entropy and BLEU;
* :mod:`~tmlib.analysis.permutation`: one head's weights shuffled, and how far the output moves;
* :mod:`~tmlib.analysis.findings`: what those measurements say about one run, as numbers and short lines;
* :mod:`~tmlib.analysis.views`: bertviz's views of the captured weights;
* :mod:`~tmlib.analysis.costs`: parameter counts, memory, the paper's Table 1;
* :mod:`~tmlib.analysis.flops`: FLOPs (counted once, from one attention and one feed-forward unit), device peaks,
  MFU;
* :mod:`~tmlib.analysis.benchmarking`: timers, measured peak memory, power-law fits, KV-cache bytes;
* :mod:`~tmlib.analysis.records`: chapter 12's stored benchmark records, read into tables, figure series and
  short lines;
* :mod:`~tmlib.analysis.bugcheck`: the tests a Transformer must pass (causality, padding, the scale of the scores,
  the first loss, one batch learnt by heart) and attention with a planted bug, for the chapter on finding bugs.

The description of the machine a number was measured on is :mod:`tmlib.machine` (training stores it too).
"""

from tmlib.analysis.ablation import ablate_heads, ablation_experiments, ablation_table, greedy_bleu, nll_per_token
from tmlib.analysis.alignment import merge_attention, word_alignment, word_labels, word_spans
from tmlib.analysis.benchmarking import (
    GPU_RESULTS, PowerLawFit, RESULTS_URL, decoder_cache_bytes, fit_power_law, kv_cache_bytes, load_result,
    peak_memory_bytes, tensor_bytes, time_call
)
from tmlib.analysis.capture import (
    ATTENTION_KINDS, AttentionCapture, Head, all_heads, attention_module, capture_attention, pad_batch,
    translate_and_capture
)
from tmlib.analysis.costs import (
    LAYER_TYPES, PAPER_TABLE_1, attention_matrix_bytes, complexity_per_layer, complexity_table,
    ffn_activation_bytes, ffn_parameter_count, maximum_path_length, mha_parameter_count, sequential_operations,
    training_state_bytes
)
from tmlib.analysis.flops import (
    PEAK_FLOPS, attention_flops, feed_forward_flops, flops_per_token, gpu_peak_flops, layer_flops, mfu,
    model_flops, peak_flops, training_flops_from_hardware, transformer_flops
)
from tmlib.analysis.findings import (
    Findings, ablation_findings, alignment_reading, argmax_changed_off, head_name, layer_breadth, layer_table,
    permutation_findings, ratio_sharpness, run_summary, sink_heads, standout_heads, strongest_heads, head_findings
)
from tmlib.analysis.heads import STATISTICS, attention_statistics, diagonal_centre, head_statistics
from tmlib.analysis.records import (
    attention_rows, attention_series, exponent_table, gpu_attention_table, repeats_apart, step_profile
)
from tmlib.analysis.permutation import (
    js_distance, override_head_attention, permutation_effects, permute_rows, total_variation
)
from tmlib.analysis.runs import (
    STORED_RUNS, device_name, dropout_pays_from, expected_epochs, kept_by_pass, run_pace, translation_runs
)
from tmlib.analysis.views import bertviz_inputs, bertviz_view

__all__ = [
    "ATTENTION_KINDS", "AttentionCapture", "Findings", "GPU_RESULTS", "Head", "LAYER_TYPES", "PAPER_TABLE_1",
    "PEAK_FLOPS", "PowerLawFit", "RESULTS_URL", "STATISTICS", "ablate_heads", "ablation_experiments",
    "ablation_table", "all_heads", "attention_flops", "attention_matrix_bytes", "attention_module", "diagonal_centre",
    "attention_statistics", "bertviz_inputs", "bertviz_view", "capture_attention", "complexity_per_layer",
    "complexity_table", "decoder_cache_bytes", "feed_forward_flops",
    "ffn_activation_bytes", "ffn_parameter_count", "fit_power_law", "flops_per_token", "gpu_peak_flops",
    "greedy_bleu", "head_statistics", "js_distance", "kv_cache_bytes", "layer_flops", "load_result",
    "maximum_path_length", "merge_attention", "mfu", "mha_parameter_count", "model_flops",
    "nll_per_token", "override_head_attention", "pad_batch", "peak_flops", "peak_memory_bytes",
    "STORED_RUNS", "device_name", "dropout_pays_from", "expected_epochs", "kept_by_pass", "run_pace",
    "translation_runs",
    "permutation_effects", "permute_rows", "sequential_operations", "tensor_bytes", "time_call",
    "total_variation", "training_flops_from_hardware", "training_state_bytes", "transformer_flops",
    "translate_and_capture", "word_alignment", "word_labels", "word_spans",
    "ablation_findings", "alignment_reading", "argmax_changed_off", "head_name", "layer_breadth", "layer_table",
    "permutation_findings", "ratio_sharpness", "run_summary", "sink_heads", "standout_heads", "strongest_heads",
    "head_findings",
    "attention_rows", "attention_series", "exponent_table", "gpu_attention_table", "repeats_apart", "step_profile"
]
