"""llm_connect: grade LLM answers with judges you can trust.

Grade a candidate's answers against a baseline by exact match, embedding
similarity, an LLM judge or a compound judge; record every outcome in a
quality ledger; calibrate the LLM judge against other judges and humans, and
measure its biases.

``import llm_connect`` is light: the exception tree and the core types load at
once, every other name on first use (PEP 562), so a script that only needs
``QualityLedger`` never pays for pandas, the judges or the calibration floor, and
heavy dependencies (HTTP clients, llama.cpp, torch, matplotlib, ipywidgets) load
only where they are used. Type checkers and IDEs see every name through the
``TYPE_CHECKING`` imports below.
"""


import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

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
    JudgeAbstained,
    JudgeReplyError,
    LLMConnectError,
    LogprobsUnavailableError,
    MissingDependencyError,
    ValidationError,
)

if _TYPE_CHECKING:
    from .adapters import (
        AnthropicAdapter,
        LlamaCppAdapter,
        OpenAICompatibleAdapter,
        OpenAICompatibleEmbedder,
        SentenceTransformerEmbedder,
        TransformersAdapter,
        local_adapter,
    )
    from .alignment import Alignment, align
    from .calibration import (
        CalibrationReport,
        agreement_table,
        calibrate,
        compare_leaderboards,
        run_probes,
        score_items,
    )
    from .cards import JudgeCard, JudgeCardRegistry
    from .distributed import SharedBudget
    from .frames import (
        ledger_frame,
        observations_from_frame,
        paired_frame,
        record_labels,
        results_frame,
    )
    from .grading import (
        LLM_JUDGE_RUBRIC_HASH,
        LOCAL_JUDGE_RUBRIC_HASH,
        BaselineGrader,
        ContainsJudge,
        EmbeddingSimilarityJudge,
        EpochReliability,
        EscalationJudge,
        ExactMatchJudge,
        Example,
        FunctionJudge,
        GradingResult,
        GroundednessJudge,
        Judge,
        LLMJudge,
        PairedGrader,
        PairwiseJudge,
        PanelJudge,
        Rubric,
        SelectiveCascade,
        SelectiveJudge,
        TokenF1Judge,
        TrajectoryMatchJudge,
        ajudge_many,
        cascade,
        epoch_reliability,
        grade_many,
        judge_many,
        schedule_battles,
        tournament,
    )
    from .labelling import Labeller
    from .pipelines import Pipeline
    from .quality import (
        ParquetLedger,
        QualityLedger,
        QualityObservation,
    )
    from .routing import (
        RoutingDecision,
        evidence_table,
        route,
    )
    from .stats import (
        estimate_quality,
        labels_needed,
        leaderboard,
        length_controlled_win_rate,
        style_effects,
    )
    from .views import plot_estimates

__version__ = "0.1.0"

