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
# # 3 · The calibration report: can I trust this judge?
#
# Before an LLM judge's scores mean anything, check them against something you
# trust. `llm_connect.calibration.calibrate()` runs several judges over one data
# set with human labels and measures:
#
# * **agreement** of every judge with every other and with the human labels:
#   percent agreement, Cohen's κ, Krippendorff's α, rank correlation, with
#   bootstrap intervals;
# * the **human ceiling**: how far two annotators agree with each other
#   (`human` vs `human_2`) — no judge can be expected to agree with `human`
#   much better than a second human does;
# * **bias probes** (notebook 4 explains them).
#
# The result, a `CalibrationReport`, shows as HTML, writes CSV files and an HTML
# file, and has an interactive explorer: `report.widget()`.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the embedded models load from disk; never ask a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pandas as pd

DATA = Path("../data")                                # notebooks run with their own folder as cwd
qa = pd.read_json(DATA / "qa_calibration.jsonl", lines=True, dtype=False)

# %% [markdown]
# ## The judges
#
# Three real judges, all offline:
#
# * `exact`: exact match with SQuAD normalisation against any reference;
# * `embedding`: cosine similarity on the embedded all-MiniLM-L6-v2;
# * `llm`: `LLMJudge(LlamaCppAdapter())`, an LLM judge on the embedded
#   SmolLM2-135M-Instruct, run in-process by llama.cpp. A model this small is no
#   GPT-4o; whether its verdicts are worth anything is exactly what calibration
#   measures. (Point `LLMJudge` at `OpenAICompatibleAdapter` or
#   `AnthropicAdapter` and the same cells calibrate a hosted judge.)

# %%
from llm_connect import EmbeddingSimilarityJudge, ExactMatchJudge, LLMJudge
from llm_connect.adapters import LlamaCppAdapter, SentenceTransformerEmbedder

exact = ExactMatchJudge(normalizer="squad", reference_sep="|")
embedding = EmbeddingSimilarityJudge(SentenceTransformerEmbedder(), reference_sep="|")
llm = LLMJudge(LlamaCppAdapter(), seed=0)      # SmolLM2-135M, loaded once, on first use

# %% [markdown]
# ## Calibrate
#
# `human="human"` names the label column (yes/no, booleans or 0..1 all work);
# `annotators=["human_2"]` adds the second annotator for the ceiling. Each probe
# costs one more judge call per probed item, so `probe_limit` probes a seeded
# sample.
#
# The local LLM judge takes up to about a second per item on a small CPU, so we
# calibrate in two runs: the two fast judges on all 269 items (with the bias
# probes on 100 of them), and all three judges on a seeded sample of 24 items
# (its probes are notebook 4's subject). `llm-connect calibrate` runs everything
# on every item when you have the time. The progress bars show each judge's run.

# %%
from llm_connect.calibration import calibrate

report = calibrate({"exact": exact, "embedding": embedding}, qa, human="human", annotators=["human_2"],
                   reference_sep="|", probe_limit=100, seed=0)
report.summary().round(3)

# %% [markdown]
# `report.scores` is the tidy per-item frame everything is computed from: one
# `score_<judge>` column per judge (NaN where a judge's reply was unscored —
# never 0), the labels as `score_human` and `score_human_2`, answer length and
# markdown features, and the candidate's model family.

# %%
# NBVAL_CHECK_OUTPUT
s = report.scores
print(len(s), report.judges, report.labels, "reference:", report.reference)
print({name: (usage["scored"], usage["unscored"]) for name, usage in s.attrs["usage"].items()})

# %% [markdown]
# ## Agreement, and the human ceiling
#
# Agreement at the threshold 0.5 (a score ≥ 0.5 means "correct"). Exact match
# reproduces the data README's 63.2%; the two annotators agree on 91.1% of rows
# (κ = 0.81), which is the ceiling for any judge against `human`.

# %%
# NBVAL_CHECK_OUTPUT
for a, b in [("exact", "human"), ("human", "human_2")]:
    p = report.agreement.pair(a, b)
    print(f"{a:>6} vs {b:<8} n={p.n:3}  agreement={p['percent_agreement'].value:.3f}  "
          f"kappa={p['cohen_kappa'].value:.3f}")

# %%
report.agreement.matrix("cohen_kappa").round(2)

# %%
import matplotlib.pyplot as plt

from llm_connect.views import plot_agreement_heatmap, plot_threshold_sweep

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
plot_agreement_heatmap(report.agreement, statistic="cohen_kappa", ax=left)
plot_threshold_sweep(report.sweep("embedding", "human"), ax=right)
right.set_title("embedding threshold vs human")
plt.tight_layout()
plt.show()

# %% [markdown]
# The sweep on the right answers "where should the embedding judge's threshold
# be?": κ against the human labels at each threshold, with the best one marked.
# 0.5 is rarely right for a similarity score.
#
# ## The LLM judge, on a sample
#
# Now all three judges on a seeded sample of 24 items (the sample notebook 4
# probes). So few items make wide intervals: read the figures for their
# direction and their uncertainty, not their third decimal.

