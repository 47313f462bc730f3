"""The course's helpers for notebooks: the lecture's worked-example inputs, answer checks for exercises,
self-check quizzes and titled, labelled figures.
"""

from tmlib.course.checks import check_close, check_shape, tolerance_text
from tmlib.course.diagnostics import (
    check_causal, check_own_answer, check_own_work, check_padding_invariance, check_rows_sum_to_one, check_stages,
    forbidden_references, module_stages, resolve_dotted
)
from tmlib.course.count_checks import (
    check_attention_bytes, check_cache_projections, check_decoder_only_count, check_kv_cache_bytes
)
from tmlib.course.exercise_checks import (
    check_attention_result, check_encoder_layer, check_feed_forward, check_feed_forward_result, check_layer_norm_result,
    check_merged_alignment, check_multi_head_attention, check_multi_head_result
)
from tmlib.course.module_checks import (check_merged_heads, check_my_mha, check_padding_masks, check_view_rows,
                                       check_view_shortcut)
from tmlib.course.module_checks import check_additive_mask, check_cache_numbers, check_transposed_stride
from tmlib.course.training_checks import (
    check_case_sensitive_sentences, check_learning_rate, check_lengths_per_batch, check_padding_fractions,
    check_peak_learning_rate, check_schedule_crossing, check_smoothing_floor, check_smoothing_mass,
    check_train_step
)
from tmlib.course.examples import (
    ATTENTION_EXAMPLES, ATTENTION_EXAMPLE_1, ATTENTION_EXAMPLE_2, ATTENTION_EXAMPLE_3, AttentionExample,
    CROSS_ATTENTION_EXAMPLE, FFN_EXAMPLE, FeedForwardExample, LECTURE_PRINTED, LR_EXAMPLE, MHA_EXAMPLE_2,
    MHA_EXAMPLE_3, MultiHeadExample
)
from tmlib.course.listing import glue, show_source
from tmlib.course.plotting import (
    alignment_panels, attention_heads, attention_heatmap, head_grid, mask_panels, positional_encoding_heatmap,
    power_law_plot
)
from tmlib.course.quiz import PAPER_QUIZ, Quiz, choice, numeric, paper_quiz_block
from tmlib.course.checks import require_answered
from tmlib.course.exercise_checks import (check_decoder_layer, check_encoding_row, check_positional_encoding,
                                         check_score_spread)
from tmlib.course.model_checks import check_greedy_decode, check_preln_stages, check_vocab_ranges
from tmlib.course.model_checks import check_blocked_weights, check_decoder_layer_properties
from tmlib.course.model_checks import check_layer_norm
from tmlib.course.analysis_checks import (
    check_greedy_pruning, check_ln2_row, check_max_entropy, check_row_entropy
)
from tmlib.course.analysis_checks import check_alignment_reads, check_perfect_alignment
from tmlib.course.efficiency_checks import (check_against_measured, check_skipped_pairs, check_tiled_reads,
                                            check_training_flops)
from tmlib.course.efficiency_checks import (check_causal_online_attention, check_crossovers, check_flops_per_token,
                                            check_kv_cache_function)
from tmlib.course.efficiency_checks import check_big_model_cache, check_big_model_flops
from tmlib.course.recipe_checks import (check_half_step, check_descend, check_descend_steps, check_lrate,
                                        check_smoothed_loss)
from tmlib.course.modern_checks import check_alibi_slopes, check_tokens_in_memory
from tmlib.course.count_checks import check_ffn_parameters
from tmlib.course.exercise_checks import check_rope_scores, check_wavelength_pair
from tmlib.course.exercise_checks import check_key_shifts, check_ln_of_affine, check_one_head, check_relu_bias
from tmlib.course.exercise_checks import check_masked_attention, check_split_merge
from tmlib.course.scaling_checks import check_accumulate, check_all_reduce_bytes, check_first_unclipped_step

__all__ = [
    "ATTENTION_EXAMPLES", "ATTENTION_EXAMPLE_1", "ATTENTION_EXAMPLE_2", "ATTENTION_EXAMPLE_3",
    "CROSS_ATTENTION_EXAMPLE", "FFN_EXAMPLE", "LECTURE_PRINTED", "LR_EXAMPLE", "MHA_EXAMPLE_2", "MHA_EXAMPLE_3",
    "PAPER_QUIZ", "AttentionExample", "FeedForwardExample", "MultiHeadExample", "Quiz", "alignment_panels",
    "attention_heads", "attention_heatmap", "check_attention_bytes", "check_attention_result",
    "check_cache_projections", "check_case_sensitive_sentences", "check_causal", "check_close",
    "check_decoder_only_count", "check_encoder_layer", "check_feed_forward", "check_feed_forward_result",
    "check_kv_cache_bytes", "check_layer_norm_result", "check_learning_rate", "check_lengths_per_batch",
    "check_merged_alignment", "check_merged_heads", "check_padding_masks", "check_multi_head_attention",
    "check_transposed_stride",
    "check_multi_head_result", "check_my_mha", "check_own_answer", "check_own_work", "check_padding_fractions", "check_padding_invariance",
    "check_peak_learning_rate", "check_rows_sum_to_one", "check_schedule_crossing", "check_shape",
    "check_smoothing_floor", "check_smoothing_mass", "check_stages", "check_train_step", "check_view_rows",
    "check_view_shortcut",
    "check_additive_mask", "check_cache_numbers",
    "choice", "forbidden_references", "head_grid", "mask_panels", "module_stages", "numeric", "paper_quiz_block",
    "positional_encoding_heatmap", "power_law_plot", "resolve_dotted", "glue", "show_source", "tolerance_text",
    "require_answered", "check_decoder_layer", "check_encoding_row", "check_positional_encoding", "check_score_spread",
    "check_greedy_decode", "check_preln_stages", "check_vocab_ranges",
    "check_greedy_pruning", "check_ln2_row", "check_max_entropy", "check_row_entropy", "check_perfect_alignment",
    "check_alignment_reads",
    "check_blocked_weights", "check_decoder_layer_properties", "check_layer_norm",
    "check_against_measured", "check_skipped_pairs", "check_tiled_reads", "check_training_flops",
    "check_causal_online_attention", "check_crossovers", "check_flops_per_token", "check_kv_cache_function",
    "check_big_model_cache", "check_big_model_flops",
    "check_half_step", "check_descend", "check_descend_steps", "check_lrate", "check_smoothed_loss",
    "check_alibi_slopes", "check_ffn_parameters", "check_tokens_in_memory",
    "check_rope_scores", "check_wavelength_pair",
    "check_key_shifts", "check_ln_of_affine", "check_one_head", "check_relu_bias",
    "check_masked_attention", "check_split_merge",
    "check_accumulate", "check_all_reduce_bytes", "check_first_unclipped_step"
]
