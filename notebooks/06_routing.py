# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6 · Adaptive routing from the ledger
#
# Which model should answer the next question of a task? The cheapest one that is
# *good enough* — but "good enough" measured on a handful of lucky observations
# is not good enough. `llm_connect.routing.route(ledger, task_type, threshold=...)`
# picks the cheapest adapter whose mean quality on recent, non-stale
# observations meets the threshold **at the lower end of a confidence interval**
# (a percentile bootstrap; the Wilson interval when every score is 0 or 1, so that
# 95 passes out of 95 do not count as proof of perfection), over at least
# `min_observations`; the decision carries the evidence table it was made from.
#
# Here we build a ledger by grading four pretend models of different quality and
# price on the QA questions, then route.

# %%
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from llm_connect import QualityLedger

import tutorial_helpers

qa = pd.read_json(Path("../data/qa_calibration.jsonl"), lines=True, dtype=False)
workdir = Path(tempfile.mkdtemp(prefix="llm-connect-routing-"))
ledger = QualityLedger(workdir / "ledger.jsonl")

# %% [markdown]
# ## Four pretend models
#
# The candidate models are stand-ins: no offline model answers this well, and
# routing needs models of known, different quality to choose between. Each is a
# `ScriptedAdapter` whose reply function answers a question with its first
# reference answer on a seeded share of the questions and with the answer to
# another question otherwise (it reads the questions and references, never a
# label); `cost_per_call` is its price. The baseline is a "reference model" that
# answers with every acceptable reference. The judge is real: exact match with
# SQuAD normalisation, so an observation's quality is 1 for a right answer and 0
# for a wrong one. (Any judge works; the last section records the embedded LLM
# judge's scores, with its rubric hash.)

# %%
from functools import partial

answer_model = partial(tutorial_helpers.answer_model, qa)   # answer_model(accuracy, name): a reply function
reference_model = tutorial_helpers.reference_model(qa)      # every acceptable answer, "|"-separated

# %%
from llm_connect.testing import ScriptedAdapter

MODELS = {  # adapter_id: (share answered right, USD per call)
    "local:tiny": (0.45, 0.0),
    "cloud:small": (0.85, 0.00005),
    "cloud:medium": (0.97, 0.0003),
    "cloud:large": (0.98, 0.002),
}
candidates = {adapter_id: ScriptedAdapter(answer_model(share, adapter_id), adapter_id=adapter_id,
                                          model_id=adapter_id.split(":")[1] + "-model", cost_per_call=cost)
              for adapter_id, (share, cost) in MODELS.items()}
reference = ScriptedAdapter(reference_model, adapter_id="reference", model_id="references")

# %% [markdown]
# ## Grading into the ledger
#
# `grade_many(grader, baseline_adapter, candidate_adapter, prompts, ledger=...,
# task_type=...)` asks both adapters every prompt, grades the pair, and appends
# each scored row to the ledger as an observation of the *candidate* (its cost,
# latency and tokens, the judge's score, and the grader id and item id in
# `tags`).

# %%
from llm_connect import ExactMatchJudge, PairedGrader, grade_many

questions = qa.drop_duplicates("prompt")[["id", "prompt"]]
grader = PairedGrader(ExactMatchJudge(normalizer="squad", reference_sep="|"), ledger=ledger, task_type="qa")
runs = {adapter_id: grade_many(grader, reference, adapter, questions, progress=False)
        for adapter_id, adapter in candidates.items()}
runs["cloud:small"][["id", "prompt", "candidate", "quality_score", "candidate_cost_usd"]].head()

# %%
# NBVAL_CHECK_OUTPUT
print(len(questions), "questions;", len(ledger.read_all()), "observations in the ledger")
for adapter_id, run in runs.items():
    print(f"{adapter_id:13} right {run['quality_score'].mean():.3f}  "
          f"spent ${run['candidate_cost_usd'].sum():.4f}  {run.attrs['counts']}")

# %% [markdown]
# ## The evidence, and the decision
#
# `evidence_table(ledger, task_type)` is what `route` decides on: per adapter,
# the observations used (`n`: recent and not stale), the mean quality and its
# interval, mean cost and latency, and whether it is eligible and why.

# %%
from llm_connect.routing import RoutingPolicy, evidence_table, route

evidence = evidence_table(ledger, "qa", policy=RoutingPolicy(threshold=0.9, min_observations=20))
evidence