# Where each lazily loaded name lives (the module is imported on first access).
_LAZY: dict[str, str] = {
    "SelectiveJudge": ".grading",
    "SelectiveCascade": ".grading",
    "cascade": ".grading",
    "Rubric": ".grading",
    "Example": ".grading",
    "align": ".alignment",
    "Alignment": ".alignment",
    "style_effects": ".stats",
    "SharedBudget": ".distributed",
    "AnthropicAdapter": ".adapters",
    "LlamaCppAdapter": ".adapters",
    "TransformersAdapter": ".adapters",
    "local_adapter": ".adapters",
    "OpenAICompatibleAdapter": ".adapters",
    "OpenAICompatibleEmbedder": ".adapters",
    "SentenceTransformerEmbedder": ".adapters",
    "CalibrationReport": ".calibration",
    "JudgeCard": ".cards",
    "JudgeCardRegistry": ".cards",
    "Labeller": ".labelling",
    "agreement_table": ".calibration",
    "calibrate": ".calibration",
    "compare_leaderboards": ".calibration",
    "estimate_quality": ".stats",
    "labels_needed": ".stats",
    "leaderboard": ".stats",
    "length_controlled_win_rate": ".stats",
    "plot_estimates": ".views",
    "run_probes": ".calibration",
    "score_items": ".calibration",
    "ledger_frame": ".frames",
    "observations_from_frame": ".frames",
    "paired_frame": ".frames",
    "record_labels": ".frames",
    "results_frame": ".frames",
    "BaselineGrader": ".grading",
    "ContainsJudge": ".grading",
    "EmbeddingSimilarityJudge": ".grading",
    "EpochReliability": ".grading",
    "EscalationJudge": ".grading",
    "ExactMatchJudge": ".grading",
    "FunctionJudge": ".grading",
    "GradingResult": ".grading",
    "GroundednessJudge": ".grading",
    "Judge": ".grading",
    "LLMJudge": ".grading",
    "LLM_JUDGE_RUBRIC_HASH": ".grading",
    "LOCAL_JUDGE_RUBRIC_HASH": ".grading",
    "PairedGrader": ".grading",
    "PairwiseJudge": ".grading",
    "PanelJudge": ".grading",
    "TokenF1Judge": ".grading",
    "TrajectoryMatchJudge": ".grading",
    "ajudge_many": ".grading",
    "epoch_reliability": ".grading",
    "grade_many": ".grading",
    "judge_many": ".grading",
    "schedule_battles": ".grading",
    "tournament": ".grading",
    "Pipeline": ".pipelines",
    "ParquetLedger": ".quality",
    "QualityLedger": ".quality",
    "QualityObservation": ".quality",
    "RoutingDecision": ".routing",
    "evidence_table": ".routing",
    "route": ".routing",
}

__all__ = [
    "LLM_JUDGE_RUBRIC_HASH",
    "LOCAL_JUDGE_RUBRIC_HASH",
    "AdapterError",
    "Alignment",
    "AnthropicAdapter",
    "AsyncEmbeddingAdapter",
    "AsyncLLMAdapter",
    "BaselineGrader",
    "BudgetExceededError",
    "BudgetTracker",
    "CalibrationReport",
    "ConfigError",
    "ContainsJudge",
    "EmbeddingAdapter",
    "EmbeddingSimilarityJudge",
    "EpochReliability",
    "EscalationJudge",
    "ExactMatchJudge",
    "Example",
    "FunctionJudge",
    "GradingResult",
    "GroundednessJudge",
    "Judge",
    "JudgeAbstained",
    "JudgeCard",
    "JudgeCardRegistry",
    "JudgeReplyError",
    "LLMAdapter",
    "LLMConnectError",
    "LLMJudge",
    "LLMResponse",
    "Labeller",
    "LlamaCppAdapter",
    "LogprobsUnavailableError",
    "MissingDependencyError",
    "OpenAICompatibleAdapter",
    "OpenAICompatibleEmbedder",
    "PairedGrader",
    "PairwiseJudge",
    "PanelJudge",
    "ParquetLedger",
    "Pipeline",
    "QualityLedger",
    "QualityObservation",
    "RoutingDecision",
    "Rubric",
    "RunConfig",
    "SelectiveCascade",
    "SelectiveJudge",
    "SentenceTransformerEmbedder",
    "SharedBudget",
    "TokenF1Judge",
    "TokenLogprob",
    "TrajectoryMatchJudge",
    "TransformersAdapter",
    "ValidationError",
    "agreement_table",
    "ajudge_many",
    "align",
    "calibrate",
    "cascade",
    "compare_leaderboards",
    "epoch_reliability",
    "estimate_quality",
    "evidence_table",
    "grade_many",
    "judge_many",
    "labels_needed",
    "leaderboard",
    "ledger_frame",
    "length_controlled_win_rate",
    "local_adapter",
    "observations_from_frame",
    "paired_frame",
    "plot_estimates",
    "record_labels",
    "results_frame",
    "route",
    "run_probes",
    "schedule_battles",
    "score_items",
    "style_effects",
    "tournament",
]



def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_connect' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders: what ``dir(llm_connect)`` and tab
    completion offer, neither the submodules nor the private helpers."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
