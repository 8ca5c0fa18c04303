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
# * `exact`: exact match with SQuAD normalisation against any reference;
# * `embedding`: cosine similarity on the embedded all-MiniLM-L6-v2;
# * `llm`: an LLM judge. This offline tutorial uses a scripted stand-in for it
#   (below), since the embedded SmolLM2-135M cannot grade (notebook 1).

# %% [markdown]
# > **About the scripted judge.** `simulated_judge` (from `tutorial_helpers.py`,
# > next to this notebook) finds the answer a judge prompt shows in the data set
# > and answers like a fairly good judge that slips on about 8% of items, returns
# > no JSON on about 3%, and is swayed by length, markdown, planted instructions
# > and answers from its own model family. It is a `ScriptedAdapter` (from
# > `llm_connect.testing`) with a reply function: a real adapter as far as the
# > package is concerned — it receives the exact judge prompt and its reply goes
# > through the same parser, batch runtime, ledger and statistics as a hosted
# > model's would. It stands in for a capable judge such as a hosted GPT-4o-mini
# > or Claude (`OpenAICompatibleAdapter`, `AnthropicAdapter`), which this offline
# > tutorial cannot call, and for which the embedded SmolLM2-135M is far too weak
# > (notebook 1 shows it). Its biases are planted on purpose so you can see the
# > diagnostics find them; with a real judge you do not know them in advance.

# %%
import tutorial_helpers

# It knows every answer of the data set, and each as the bias probes rewrite it (with calibrate's seed).
simulated_judge = tutorial_helpers.simulated_judge(qa, probes=["length", "format", "injection"], seed=0)

# %%
from llm_connect import EmbeddingSimilarityJudge, ExactMatchJudge, LLMJudge
from llm_connect.adapters import SentenceTransformerEmbedder
from llm_connect.testing import ScriptedAdapter

judge_model = ScriptedAdapter(simulated_judge, adapter_id="scripted:judge", model_id="scripted-smollm2-judge",
                              cost_per_call=0.0002)
judges = {
    "exact": ExactMatchJudge(normalizer="squad", reference_sep="|"),
    "embedding": EmbeddingSimilarityJudge(SentenceTransformerEmbedder(), reference_sep="|"),
    "llm": LLMJudge(judge_model, seed=0),
}

# %% [markdown]
# ## Calibrate
#
# `human="human"` names the label column (yes/no, booleans or 0..1 all work);
# `annotators=["human_2"]` adds the second annotator for the ceiling. Each probe
# costs one more judge call per probed item, so `probe_limit=100` probes a seeded
# sample of 100 items. The progress bars show each judge's run.

# %%
from llm_connect.calibration import calibrate

report = calibrate(qa, judges, human="human", annotators=["human_2"], reference_sep="|",
                   probe_limit=100, seed=0)
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
for a, b in [("exact", "human"), ("llm", "human"), ("human", "human_2")]:
    p = report.agreement.pair(a, b)
    print(f"{a:>6} vs {b:<8} n={p.n:3}  agreement={p['percent_agreement'].value:.3f}  "
          f"kappa={p['cohen_kappa'].value:.3f}")

# %%
report.agreement.matrix("cohen_kappa").round(2)

# %%
import matplotlib.pyplot as plt

from llm_connect.calibration import plot_agreement_heatmap, plot_threshold_sweep

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
# A word on the `llm` row: it agrees with `human` slightly *more* than `human_2`
# does. That is an artefact of our stand-in, which was written from the `human`
# labels. With a real judge, agreement above the human ceiling is a warning sign
# rather than a triumph: the judge may have learnt one annotator's quirks, or
# the labels may have leaked into its prompt.
#
# ## The interactive report
#
# `report.widget()` puts it together. Pick a **judge** and what to compare it
# **against** (another judge or a human), and move the **threshold**; the
# agreement table, the scatter of the two judges' scores (jittered so that 0/1
# labels do not pile up) and the threshold sweep (red line: the current
# threshold) follow. Below them, one tab per bias probe, and the **items** the
# two disagree on most — usually the fastest way to see *why* a judge is off.
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
# numbers from `report.pair`, without the widget:

# %%
second = report.widget()
second.controls.judge_a.value = "embedding"
second.controls.threshold.value = 0.7
second

# %%
report.pair("embedding", "human", threshold=0.7)

# %%
report.disagreements("llm", "human", top=8)

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
paths = report.to_csv(out)
paths["report"] = report.to_html(out / "report.html")
{name: path.name for name, path in paths.items()}

# %%
import shutil

assert len(report.scores) == len(qa) == 269
assert report.judges == ["exact", "embedding", "llm"] and report.labels == ["human", "human_2"]
assert s.attrs["usage"]["exact"]["scored"] == 269 and s.attrs["usage"]["llm"]["unscored"] > 0
ceiling = report.agreement.pair("human", "human_2")["percent_agreement"].value
assert abs(ceiling - 0.911) < 0.001
assert report.bias is not None and {r.probe for r in report.bias.results} == {"length", "format", "injection"}
assert all(p.exists() for p in paths.values())
shutil.rmtree(out)