# %%
sample = qa.sample(24, random_state=0)
llm_report = calibrate({"exact": exact, "embedding": embedding, "llm": llm}, sample, human="human",
                       annotators=["human_2"], reference_sep="|", probes=None, seed=0)
llm_report.summary().round(3)

# %%
for a, b in [("llm", "human"), ("embedding", "human"), ("exact", "human"), ("human", "human_2")]:
    p = llm_report.agreement.pair(a, b)
    kappa = p["cohen_kappa"]
    print(f"{a:>9} vs {b:<8} n={p.n:2}  agreement={p['percent_agreement'].value:.3f}  "
          f"kappa={kappa.value:.2f} (95% CI {kappa.low:.2f}..{kappa.high:.2f})")
llm_scores = llm_report.scores["score_llm"]
print(f"llm scores range {llm_scores.min():.2f}..{llm_scores.max():.2f}; "
      f"{(llm_scores >= 0.5).mean():.0%} of them at or above 0.5")

# %% [markdown]
# Every judge gets a verdict in words, derived by a documented rule from its κ
# interval against the people and its measured biases — the same lines
# `llm-connect calibrate` prints first:

# %%
for line in llm_report.verdicts():
    print(line)

# %% [markdown]
# Compare the embedding judge's verdict on these 24 items with its κ on all 269
# above: a verdict is only as firm as the interval it comes from, and 24 items
# give wide ones.
#
# A judge's verdicts at 0.5 are only as good as 0.5 is for its scores. The
# score range printed above says where this judge's scores live; the threshold
# sweep says where its best cut against the people is. A threshold picked on
# the same 24 items it is judged on flatters the judge, so check it on fresh
# labels before relying on it.

# %%
llm_sweep = llm_report.sweep("llm", "human")
best = llm_sweep.loc[llm_sweep["cohen_kappa"].idxmax()]
print(f"best threshold for llm against human: {best['threshold']:.2f} "
      f"(kappa {best['cohen_kappa']:.2f}, agreement {best['percent_agreement']:.3f})")
fig, ax = plt.subplots(figsize=(6, 4))
plot_threshold_sweep(llm_sweep, ax=ax)
ax.set_title("llm threshold vs human (24 items)")
plt.show()

# %% [markdown]
# The items the judge and the people disagree on most are usually the fastest
# way to see *why* a judge is off (the raw reply of each judgment is in
# `llm_report.scores["reply_llm"]`):

# %%
llm_report.disagreements("llm", "human", top=8)

# %% [markdown]
# ## The interactive report
#
# `report.widget()` puts it together. Pick a **judge** and what to compare it
# **against** (another judge or a human), and move the **threshold**; the
# agreement table, the scatter of the two judges' scores (jittered so that 0/1
# labels do not pile up) and the threshold sweep (red line: the current
# threshold) follow. Below them, one tab per bias probe, and the **items** the
# two disagree on most.
#
# Every control only calls the report's own functions (`report.pair`,
# `report.sweep`, `report.disagreements`) and the plot functions, so anything
# the widget shows can be reproduced in a cell. (The widget needs a live kernel;
# in a static rendering of the notebook it shows the state it was saved in.)

# %%
box = report.widget()
box

# %% [markdown]
# The controls can also be driven from code. A second explorer, comparing the
# embedding judge with the human labels at a threshold of 0.7 — and the same
# numbers from `report.pair`, without the widget — and a third, on the sample
# report, with the LLM judge against the people:

# %%
second = report.widget()
second.controls.judge_a.value = "embedding"
second.controls.threshold.value = 0.7
second

# %%
report.pair("embedding", "human", threshold=0.7)

# %%
third = llm_report.widget()
third.controls.judge_a.value = "llm"
third.controls.judge_b.value = "human"
third

# %% [markdown]
# ## Saving it
#
# `report.to_csv(folder)` writes `scores.csv`, `agreement.csv` and `bias.csv`;
# `report.to_html(path)` one self-contained HTML file with every table and
# figure. `llm-connect calibrate data/qa_calibration.jsonl --out DIR --human human
# --reference-sep "|"` does all of this from the command line, with the
# embedded SmolLM2 as the LLM judge.

# %%
import tempfile

out = Path(tempfile.mkdtemp(prefix="llm-connect-report-"))
paths = llm_report.to_csv(out)
paths["report"] = llm_report.to_html(out / "report.html")
{name: path.name for name, path in paths.items()}

# %%
import shutil

assert len(report.scores) == len(qa) == 269
assert report.judges == ["exact", "embedding"] and report.labels == ["human", "human_2"]
assert s.attrs["usage"]["exact"]["scored"] == 269 and s.attrs["usage"]["embedding"]["scored"] == 269
ceiling = report.agreement.pair("human", "human_2")["percent_agreement"].value
assert abs(ceiling - 0.911) < 0.001
assert report.bias is not None and {r.probe for r in report.bias.results} == {"length", "format", "injection"}
assert len(llm_report.scores) == 24 and llm_report.judges == ["exact", "embedding", "llm"]
assert llm_report.scores["score_llm"].notna().sum() > 0, "the LLM judge scored no item"
assert len(llm_report.verdicts()) == 3 and llm_report.bias is None
assert all(p.exists() for p in paths.values())
shutil.rmtree(out)
