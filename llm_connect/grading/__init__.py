"""The Baseline Grading contract: results, judges, graders and the batch runtime."""

from ._base import AsyncJudge, BaselineGrader, GradingResult, Judge
from ._batch import RESULT_COLUMNS, ajudge_many, grade_many, judge_many, observation_for, run_rows
from ._compound import (
    PAIRWISE_RUBRIC,
    CascadeJudge,
    CascadeSummary,
    PairwiseJudge,
    PairwiseSummary,
    PanelAgreement,
    PanelJudge,
    consistency_rate,
)
from ._judges import (
    LLM_JUDGE_LOGPROB_RUBRIC,
    LLM_JUDGE_RUBRIC,
    LLM_JUDGE_RUBRIC_HASH,
    NORMALIZERS,
    EmbeddingSimilarityJudge,
    ExactMatchJudge,
    FunctionJudge,
    LLMJudge,
    PairedGrader,
    normalize_squad,
    split_references,
)
from ._parse import expected_label_value, find_json_objects, parse_score_reply

__all__ = [
    "LLM_JUDGE_LOGPROB_RUBRIC",
    "LLM_JUDGE_RUBRIC",
    "LLM_JUDGE_RUBRIC_HASH",
    "NORMALIZERS",
    "PAIRWISE_RUBRIC",
    "RESULT_COLUMNS",
    "AsyncJudge",
    "BaselineGrader",
    "CascadeJudge",
    "CascadeSummary",
    "EmbeddingSimilarityJudge",
    "ExactMatchJudge",
    "FunctionJudge",
    "GradingResult",
    "Judge",
    "LLMJudge",
    "PairedGrader",
    "PairwiseJudge",
    "PairwiseSummary",
    "PanelAgreement",
    "PanelJudge",
    "ajudge_many",
    "consistency_rate",
    "expected_label_value",
    "find_json_objects",
    "grade_many",
    "judge_many",
    "normalize_squad",
    "observation_for",
    "parse_score_reply",
    "run_rows",
    "split_references",
]
