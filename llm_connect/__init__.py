"""llm_connect: grade LLM answers with judges you can trust.

Grade a candidate's answers against a baseline by exact match, embedding
similarity, an LLM judge or a compound judge; record every outcome in a
quality ledger; calibrate the LLM judge against other judges and humans, and
measure its biases. Heavy dependencies (HTTP clients, llama.cpp, torch,
matplotlib, ipywidgets) are imported only where they are used.
"""

from .adapters import (
    AnthropicAdapter,
    LlamaCppAdapter,
    OpenAICompatibleAdapter,
    OpenAICompatibleEmbedder,
    SentenceTransformerEmbedder,
)
from .calibration import (
    CalibrationReport,
    JudgeCard,
    JudgeCardRegistry,
    agreement_table,
    calibrate,
    estimate_quality,
    labels_needed,
    plot_estimates,
    run_probes,
    score_items,
)
from .core import (
    AsyncEmbeddingAdapter,
    AsyncLLMAdapter,
    BudgetTracker,
    EmbeddingAdapter,
    LLMAdapter,
    LLMResponse,
    RunConfig,
    TokenLogprob,
)
from .errors import (
    AdapterError,
    BudgetExceededError,
    ConfigError,
    JudgeReplyError,
    LLMConnectError,
    LogprobsUnavailableError,
    MissingDependencyError,
    ValidationError,
)
from .frames import ledger_frame, observations_from_frame, paired_frame, record_labels, results_frame
from .grading import (
    LLM_JUDGE_RUBRIC_HASH,
    LOCAL_JUDGE_RUBRIC_HASH,
    BaselineGrader,
    CascadeJudge,
    ContainsJudge,
    EmbeddingSimilarityJudge,
    ExactMatchJudge,
    FunctionJudge,
    GradingResult,
    Judge,
    LLMJudge,
    PairedGrader,
    PairwiseJudge,
    PanelJudge,
    TokenF1Judge,
    ajudge_many,
    grade_many,
    judge_many,
)
from .pipelines import Pipeline, from_config
from .quality import QualityLedger, QualityObservation, is_stale
from .routing import RoutingDecision, evidence_table, route

__version__ = "0.1.0"

__all__ = [
    "LLM_JUDGE_RUBRIC_HASH",
    "LOCAL_JUDGE_RUBRIC_HASH",
    "AdapterError",
    "AnthropicAdapter",
    "AsyncEmbeddingAdapter",
    "AsyncLLMAdapter",
    "BaselineGrader",
    "BudgetExceededError",
    "BudgetTracker",
    "CalibrationReport",
    "CascadeJudge",
    "ConfigError",
    "ContainsJudge",
    "EmbeddingAdapter",
    "EmbeddingSimilarityJudge",
    "ExactMatchJudge",
    "FunctionJudge",
    "GradingResult",
    "Judge",
    "JudgeCard",
    "JudgeCardRegistry",
    "JudgeReplyError",
    "LLMAdapter",
    "LLMConnectError",
    "LLMJudge",
    "LLMResponse",
    "LlamaCppAdapter",
    "LogprobsUnavailableError",
    "MissingDependencyError",
    "OpenAICompatibleAdapter",
    "OpenAICompatibleEmbedder",
    "PairedGrader",
    "PairwiseJudge",
    "PanelJudge",
    "Pipeline",
    "QualityLedger",
    "QualityObservation",
    "RoutingDecision",
    "RunConfig",
    "SentenceTransformerEmbedder",
    "TokenF1Judge",
    "TokenLogprob",
    "ValidationError",
    "agreement_table",
    "ajudge_many",
    "calibrate",
    "estimate_quality",
    "evidence_table",
    "from_config",
    "grade_many",
    "is_stale",
    "judge_many",
    "labels_needed",
    "ledger_frame",
    "observations_from_frame",
    "paired_frame",
    "plot_estimates",
    "record_labels",
    "results_frame",
    "route",
    "run_probes",
    "score_items",
]
