"""The Baseline Grading contract: results, judges, graders and the runner.

=================================  ==========================================================
what                               functions and classes
=================================  ==========================================================
the contract                       :class:`Judge`, :class:`AsyncJudge`, :class:`JudgeBase`,
                                   :class:`GradingResult`, :func:`judge_abilities`
rubrics as data                    :class:`Rubric`, :class:`Example` (criteria, scale, worked examples)
plain judges                       :class:`ExactMatchJudge`, :class:`ContainsJudge`,
                                   :class:`TokenF1Judge`, :class:`EmbeddingSimilarityJudge`,
                                   :class:`LLMJudge`, :class:`FunctionJudge`
agent runs (tool calls)            :class:`TrajectoryMatchJudge` (strict, unordered, subset, superset)
answers grounded in documents      :class:`GroundednessJudge` (the share of claims the item's context supports)
compound judges                    :class:`PairwiseJudge` (both orders), :class:`PanelJudge`,
                                   :class:`EscalationJudge` (a fixed band, no guarantee),
                                   :func:`consistency_rate`; their base
                                   :class:`WrapperJudge` (a judge made of other judges)
selective judges (a guaranteed     :class:`SelectiveJudge` (abstains below a calibrated cut-off),
agreement with people)             :func:`cascade` -> :class:`SelectiveCascade`,
                                   :class:`SelectiveCascadeSummary`, :class:`ConfidenceJudge`,
                                   :func:`confidence_sources`, :func:`one_row_per_cluster`
many items at once                 :func:`judge_many`, :func:`ajudge_many`, :func:`grade_many`,
                                   :class:`PairedGrader`, :class:`BaselineGrader`
repeated judging (epochs)          ``judge_many(..., epochs=k, reducer=...)``, :data:`REDUCERS`,
                                   :data:`EPOCH_COLUMNS`, :func:`reseed`,
                                   :func:`epoch_reliability` -> :class:`EpochReliability`
tournaments (battles for           :func:`tournament`, :func:`schedule_battles`,
leaderboards)                      :func:`winner_of`, :data:`TOURNAMENT_COLUMNS`
=================================  ==========================================================

:func:`tournament`, :func:`schedule_battles`, :func:`epoch_reliability` and
:class:`EpochReliability` are also exported from ``llm_connect``; the leaderboards they feed
are fitted in :mod:`llm_connect.stats` (:func:`~llm_connect.stats.leaderboard`), from the judged pairs that
:func:`~llm_connect.calibration.battle_outcomes` reads.
"""

from ._base import (
    AsyncJudge,
    BaselineGrader,
    GradingResult,
    Judge,
    JudgeAbilities,
    JudgeBase,
    judge_abilities,
    observation_for,
    supports_async,
)
from ._confidence import CONFIDENCE_SOURCES, confidence_sources
from ._confidence_judge import ConfidenceJudge
from ._embedding import EmbeddingSimilarityJudge
from ._epochs import EPOCH_COLUMNS, REDUCERS, EpochReliability, epoch_reliability, reseed
from ._escalation import EscalationJudge, EscalationSummary
from ._function import FunctionJudge
from ._groundedness import GroundednessJudge
from ._human_labels import one_row_per_cluster
from ._judge_many import RESULT_COLUMNS, ajudge_many, judge_many
from ._lexical import (
    NORMALIZERS,
    ContainsJudge,
    ExactMatchJudge,
    TokenF1Judge,
    normalize_squad,
    split_references,
    token_f1,
)
from ._llm_judge import (
    LLM_JUDGE_LOGPROB_RUBRIC,
    LLM_JUDGE_RUBRIC,
    LLM_JUDGE_RUBRIC_HASH,
    LOCAL_JUDGE_INSTRUCTIONS,
    LOCAL_JUDGE_RUBRIC,
    LOCAL_JUDGE_RUBRIC_HASH,
    VERDICT_JSON_SCHEMA,
    LLMJudge,
)
from ._paired import GRADE_COLUMNS, PairedGrader, grade_many
from ._pairwise import PAIRWISE_RUBRIC, PairwiseJudge, PairwiseSummary, consistency_rate
from ._panel import PanelAgreement, PanelJudge
from ._parse import expected_label_value, find_json_objects, parse_score_reply
from ._rubric import Example, Rubric
from ._selective import SelectiveJudge
from ._selective_cascade import SelectiveCascade, cascade
from ._selective_summary import SelectiveCascadeSummary
from ._tournament import TOURNAMENT_COLUMNS, schedule_battles, tournament, winner_of
from ._trajectory import TOOL_ARGS_MODES, TRAJECTORY_MODES, TrajectoryMatchJudge
from ._wrapper import WrapperJudge

__all__ = [
    "CONFIDENCE_SOURCES",
    "EPOCH_COLUMNS",
    "GRADE_COLUMNS",
    "LLM_JUDGE_LOGPROB_RUBRIC",
    "LLM_JUDGE_RUBRIC",
    "LLM_JUDGE_RUBRIC_HASH",
    "LOCAL_JUDGE_INSTRUCTIONS",
    "LOCAL_JUDGE_RUBRIC",
    "LOCAL_JUDGE_RUBRIC_HASH",
    "NORMALIZERS",
    "PAIRWISE_RUBRIC",
    "REDUCERS",
    "RESULT_COLUMNS",
    "TOOL_ARGS_MODES",
    "TOURNAMENT_COLUMNS",
    "TRAJECTORY_MODES",
    "VERDICT_JSON_SCHEMA",
    "AsyncJudge",
    "BaselineGrader",
    "ConfidenceJudge",
    "ContainsJudge",
    "EmbeddingSimilarityJudge",
    "EpochReliability",
    "EscalationJudge",
    "EscalationSummary",
    "ExactMatchJudge",
    "Example",
    "FunctionJudge",
    "GradingResult",
    "GroundednessJudge",
    "Judge",
    "JudgeAbilities",
    "JudgeBase",
    "LLMJudge",
    "PairedGrader",
    "PairwiseJudge",
    "PairwiseSummary",
    "PanelAgreement",
    "PanelJudge",
    "Rubric",
    "SelectiveCascade",
    "SelectiveCascadeSummary",
    "SelectiveJudge",
    "TokenF1Judge",
    "TrajectoryMatchJudge",
    "WrapperJudge",
    "ajudge_many",
    "cascade",
    "confidence_sources",
    "consistency_rate",
    "epoch_reliability",
    "expected_label_value",
    "find_json_objects",
    "grade_many",
    "judge_abilities",
    "judge_many",
    "normalize_squad",
    "observation_for",
    "one_row_per_cluster",
    "parse_score_reply",
    "reseed",
    "schedule_battles",
    "split_references",
    "supports_async",
    "token_f1",
    "tournament",
    "winner_of",
]
