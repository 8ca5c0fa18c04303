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
# # 7 · Trustworthy estimates from an imperfect judge
#
# An LLM judge grades every answer cheaply, but it is biased: it likes long
# answers, markdown, and its own model family. People are unbiased but slow, so
# they label only a few answers. **Prediction-powered inference** (PPI++;
# Angelopoulos et al., *Science* 2023; Angelopoulos, Duchi & Zrnic 2023) combines
# the two: the judge's mean over every item, corrected by the judge's error
# measured on the labelled ones. Its confidence interval is valid *however
# biased the judge is*, and narrower than the human labels alone whenever the
# judge is informative.
#
# In this notebook we
#
# 1. grade every answer of the bundled QA set with a (biased) LLM judge and record it in a ledger,
# 2. label a random sample by hand and record the labels in the same ledger,
# 3. estimate each model's quality with and without the judge,
# 4. ask how many labels a target precision needs,
# 5. route on the corrected quality, and gate a CI run on it.

# %%
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from llm_connect import LLMJudge, QualityLedger, estimate_quality, judge_many, labels_needed
from llm_connect.frames import paired_frame, record_labels
from llm_connect.testing import ScriptedAdapter

import tutorial_helpers

qa = pd.read_json(Path("../data/qa_calibration.jsonl"), lines=True, dtype=False)
workdir = Path(tempfile.mkdtemp(prefix="llm-connect-estimates-"))
ledger = QualityLedger(workdir / "ledger.jsonl")
qa["candidate_model"].value_counts()

# %% [markdown]
# ## 1 · The judge grades everything
#
# The judge is an `LLMJudge`; a `ScriptedAdapter` stands in for a hosted model
# (an offline tutorial cannot call one, and the embedded 135M model is no better
# than chance on this set, as notebook 3 shows). It never sees the human labels:
# it decides from the two texts (does the answer hold every content word of a
# reference?), so it misses aliases and is fooled by distractors, and it has
# planted biases: longer answers and markdown score higher, and it favours
# answers of its own (SmolLM) family.
# `judge_many(..., ledger=...)` records every scored row with the judge's
# `grader_id`, rubric hash and the item's id.

# %%
judge = LLMJudge(ScriptedAdapter(tutorial_helpers.simulated_judge(qa)), seed=0)
graded = judge_many(judge, qa, ledger=ledger, task_type="qa", progress=False)
graded["status"].value_counts()

# %% [markdown]
# ## 2 · People label a random sample
#
# We label 40% of the answers, chosen at random (the data set's `human` column
# plays the annotator). `record_labels` writes each label as an observation
# with `grader_id="human"` and the same item id and adapter as the judged
# answer, so the two can be paired later — by any process that reads the ledger.

# %%
sample = qa.sample(frac=0.4, random_state=0)
labels = pd.DataFrame({
    "item_id": sample["id"],
    "adapter_id": sample["candidate_model"],
    "human": sample["human"].map({"yes": 1.0, "no": 0.0}),
    "annotator": "tutorial",
})
record_labels(ledger, labels, task_type="qa", annotator="annotator")

# %% [markdown]
# `paired_frame` reads the ledger back as one row per judged answer: the judge's
# score, the human label (NaN where nobody looked) and the candidate's model.

# %%
pairs = paired_frame(ledger, "qa", grader_id=judge.grader_id, human="human")
pairs.head()

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(pairs)} judged answers, {int(pairs['human'].notna().sum())} labelled")

# %% [markdown]
# ## 3 · Quality per model, with and without the judge
#
# For each model, three estimates: `judge` (the judge's own mean — what trusting
# it would have said; its interval ignores its bias), `human` (the labelled
# sample alone) and `ppi++` (both). `lambda` says how much PPI++ leans on the
# judge; `ess_gain` how many times more labels the human-only estimate would
# need for the same precision.

# %%
est = estimate_quality(pairs, judge=judge.grader_id, human="human", by="model_id")
est[["model_id", "method", "estimate", "ci_low", "ci_high", "n_labelled", "n_total", "lambda", "ess_gain"]].round(3)

# %%
from llm_connect import plot_estimates

ax = plot_estimates(est)
ax.figure.set_size_inches(7, 5)

# %% [markdown]
# The judge's own intervals are narrow, but they are centred on *its* opinion:
# it rates the two SmolLM models (its own family) 0.1 to 0.2 higher than the
# corrected estimate, while every PPI++ interval is narrower than the
# human-only one built from the same labels.

# %%
by_method = est.pivot(index="model_id", columns="method", values="estimate")
width = est.pivot(index="model_id", columns="method", values="ci_high") - est.pivot(
    index="model_id", columns="method", values="ci_low"
)
summary = pd.DataFrame({
    "judge alone": by_method["judge"],
    "corrected (PPI++)": by_method["ppi++"],
    "judge - corrected": by_method["judge"] - by_method["ppi++"],
    "PPI++ width / human width": width["ppi++"] / width["human"],
})
summary.round(3)

# %%
assert (width["ppi++"] <= width["human"]).all()
assert summary.loc[["smollm2-135m-instruct", "smollm2-1.7b-instruct"], "judge - corrected"].min() > 0.05

# %% [markdown]
# ## 4 · How many labels?
#
# `labels_needed` answers the first question a user asks: from this labelled
# pilot, how many human labels give an interval of a given width, with PPI++ and
# without the judge.

# %%
needed = labels_needed(pairs, judge=judge.grader_id, human="human", width=0.2)
needed[["method", "width", "labels_needed", "n_labelled_pilot", "achievable"]]

# %% [markdown]
# ## 5 · Route on the corrected quality, and gate CI
#
# `route(..., human="human")` decides on the lower end of each model's PPI++
# interval instead of the judge's raw scores (it also refuses to pool scores of
# different judges or rubrics). Its evidence table names the method behind each
# figure.

# %%
from llm_connect.routing import route

decision = route(ledger, "qa", grader_id=judge.grader_id, human="human", threshold=0.4, min_observations=20)
print(decision.reason)
decision.evidence[["adapter_id", "method", "n", "n_labelled", "mean_quality", "quality_low", "eligible"]].round(3)

# %% [markdown]
# In CI, `llm-connect estimate` prints the same table from a file and exits 1
# when a requirement fails — here, that gpt-4o-mini's corrected quality is at
# least 0.9 at the lower end of its interval, which these few labels cannot show.

# %%
pairs.to_csv(workdir / "graded.csv", index=False)
cmd = [sys.executable, "-m", "llm_connect.cli", "estimate", str(workdir / "graded.csv"), "--judge",
       judge.grader_id, "--human", "human", "--by", "model_id", "--out", str(workdir),
       "--require", "gpt-4o-mini:estimate_low>=0.9"]
gate = subprocess.run(cmd, capture_output=True, text=True)
print(gate.stdout[-800:])
print("exit status:", gate.returncode, gate.stderr.strip())

# %%
assert decision.adapter_id == "mistral-7b-instruct"
assert gate.returncode == 1 and "requirement failed" in gate.stderr and "Traceback" not in gate.stderr
assert set(est["method"]) == {"ppi++", "human", "judge"}
shutil.rmtree(workdir)