# %%
# NBVAL_CHECK_OUTPUT
COLUMNS = ["adapter_id", "n", "mean_quality", "quality_low", "quality_high", "mean_cost_usd", "eligible", "reason"]
print(evidence[COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.4g}"))

# %%
# NBVAL_CHECK_OUTPUT
for threshold in (0.5, 0.9, 0.975):
    decision = route(ledger, "qa", threshold=threshold, min_observations=20)
    print(f"threshold {threshold}: {decision.adapter_id}\n    {decision.reason}")

# %% [markdown]
# Read the three decisions against the table:
#
# * at **0.5** even `cloud:small` qualifies, and it is the cheapest that does
#   (`local:tiny` is free, but its interval lies well below 0.5);
# * at **0.9** `cloud:small` is out — its mean is 0.84 — and `cloud:medium` is
#   the cheapest whose *lower bound* clears 0.9;
# * at **0.975** the lower bounds matter: `cloud:large`'s mean is 0.99, but 95
#   observations cannot show with 95% confidence that it is above 0.975, so the
#   router refuses to pretend and returns no adapter, saying why. Collect more
#   evidence, or lower the bar.
#
# The decision also shows itself as a table in a notebook:

# %%
route(ledger, "qa", threshold=0.9, min_observations=20)

# %%
import matplotlib.pyplot as plt

by_cost = evidence.sort_values("mean_cost_usd").reset_index(drop=True)
fig, ax = plt.subplots(figsize=(7, 4))
ax.errorbar(by_cost.index, by_cost["mean_quality"], fmt="o", capsize=5,
            yerr=[by_cost["mean_quality"] - by_cost["quality_low"], by_cost["quality_high"] - by_cost["mean_quality"]])
ax.axhline(0.9, color="tab:red", linestyle="--", linewidth=1, label="threshold 0.9")
ax.set_xticks(by_cost.index, labels=[f"{a}\n${c * 1000:.2f} per 1k calls"
                                     for a, c in zip(by_cost["adapter_id"], by_cost["mean_cost_usd"], strict=True)])
ax.set_ylabel("mean quality, 95% interval")
ax.set_title("routing evidence for task type 'qa' (cheapest on the left)")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# ## Too little evidence, and old evidence
#
# An adapter with fewer than `min_observations` is never chosen, however good it
# looks; and observations older than `max_age` (30 days by default) do not count,
# so a model that changed behind its API name cannot ride on last quarter's
# scores. `now=` lets you ask what the router would say on another day.

# %%
# NBVAL_CHECK_OUTPUT
newcomer = ScriptedAdapter(answer_model(1.0, "cloud:new"), adapter_id="cloud:new", model_id="new-model",
                           cost_per_call=0.00001)
grade_many(grader, reference, newcomer, questions.head(10), progress=False)
print(route(ledger, "qa", threshold=0.9, min_observations=20).adapter_id,
      "| cloud:new:", evidence_table(ledger, "qa").set_index("adapter_id").loc["cloud:new", "reason"])

later = datetime.now(UTC) + timedelta(days=45)
decision = route(ledger, "qa", threshold=0.9, min_observations=20, now=later)
print(decision.adapter_id, "|", sorted(set(decision.evidence["reason"])))

# %% [markdown]
# ## Routing on answers you already have: `judge_many`
#
# When the answers exist already (a log, an evaluation set), `judge_many` with a
# ledger records them the same way; the `candidate_model` column names each
# answer's model. The QA set's seven pretend models, judged by exact match, all
# fall far below 0.8 — exact match rejects most correct sentences — so nothing is
# routed, and the reason says so.

# %%
from llm_connect import judge_many

judge_many(ExactMatchJudge(normalizer="squad", reference_sep="|"), qa, progress=False,
           ledger=ledger, task_type="qa-logged")
evidence_table(ledger, "qa-logged")[["adapter_id", "n", "mean_quality", "quality_low", "eligible"]].round(3)

# %%
# NBVAL_CHECK_OUTPUT
decision = route(ledger, "qa-logged", threshold=0.8, min_observations=20)
print(decision.adapter_id, "|", decision.reason[:60])

# %% [markdown]
# ## A second judge in the same ledger
#
# A better judge would give the router better evidence — but which judge is
# better is a question for calibration (notebook 3), and the ledger must never
# mix their scores. Here the embedded LLM judge (`LLMJudge(LlamaCppAdapter())`,
# SmolLM2-135M through llama.cpp, offline) grades a seeded sample of 28 of the
# same answers into the same task type. Every observation carries the judge's
# `grader_id`, its rubric hash and the item's id in `tags`.

# %%
from llm_connect import LLMJudge
from llm_connect.adapters import LlamaCppAdapter

llm = LLMJudge(LlamaCppAdapter(), seed=0)
logged = judge_many(llm, qa.sample(28, random_state=0), progress=False, ledger=ledger, task_type="qa-logged")
print(logged["status"].value_counts().to_dict())
observation = next(o for o in ledger.by_task_type("qa-logged") if o.tags["grader_id"] == "llm-judge")
{key: observation.tags.get(key) for key in ("grader_id", "rubric_hash", "item_id")}

# %% [markdown]
# Now two judges have scored `qa-logged`. Their scores are on different scales
# and were never checked against each other, so `route` refuses to pool them
# and names them; `grader_id=` chooses one:

# %%
from llm_connect.errors import ValidationError

try:
    route(ledger, "qa-logged", threshold=0.8, min_observations=20)
except ValidationError as exc:
    print("refused:", exc)

# %%
evidence_table(ledger, "qa-logged", grader_id="llm-judge")[
    ["adapter_id", "grader_id", "n", "mean_quality", "quality_low", "eligible", "reason"]].round(3)

# %% [markdown]
# The LLM judge's evidence is split over seven models, a few observations each —
# under `min_observations`, so no model is eligible on it, however good its mean
# looks. Before routing on any judge's scores, calibrate it (notebook 3); with
# human labels in the ledger, `route(..., human="human")` decides on estimates
# that stay valid however biased the judge is, and `require_calibrated=True`
# refuses a judge without a card (notebook 7).

# %%
final = route(ledger, "qa", threshold=0.9, min_observations=20)
assert final.adapter_id == "cloud:medium" and final.evidence.set_index("adapter_id").loc["cloud:medium", "eligible"]
assert route(ledger, "qa", threshold=0.975, min_observations=20).adapter_id is None
assert route(ledger, "qa-logged", threshold=0.8, min_observations=20, grader_id="exact-match").adapter_id is None
assert len(ledger.by_task_type("qa")) == 4 * len(questions) + 10 and ledger.malformed_count() == 0
graders = {o.tags.get("grader_id") for o in ledger.by_task_type("qa-logged")}
assert graders == {"exact-match", "llm-judge"} and (logged["status"] == "scored").sum() > 0
shutil.rmtree(workdir)
