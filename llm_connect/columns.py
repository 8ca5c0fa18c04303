"""The columns of a result frame: what every judging entry point adds to its items, one name per meaning.

``judge_many`` / ``ajudge_many`` and ``calibrate`` add :data:`RESULT_COLUMNS` (then the judge's own
columns); ``grade_many`` adds :data:`GRADE_COLUMNS`; a pipeline (``Pipeline.run_many``, or
``judge_many(pipeline.as_judge())``) adds :data:`PIPELINE_EXTRA_COLUMNS` after the result columns
(:data:`PIPELINE_COLUMNS`); :func:`llm_connect.frames.results_frame` turns ``GradingResult`` objects into
:data:`RESULT_FRAME_COLUMNS`. A judge's own cost is ``judge_cost_usd`` in every result frame
(``cost_usd`` in a ledger frame is the candidate's).

The tuples live here, apart from the runner (:mod:`llm_connect.runner`) that fills rows and from the
items (:mod:`llm_connect.items`) those rows are of, so that a reader of a frame (``frames``, ``routing``,
the views) learns its columns without importing what runs judges. This module imports nothing.
"""

from __future__ import annotations

__all__ = [
    "GRADE_COLUMNS",
    "PIPELINE_COLUMNS",
    "PIPELINE_EXTRA_COLUMNS",
    "RESULT_COLUMNS",
    "RESULT_FRAME_COLUMNS",
]

#: The columns of one judgment, in every result frame (``judge_many``, ``grade_many``,
#: ``Pipeline.run_many``). ``judge_cost_usd`` is what the judging itself cost (every call
#: the judge made) and ``judge_tokens_in`` / ``judge_tokens_out`` the tokens those calls used (once, under
#: these names: a ledger's ``tokens_in`` is the candidate's); ``judge_tokens_cached`` is
#: how many of ``judge_tokens_in`` the provider read from its prompt cache (priced at the cached rate in
#: ``judge_cost_usd``); a candidate's own cost is ``candidate_cost_usd`` (``grade_many``).
RESULT_COLUMNS = (
    "quality_score",
    "notes",
    "grader_id",
    "status",
    "error",
    "latency_ms",
    "judge_tokens_cached",
    "judge_tokens_in",
    "judge_tokens_out",
    "judge_cost_usd",
)
#: ``grade_many``: the generated texts, the judge's result, then the candidate's own usage.
GRADE_COLUMNS = (
    "baseline",
    "candidate",
    *RESULT_COLUMNS,
    "candidate_adapter_id",
    "candidate_model_id",
    "candidate_cost_usd",
    "candidate_latency_ms",
    "candidate_tokens_in",
    "candidate_tokens_out",
    "baseline_cost_usd",
)
#: What a pipeline adds to a judge's result columns (``Pipeline.run_many`` and
#: ``judge_many(pipeline.as_judge())`` alike).
PIPELINE_EXTRA_COLUMNS = ("verdict", "passed", "calls", "trace")
#: ``Pipeline.run_many``: a judge's result columns, then the pipeline's own.
PIPELINE_COLUMNS = (*RESULT_COLUMNS, *PIPELINE_EXTRA_COLUMNS)
#: ``frames.results_frame``: GradingResult objects as rows -- the texts, both sides' ids, the
#: candidate's own usage, then the judge's (named as in ``RESULT_COLUMNS``).
RESULT_FRAME_COLUMNS = (
    "grader_id",
    "quality_score",
    "notes",
    "baseline",
    "candidate",
    "baseline_adapter_id",
    "baseline_model_id",
    "candidate_adapter_id",
    "candidate_model_id",
    "candidate_tokens_in",
    "candidate_tokens_out",
    "candidate_cost_usd",
    "candidate_latency_ms",
    "judge_tokens_in",
    "judge_tokens_out",
    "judge_cost_usd",
    "latency_ms",
)
