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
# # 8 · Label what matters, in the notebook
#
# Human labels are the scarce input of every calibration and of every corrected
# estimate (notebook 7). `llm_connect.labelling.Labeller` is a place to give
# them, next to the judges: it shows one answer at a time — the prompt, the
# reference(s), the candidate and, only when asked, the judge's score (hidden by
# default, so it does not anchor you) — and appends each label to the quality
# ledger **the moment it is given**. A kernel restart, or a colleague labelling
# the same ledger from another process, loses nothing. Its progress line says
# what the labels buy: how wide the interval on the mean quality is now, and
# about how many more labels would make it as narrow as you want.
#
# In this notebook we
#
# 1. grade every answer of the bundled QA set with a cheap judge and record the scores in a ledger,
# 2. label a random sample of the answers in the widget (here a stand-in plays the person),
# 3. resume after a "restart",
# 4. estimate each model's quality from the judge and the labels (PPI++), and
# 5. route on the corrected quality.

# %%
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from llm_connect import QualityLedger, TokenF1Judge, judge_many
from llm_connect.labelling import Labeller

qa = pd.read_json(Path("../data/qa_calibration.jsonl"), lines=True, dtype=False)
workdir = Path(tempfile.mkdtemp(prefix="llm-connect-labelling-"))
ledger = QualityLedger(workdir / "ledger.jsonl")
qa[["id", "prompt", "baseline", "candidate", "candidate_model"]].head(3)

# %% [markdown]
# ## 1 · A cheap judge grades everything
#
# The judge is real and runs offline: `TokenF1Judge`, the SQuAD token F1 between
# the candidate and the best of its references (`"|"` separates them). It never
# sees a human label. It is informative but biased: a correct answer written as
# a sentence shares few of its words with a one-word reference, so the judge's
# scores run well below the true share of correct answers. (Any judge works
# here: the MiniLM embedding judge of notebook 1, or an `LLMJudge`.)
# `judge_many(..., ledger=...)` records each score with the judge's grader id and
# the item's id, which is what the labeller and the estimates read.

# %%
judge = TokenF1Judge(reference_sep="|")
graded = judge_many(judge, qa, ledger=ledger, task_type="qa", progress=False)
graded["status"].value_counts()

# %% [markdown]
# ## 2 · The labeller
#
# `Labeller(items, ledger=..., task_type=..., annotator=..., grader_id=...,
# strategy="random", seed=0)` walks the items in a seeded order. `"random"` keeps
# the labelled answers a simple random sample, so the estimates need no weights;
# `"stratified"` (round-robin over the candidate models), `"active"` (answers the
# judge is unsure of are shown more often, with their probabilities recorded so
# the estimates stay unbiased; Zrnic & Candès 2024) and `"overlap"` (a share every
# annotator labels, for inter-annotator agreement) are the other strategies.
# `grader_id=` names the judge's grader id: the labeller reads its scores from the
# ledger (to reveal on request, and for the estimates).

# %%
labeller = Labeller(qa, ledger=ledger, task_type="qa", annotator="ana", grader_id=judge.grader_id, seed=0,
                    reference_sep="|")
labeller

# %% [markdown]
# The widget: **Correct** (key `c`), **Incorrect** (`x`), **Partial** with the
# slider's score (`p`), **Skip** (`s`), **Undo** the last label (`u`), **Show
# judge** (`j`), and a free-text note kept with the label. (The keys work with
# `ipyevents` installed, with the pointer over the item.) Every click appends
# one observation to the ledger — grader `human`, the item's id, the annotator
# and the probability with which the item was chosen — and shows the next item.
# (`docs/labeller.png` shows it in JupyterLab after six labels, with the judge
# revealed.)

# %%
labeller.widget()

# %% [markdown]
# ## A stand-in for the person
#
# A notebook run by a test has nobody to click. **This cell plays the
# annotator** through the same programmatic API the buttons call
# (`labeller.current`, `labeller.label(score)`): it looks up the data set's own
# human label of the item shown. It is the only cell that reads the labels, and
# it stands for you; the judge above never saw them. Run the widget instead and
# label by hand: the rest of the notebook works the same.

# %%
human_label = dict(zip(qa["id"], qa["human"].map({"yes": 1.0, "no": 0.0}), strict=True))  # the person's answers

