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
# # 11 · Trust or escalate: judges with a guaranteed agreement with people
#
# A judge that agrees with people 90% of the time overall is often right 99% of the
# time on the items it is sure of, and a coin flip on the rest. Jung, Brahman & Choi
# (ICLR 2025, *Trust or Escalate: LLM Judges with Provable Guarantees for Human
# Agreement*) make that usable: a **selective judge** gives a verdict only when its
# confidence reaches a cut-off, chosen on labelled items so that on fresh items
#
# > it agrees with people on at least 1 − α of the items it judges, with probability at least 1 − δ,
#
# and *abstains* on the others. A **cascade** asks a cheap judge first, a stronger one
# only when the cheap one abstains, and leaves what the last one abstains on for people.
#
# In this notebook, on the bundled QA set, we
#
# 1. give two judges a confidence: exact match (free) and an LLM judge's probability of its verdict,
# 2. calibrate a screen → judge → people cascade on half of the labelled items,
# 3. run it on the other half: who decided what, and what it cost against always asking the LLM judge,
# 4. hand exactly the items it abstained on to people, and read the combined agreement,
# 5. check the guarantee against the held-back labels,
# 6. get the same numbers from `calibrate()` and `llm-connect calibrate --selective`.

# %%
import tempfile
from pathlib import Path

import pandas as pd

from llm_connect.calibration import calibrate
from llm_connect.grading import ExactMatchJudge, LLMJudge, SelectiveJudge, cascade
from llm_connect.labelling import Labeller
from llm_connect.quality import QualityLedger
from llm_connect.testing import ScriptedAdapter

import tutorial_helpers

qa = pd.read_json(Path("../data/qa_calibration.jsonl"), lines=True, dtype=False)
calibration = qa.sample(frac=0.5, random_state=0)
fresh = qa.drop(calibration.index).reset_index(drop=True)
calibration = calibration.reset_index(drop=True)
workdir = Path(tempfile.mkdtemp(prefix="llm-connect-selective-"))

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(calibration)} labelled items to calibrate on, {len(fresh)} fresh items (their labels held back)")

# %% [markdown]
# ## 1 · Two judges, and how sure each is
#
# **The screen** is exact match (SQuAD normalisation, any of the references): free,
# and when it says "match" it is right, but a mismatch means little (a sentence around
# the answer, an alias, another format). So its confidence is its own score: 1 for a
# match, 0 otherwise — a callable confidence, which takes the judge's `GradingResult`.
#
# **The judge** is an `LLMJudge` with `scoring="yes-no"`: one token, yes or no, and the
# model's probability of each. Its confidence is its own probability of its verdict
# (`confidence="logprob"`, what `"auto"` picks for it). An offline tutorial cannot call
# a hosted model, so a `ScriptedAdapter` stands in, charging $0.002 a call: it reads the
# question, the references and the answer (never the labels), decides by word overlap,
# and is sure of clear cases (a short answer holding a reference, a fluent sentence
# sharing no word with one) and unsure of hedges, markdown, long answers that may only
# mention the right answer, and short answers that may be an alias.

# %%
screen = SelectiveJudge(ExactMatchJudge(normalizer="squad", reference_sep="|"),
                        confidence=lambda result: result.quality_score)
model = ScriptedAdapter(tutorial_helpers.yes_no_judge(qa), adapter_id="scripted:judge-model",
                        model_id="judge-model", cost_per_call=0.002)
llm = LLMJudge(model, grader_id="llm-judge", scoring="yes-no")

# %%
# NBVAL_CHECK_OUTPUT
print("screen confidence:", screen.source, "| LLM judge confidence:", SelectiveJudge(llm).source)
print("exact match alone:", SelectiveJudge(ExactMatchJudge()).note)

# %% [markdown]
# One judge first. `calibrate` judges the labelled items, marks each verdict as agreeing
# with people's or not, and chooses the cut-off by fixed-sequence testing: thresholds from
# the most confident down, each tested with an exact binomial bound on the disagreement of
# the items it keeps, stopping at the first that fails. The risk-coverage curve shows the
# disagreement (solid) and its upper bound (dashed) as the judge keeps more and more items;
# the cut-off is where the bound last stayed under α.

# %%
alone = SelectiveJudge(llm, alpha=0.1, delta=0.1).calibrate(calibration, human="human", progress=False)
ax = alone.plot()  # the curve, its bound, alpha and the cut-off

# %%
# NBVAL_CHECK_OUTPUT
print(alone.describe())
print(f"its agreement with people on all the calibration items: "
      f"{((alone.calibration_frame['score'] >= 0.5) == (alone.calibration_frame['label'] >= 0.5)).mean():.1%}")

# %% [markdown]
# ## 2 · The cascade, calibrated stage by stage
#
# `cascade([screen, llm])` makes each a selective judge held to the same α and δ. The
# screen's cut-off is chosen on every calibration item, the LLM judge's on the items the
# screen abstained on (so it is asked about those only), and what it abstains on is left
# for people. Each stage keeps its judged items at least 1 − α in agreement, so all the
# judged items together do too.

