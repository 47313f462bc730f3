"""The course's helpers for notebooks: the lecture's worked-example inputs, answer checks for exercises,
self-check quizzes and titled, labelled figures.
"""

from tmlib.course.checks import check_close, check_shape, tolerance_text
from tmlib.course.diagnostics import (
    check_causal, check_own_work, check_padding_invariance, check_rows_sum_to_one, check_stages, forbidden_references,
    module_stages, resolve_dotted
)
from tmlib.course.exercise_checks import (
    check_attention_bytes, check_attention_result, check_encoder_layer, check_feed_forward, check_feed_forward_result,
    check_layer_norm_result, check_multi_head_attention, check_multi_head_result, check_peak_learning_rate,
    check_kv_cache_bytes, check_learning_rate, check_merged_alignment, check_padding_fractions, check_smoothing_floor
)
from tmlib.course.examples import (
    ATTENTION_EXAMPLES, ATTENTION_EXAMPLE_1, ATTENTION_EXAMPLE_2, ATTENTION_EXAMPLE_3, AttentionExample,
    CROSS_ATTENTION_EXAMPLE, FFN_EXAMPLE, FeedForwardExample, LECTURE_PRINTED, LR_EXAMPLE, MHA_EXAMPLE_2,
    MHA_EXAMPLE_3, MultiHeadExample
)
from tmlib.course.listing import show_source
from tmlib.course.plotting import (
    alignment_panels, attention_heads, attention_heatmap, head_grid, mask_panels, positional_encoding_heatmap,
    power_law_plot
)
from tmlib.course.quiz import PAPER_QUIZ, Quiz, choice, numeric, paper_quiz_block

__all__ = [
    "show_source", "ATTENTION_EXAMPLES", "ATTENTION_EXAMPLE_1", "ATTENTION_EXAMPLE_2", "ATTENTION_EXAMPLE_3", "AttentionExample",
    "CROSS_ATTENTION_EXAMPLE", "FFN_EXAMPLE", "FeedForwardExample", "LECTURE_PRINTED", "LR_EXAMPLE",
    "MHA_EXAMPLE_2", "MHA_EXAMPLE_3", "MultiHeadExample", "PAPER_QUIZ", "Quiz", "alignment_panels",
    "attention_heads", "attention_heatmap", "check_causal", "check_close", "check_own_work", "check_padding_invariance",
    "check_rows_sum_to_one", "check_shape", "check_stages", "choice", "forbidden_references", "head_grid",
    "mask_panels", "module_stages", "resolve_dotted",
    "check_attention_bytes", "check_attention_result", "check_encoder_layer", "check_feed_forward", "check_feed_forward_result",
    "check_layer_norm_result", "check_multi_head_attention", "check_multi_head_result", "check_peak_learning_rate", "check_learning_rate", "check_merged_alignment",
    "check_kv_cache_bytes", "check_padding_fractions", "check_smoothing_floor", "numeric", "paper_quiz_block", "positional_encoding_heatmap", "power_law_plot", "tolerance_text"
]