for _ in range(100):
    item = labeller.current
    labeller.label(human_label[item["item_id"]])
print(labeller.progress()["text"])

# %% [markdown]
# Skip and undo are recorded too, never by deleting: a skip is an observation of
# grader `human-skip` (the item is not shown to this annotator again), and undo
# appends a marker that takes back the last label or skip and shows its item
# again. The estimates leave undone labels out.

# %%
shown = labeller.current["item_id"]
labeller.skip(note="not sure")
assert labeller.current["item_id"] != shown
labeller.undo()
assert labeller.current["item_id"] == shown

# %%
# NBVAL_CHECK_OUTPUT
print(labeller.progress()["text"])
print(labeller.n_labelled, "labelled;", len(ledger.read_all()), "observations in the ledger;",
      "next item:", labeller.current["item_id"])

# %% [markdown]
# ## 3 · A restart loses nothing
#
# The labels are in the ledger, not in the kernel. A new `Labeller` with the same
# items, ledger, task type, annotator, strategy and seed — after a kernel
# restart, or the next morning — rebuilds the same order and continues at the
# first item this annotator has neither labelled nor skipped.
# (`tests/views/test_labeller_browser.py` does exactly this in a real JupyterLab: it
# clicks five labels, restarts the kernel from the Kernel menu and checks the
# widget comes back at the sixth item.)

# %%
# NBVAL_CHECK_OUTPUT
resumed = Labeller(qa, ledger=QualityLedger(workdir / "ledger.jsonl"), task_type="qa", annotator="ana",
                   grader_id=judge.grader_id, seed=0, reference_sep="|")
print(resumed.n_labelled, "labelled; resumes at", resumed.current["item_id"])

# %% [markdown]
# ## 4 · Quality per model, from the judge and the labels
#
# `labeller.estimate(by="model_id")` is `estimate_quality` (notebook 7) on the
# labeller's frame — one row per answer with the judge's score and the label
# where there is one — with the right weights for the strategy (none for
# `"random"`). Per model: `judge` (the judge's own mean: what trusting it would
# say), `human` (the labels alone) and `ppi++` (both: the judge's mean over
# every answer, corrected by its error on the labelled ones; Angelopoulos et
# al., *Science* 2023).

# %%
est = labeller.estimate(by="model_id")
est[["model_id", "method", "estimate", "ci_low", "ci_high", "n_labelled", "n_total"]].round(3)

# %%
from llm_connect import plot_estimates

ax = plot_estimates(est)
ax.figure.set_size_inches(7, 5)

# %% [markdown]
# The token-F1 judge alone says about a third of the answers are right; the
# labels say nearer two thirds. Its intervals are narrow and wrong, while the
# `ppi++` intervals are centred where the labels put them.

# %%
by_method = est.pivot(index="model_id", columns="method", values="estimate")
(by_method["judge"] - by_method["ppi++"]).round(3).rename("judge - corrected")

# %% [markdown]
# ## 5 · Route on the corrected quality
#
# `route(ledger, "qa", grader_id=..., human="human", threshold=...)` (notebook 6)
# decides on the lower end of each model's PPI++ interval, with the labels just
# given. The data set has no prices (every cost is 0), so of the models whose
# lower end clears the threshold the one with the highest lower end wins. On the
# judge's scores alone nothing would clear it.

# %%
from llm_connect.routing import route

corrected = route(ledger, "qa", grader_id=judge.grader_id, human="human", threshold=0.5, min_observations=20)
judge_only = route(ledger, "qa", grader_id=judge.grader_id, threshold=0.5, min_observations=20)
corrected.evidence[["adapter_id", "method", "n", "n_labelled", "mean_quality", "quality_low", "eligible"]].round(3)

# %%
# NBVAL_CHECK_OUTPUT
print("corrected:", corrected.adapter_id)
print("judge only:", judge_only.adapter_id)

# %%
labels = [o for o in ledger.read_all() if o.tags.get("grader_id") == "human"]
assert len(labels) == 100 and {o.tags["annotator"] for o in labels} == {"ana"}
assert resumed.current["item_id"] == labeller.current["item_id"] and resumed.n_labelled == 100
assert (by_method["judge"] < by_method["ppi++"]).all()  # the judge alone underrates every model
assert corrected.adapter_id is not None and judge_only.adapter_id is None
shutil.rmtree(workdir)