# %%
chain = cascade([screen, llm], alpha=0.1, delta=0.1).calibrate(calibration, human="human", progress=False)
stages = pd.DataFrame(list(chain.calibration))[["grader_id", "source", "reached", "judged", "coverage", "cutoff"]]
stages

# %%
# NBVAL_CHECK_OUTPUT
print(chain.describe())

# %% [markdown]
# The cascade judges fewer of the calibration items than the LLM judge alone did: its
# second stage is calibrated on fewer, harder items (those exact match did not match),
# and fewer items buy a more cautious cut-off. What the cascade buys is cost: the LLM
# judge is asked only about what the screen could not settle.

# %% [markdown]
# ## 3 · Fresh items: who decides, and what it costs
#
# The calibrated cascade is a judge like any other: `judge_many` (and `grade_dataset` on
# Ray) take it as it is. Each row says who decided (`decided_by`: a judge's grader id, or
# `"human"`) and the confidence; an item every judge abstained on is an `abstained` row,
# with no score (NaN, never 0). The judged rows go to the ledger; the abstained ones do not
# (an abstention is not a quality observation).

# %%
ledger = QualityLedger(workdir / "ledger.jsonl")
unlabelled = fresh.drop(columns=["human", "human_2"])  # the labels stay held back
judged = chain.judge_many(unlabelled, ledger=ledger, task_type="qa", progress=False)
summary = chain.summary(judged)
summary.to_frame()

# %%
# NBVAL_CHECK_OUTPUT
print(judged.attrs["counts"])
print(summary.describe())

# %% [markdown]
# ## 4 · People label exactly what was left
#
# `Labeller(..., strategy="abstained")` offers the rows the cascade abstained on, and only
# them, the most uncertain first; each label goes to the ledger as any label does. The
# next cell plays the annotator from the held-back labels (in a notebook you would call
# `labeller.widget()` and click).

# %%
labeller = Labeller(judged, ledger=ledger, task_type="qa", annotator="ann", strategy="abstained")
truth = fresh.set_index("id")["human"]
while labeller.current is not None:  # the stand-in annotator
    labeller.label(1.0 if truth[labeller.current["item_id"]] == "yes" else 0.0)

# %% [markdown]
# Run the cascade again with the labels in the ledger: it reports the agreement of the
# combined labels — the judges' (at least 1 − α) and people's (their own) — as a bound that
# holds with probability 1 − δ.

# %%
again = chain.judge_many(unlabelled, ledger=ledger, task_type="qa", progress=False)
combined = again.attrs["cascade"]

# %%
# NBVAL_CHECK_OUTPUT
print(f"{labeller.n_labelled} items labelled by people; every item now has a verdict")
print(f"agreement of the combined labels with people: at least {combined['combined_agreement']:.1%}, "
      f"guaranteed at {combined['confidence_level']:.0%} confidence")

# %% [markdown]
# ## 5 · Did the guarantee hold?
#
# The held-back labels say how the judged rows really did. The guarantee is a statement
# about the procedure — over calibration sets, the agreement on fresh judged items falls
# below 1 − α at most a δ share of the time (`tests/grading/test_selective.py` checks it over
# hundreds of simulated calibrations) — so one run can fall short and still be in its
# rights; here it did not.

# %%
decided = judged[judged["status"] == "scored"]
agree = (decided["quality_score"] >= 0.5) == (fresh.loc[decided.index, "human"] == "yes")

# %%
# NBVAL_CHECK_OUTPUT
print(f"agreement with people on the {len(decided)} judged fresh items: {agree.mean():.1%} (guaranteed: at least 90%)")
print("per judge:", {k: f"{v:.1%}" for k, v in agree.groupby(decided["decided_by"]).mean().items()})

# %% [markdown]
# ## 6 · In a calibration run, and on the command line
#
# `calibrate(..., selective=(alpha, delta))` calibrates every judge as a selective judge
# beside its usual agreement figures: `report.selective` holds the calibrated judges (ready
# for fresh items), `agreement.csv` gets a selective row per judge, each judge card's
# verdict line says what it judges and at which level, and the report draws each judge's
# risk-coverage curve. From the shell:
#
# ```bash
# llm-connect calibrate data/qa_calibration.jsonl --out out --judges exact,llm \
#     --human human --selective alpha=0.1,delta=0.1
# ```

# %%
report = calibrate([llm], calibration, human="human", selective=(0.1, 0.1), probes=None, n_boot=200,
                   progress=False)

# %%
# NBVAL_CHECK_OUTPUT
print(report.verdicts()[0].split("; selective: ")[1])
print(report.selective_frame()[["judge_a", "coverage", "percent_agreement", "guaranteed_agreement"]]
      .round(3).to_string(index=False))

# %%
assert summary.judged + summary.human == len(fresh) and summary.saved_share > 0
assert labeller.n_labelled == summary.human and combined["labelled_by_people"] == summary.human
assert agree.mean() >= 0.9
