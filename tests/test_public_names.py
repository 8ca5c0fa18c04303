"""Every public name keeps working from where it was imported before the redesign (issue 24).

``PUBLIC`` is each public module's ``__all__`` as it stood before ``calibration/`` was split into
``stats/``, ``calibration/`` and ``views/`` (commit b5e8401): a compatibility contract, so moving
code never breaks an import a user wrote. New names may be added; none of these may go.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC: dict[str, str] = {
    'llm_connect': (
        'AdapterError AnthropicAdapter AsyncEmbeddingAdapter AsyncLLMAdapter BaselineGrader '
        'BudgetExceededError BudgetTracker CalibrationReport CascadeJudge ConfigError ContainsJudge '
        'EmbeddingAdapter EmbeddingSimilarityJudge EpochReliability ExactMatchJudge FunctionJudge '
        'GradingResult Judge JudgeCard JudgeCardRegistry JudgeReplyError LLMAdapter LLMConnectError LLMJudge '
        'LLMResponse LLM_JUDGE_RUBRIC_HASH LOCAL_JUDGE_RUBRIC_HASH Labeller LlamaCppAdapter '
        'LogprobsUnavailableError MissingDependencyError OpenAICompatibleAdapter OpenAICompatibleEmbedder '
        'PairedGrader PairwiseJudge PanelJudge ParquetLedger Pipeline QualityLedger QualityObservation '
        'RoutingDecision RunConfig SentenceTransformerEmbedder TokenF1Judge TokenLogprob ValidationError '
        'agreement_table ajudge_many calibrate compare_leaderboards epoch_reliability estimate_quality '
        'evidence_table from_config grade_many is_stale judge_many labels_needed leaderboard ledger_frame '
        'length_controlled_win_rate observations_from_frame paired_frame plot_estimates record_labels '
        'results_frame route run_probes schedule_battles score_items tournament'
    ),
    'llm_connect.adapters': (
        'AnthropicAdapter ChatHTTPAdapter HTTPAdapter LlamaCppAdapter OpenAICompatibleAdapter '
        'OpenAICompatibleEmbedder Price ResponseCache SentenceTransformerEmbedder '
        'default_embedding_model_path default_gguf_path is_loopback_url parse_retry_after pricing '
        'register_price'
    ),
    'llm_connect.adapters.pricing': (
        'DEFAULT_PRICES Price cost_usd price_for register_price registered_prices'
    ),
    'llm_connect.batch': (
        'BUDGET_EXHAUSTED BatchPlan GRADE_COLUMNS INTERRUPTED ITEM_COLUMNS LEDGER_ERROR PIPELINE_COLUMNS '
        'PIPELINE_EXTRA_COLUMNS RESULT_COLUMNS RESULT_FRAME_COLUMNS arun_batch arun_rows attach_rows '
        'batch_budget check_ledger column_values describe_error is_missing item_text items_frame '
        'ledger_columns note_budget plain_item_id progress_bar record_row reference_text row_for_exception '
        'row_item_id run_batch run_rows'
    ),
    'llm_connect.calibration': (
        'AgreementTable BiasReport CalibrationReport DEFAULT_INJECTION ESTIMATE_METHODS Estimate JudgeCard '
        'JudgeCardRegistry JudgmentViewer Labeller LeaderboardComparison LengthControlled LengthEffect PROBES '
        'PairAgreement PairwiseReport ProbeEffect ProbeResult STATISTICS ScoredItems SelfPreference '
        'agreement_table battles bootstrap_ci calibrate calibrate_pairwise card_from_scores '
        'compare_leaderboards disagreements estimate_quality judge_items judge_verdict '
        'labels_needed leaderboard length_controlled_scores length_controlled_win_rate length_effect '
        'length_profile load_items model_family ols pad_with_filler pair_agreement paired_shift parse_labels '
        'parse_preferences perturb_items plant_injection plot_agreement_heatmap plot_bias_forest '
        'plot_estimates plot_judge_scatter plot_leaderboard plot_reliability plot_score_vs_length '
        'plot_threshold_sweep preference_codes probe_judge registry_path reliability_table '
        'run_probes score_items score_judges self_preference text_features threshold_sweep to_markdown'
    ),  # judgment_records, read_judgments, write_judgments: the viewer's records, now in llm_connect.views
    'llm_connect.cli': (
        'CALIBRATE_STATS ESTIMATE_STATS MAX_AGE_DAYS_MAX N_BOOT_MAX UsageError build_parser main '
        'parse_requirement'
    ),
    'llm_connect.core': (
        'AsyncEmbeddingAdapter AsyncLLMAdapter BudgetReservation BudgetTracker EmbeddingAdapter LLMAdapter '
        'LLMResponse RunConfig TokenLogprob active_budgets as_budget budget_scope'
    ),
    'llm_connect.distributed': (
        'RESUMED RateLimit grade_dataset'
    ),
    'llm_connect.errors': (
        'AdapterConnectionError AdapterError AdapterTimeoutError AuthenticationError BadRequestError '
        'BudgetExceededError ConfigError EmbeddingShapeError JudgeReplyError LLMConnectError '
        'LogprobsUnavailableError MalformedResponseError MissingDependencyError RateLimitError ServerError '
        'UncalibratedJudgeError ValidationError'
    ),
    'llm_connect.frames': (
        'HUMAN_GRADER_ID LEDGER_COLUMNS PAIRED_COLUMNS RESULT_FRAME_COLUMNS SKIP_GRADER_ID UNDO_GRADER_ID '
        'ledger_frame observations_from_frame paired_frame record_labels results_frame'
    ),
    'llm_connect.grading': (
        'AsyncJudge BaselineGrader CascadeJudge CascadeSummary ContainsJudge EPOCH_COLUMNS '
        'EmbeddingSimilarityJudge EpochReliability ExactMatchJudge FunctionJudge GRADE_COLUMNS GradingResult '
        'Judge JudgeAbilities JudgeBase LLMJudge LLM_JUDGE_LOGPROB_RUBRIC LLM_JUDGE_RUBRIC '
        'LLM_JUDGE_RUBRIC_HASH LOCAL_JUDGE_INSTRUCTIONS LOCAL_JUDGE_RUBRIC LOCAL_JUDGE_RUBRIC_HASH '
        'NORMALIZERS PAIRWISE_RUBRIC PairedGrader PairwiseJudge PairwiseSummary PanelAgreement PanelJudge '
        'REDUCERS RESULT_COLUMNS TOURNAMENT_COLUMNS TokenF1Judge VERDICT_JSON_SCHEMA ajudge_many '
        'consistency_rate epoch_reliability expected_label_value find_json_objects grade_many judge_abilities '
        'judge_many normalize_squad observation_for parse_score_reply reseed run_rows schedule_battles '
        'split_references supports_async token_f1 tournament winner_of'
    ),
    'llm_connect.loopback': (
        'FAULT_KINDS LoopbackServer RecordedRequest default_reply main'
    ),
    'llm_connect.pipelines': (
        'BooleanScale CONNECTIONS CategoricalScale ContinuousScale JudgeUnit LLMUnit Layer LikertScale '
        'MajorityPool MaxPool MeanPool MedianPool PIPELINE_COLUMNS PairwiseUnit Pipeline PipelineJudge '
        'PipelineResult PoolUnit Scale Trace TraceRecord UNIT_TYPES Unit UnitOutput VerifyUnit '
        'WeightedMeanPool from_config'
    ),
    'llm_connect.quality': (
        'BaseLedger DEDUPE_TAGS MAX_LINE_BYTES ParquetLedger QualityLedger QualityObservation is_stale '
        'open_ledger'
    ),
    'llm_connect.routing': (
        'EVIDENCE_COLUMNS RoutingDecision RoutingPolicy evidence_table grader_keys route'
    ),
    'llm_connect.testing': (
        'Call DeterministicEmbedder LoopbackServer ScriptedAdapter'
    ),
    'llm_connect.testing.loopback': (
        'FAULT_KINDS LoopbackServer RecordedRequest default_reply'
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_still_imports_from_where_it_did(module):
    mod = importlib.import_module(module)
    names = PUBLIC[module].split()
    assert [n for n in names if not hasattr(mod, n)] == []
    assert [n for n in names if n not in getattr(mod, "__all__", names)] == []


def test_star_import_of_calibration_gives_the_plots_lazily():
    """``from llm_connect.calibration import *`` still gives the plot names, which live in views."""
    code = (
        "import sys\n"
        "from llm_connect.calibration import *\n"
        "assert callable(plot_judge_scatter) and callable(plot_leaderboard) and callable(JudgmentViewer)\n"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # the names resolve without drawing anything
