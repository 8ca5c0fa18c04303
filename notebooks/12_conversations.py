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
# # 12 · Conversations and agent runs
#
# A chat assistant is judged turn by turn, an agent by what it *did*: which tools it called, with
# which arguments, and whether its answer follows from what the tools returned. llm_connect takes
# both as items: an item may carry the chat `messages` before the judged reply, a reply that is a
# **trajectory** (a list of messages: tool calls, tool results, the final answer), and the
# `context` documents the reply may use.
#
# In this notebook, on the two small data sets the project ships (`data/conversations.jsonl`:
# 20 support conversations, 73 turns; `data/agent_runs.jsonl`: 15 agent runs; every turn and run
# labelled by the project's developers, see `data/README.md`), we
#
# 1. read them with `read_conversations`, one item per assistant turn, and split a whole
#    conversation with `per_turn`;
# 2. look at a run as a transcript (the renderer the viewer, the report and the Labeller share);
# 3. judge trajectories with `TrajectoryMatchJudge`, all four modes on one run;
# 4. check groundedness with `GroundednessJudge` (and say honestly what the embedded model can do);
# 5. compare both judges with the people's labels.

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML

from llm_connect import GroundednessJudge, RunConfig, TrajectoryMatchJudge, judge_many
from llm_connect.calibration import agreement_table
from llm_connect.conversations import as_response, per_turn, read_conversations
from llm_connect.testing import ScriptedAdapter
from llm_connect.views import transcript_html

import tutorial_helpers

conversations = read_conversations(Path("../data/conversations.jsonl"))
runs = read_conversations(Path("../data/agent_runs.jsonl"))

# %%
# NBVAL_CHECK_OUTPUT
print(f"{conversations['conversation_id'].nunique()} conversations, {len(conversations)} turns; "
      f"{len(runs)} agent runs")
print("turns labelled:", conversations["human"].value_counts().to_dict())
print("runs labelled: ", runs["human"].value_counts().to_dict())
print(list(conversations.columns))

# %% [markdown]
# ## 1 · One item per turn
#
# Each line of `conversations.jsonl` is one turn: `messages` is the conversation *before* the
# reply (a system message, then the customer's and the assistant's messages so far), `candidate`
# the reply, `context` the documents the assistant may answer from, `human` the people's label of
# that turn and `flaw` what is wrong with it. `read_conversations` checks every message and adds
# `prompt` (the last user message) and `turn`.

# %%
# NBVAL_CHECK_OUTPUT
conv = conversations[conversations["conversation_id"] == "conv-03"]
print(conv[["turn", "prompt", "candidate", "human", "flaw"]].to_string(index=False, max_colwidth=60))

# %% [markdown]
# A log of whole conversations (one line per conversation, no `candidate`) is split the same way:
# `per_turn` gives one item per assistant reply. Here is conv-03 rebuilt from its last line and
# split again: the same four turns.

# %%
# NBVAL_CHECK_OUTPUT
last = conv.iloc[-1]
whole = [*last["messages"], {"role": "assistant", "content": last["candidate"]}]
split = per_turn([{"messages": whole, "conversation_id": "conv-03"}])
print(split[["turn", "prompt"]].to_string(index=False))
assert split["candidate"].tolist() == conv["candidate"].tolist()

# %% [markdown]
# ## 2 · A run as a transcript
#
# An agent run's `candidate` is its trajectory; `baseline` is a reference trajectory (what a
# careful agent calls) and `context` the tool results. `transcript_html` draws it: role badges,
# each tool call with its arguments as JSON, each result linked to its call, the documents
# collapsed; click a summary to open or close a block. Every text is escaped: a message holding
# markup shows as text. The judgment viewer (`report.view()`, `llm-connect view`), the report's
# "Transcripts" section and the Labeller draw items the same way.

# %%
run = runs.set_index("id").loc["run-03"]
print(run["prompt"], "->", run["flaw"], "/", run["notes"])
HTML(transcript_html(run["messages"], reply=run["candidate"], reference=run["baseline"], context=run["context"]))

# %% [markdown]
# ## 3 · Did the agent call the right tools?
#
# `TrajectoryMatchJudge` compares the tool calls of the candidate trajectory with the
# reference's: `strict` (the same messages in the same order, each with the same calls),
# `unordered` (the same calls in any order), `subset` (it called nothing the reference did not)
# and `superset` (it called at least what the reference called). Calls are paired by a maximum
# matching; `details` say which calls matched, which are missing, which are extra.
#
# Run-03 was asked for the weather in Oslo and also fetched Lisbon's: a needless call.

# %%
# NBVAL_CHECK_OUTPUT
reference, candidate = as_response(run["baseline"]), as_response(run["candidate"])
for mode in ("strict", "unordered", "subset", "superset"):
    result = TrajectoryMatchJudge(mode).judge(reference, candidate, prompt=run["prompt"], run_config=RunConfig())
    extra = [c["name"] + " " + str(c["arguments"]) for c in result.details["extra"]]
    print(f"{mode:9s} {result.quality_score:.0f}  {result.notes}  extra: {extra}")

# %% [markdown]
# Only `superset` accepts it: it asks whether the agent did *at least* the necessary, which
# is the right question when extra calls are harmless and the wrong one when they cost money or
# time. Pick the mode that says what your people mean by a good run.
#
# Arguments are compared as JSON (`tool_args="exact"` by default). Run-09 computed
# `2340 * 0.17` where the reference computes `0.17 * 2340`: people accept it; an exact argument
# match does not. `tool_args="ignore"` compares only the names, and `tool_args_overrides`
# sets the rule per tool: here a callable that evaluates both calculator expressions.

# %%
# NBVAL_CHECK_OUTPUT
nine = runs.set_index("id").loc["run-09"]
ref9, cand9 = as_response(nine["baseline"]), as_response(nine["candidate"])


def same_value(candidate_args, reference_args):
    """Two arithmetic expressions of digits, dots, spaces and + - * / ( ) that evaluate to the same number."""
    allowed = set("0123456789.+-*/() ")
    texts = [candidate_args["expression"], reference_args["expression"]]
    if not all(set(t) <= allowed for t in texts):
        return False
    return abs(eval(texts[0]) - eval(texts[1])) < 1e-9  # only digits and operators: checked above


for name, judge in (("tool_args='exact'", TrajectoryMatchJudge("strict")),
                    ("tool_args='ignore'", TrajectoryMatchJudge("strict", tool_args="ignore")),
                    ("calculator: same_value", TrajectoryMatchJudge("strict",
                                                                    tool_args_overrides={"calculator": same_value}))):
    print(f"{name:24s} {judge.judge(ref9, cand9, prompt='', run_config=RunConfig()).quality_score:.0f}")

# %% [markdown]
# All fifteen runs with `judge_many`: a list of messages in `candidate` and `baseline` is a
# trajectory. The strict match against the people's labels:

# %%
# NBVAL_CHECK_OUTPUT
strict = TrajectoryMatchJudge("strict", tool_args_overrides={"calculator": same_value})
judged_runs = judge_many(strict, runs, progress=False)
print(pd.crosstab(judged_runs["flaw"], judged_runs["quality_score"]).to_string())

# %% [markdown]
# It catches every call fault (needless, wrong arguments, missing, wrong order) and none of the
# runs whose calls were right but whose *answer* was not (`unsupported`: a waterproof rating the
# search never returned; `contradicted`: "238.80, which is under 200"). That is the other half
# of judging an agent: is the answer grounded in what the tools returned?
#
# ## 4 · Is the answer grounded in the documents?
#
# `GroundednessJudge` asks a model twice: first for the answer's factual claims, then for a
# verdict on each claim against the item's `context` (`supported`, `contradicted`, `not_found`).
# The score is the share supported. An answer with no claim ("You're welcome!") has nothing to
# check: the row is **unscored** with that reason, never 0 or 1.
#
# **The embedded model first, honestly.** `local_adapter()` is the 135M-parameter SmolLM2 that
# ships with the package. Asked for a JSON list of claims, it writes prose instead, so every row
# is unscored, with the reason and its raw reply kept for audit:

# %%
from llm_connect.adapters import local_adapter

small = GroundednessJudge(local_adapter(), seed=0)
tried = judge_many(small, conversations.head(2).assign(baseline=""), concurrency=1, progress=False)
tried[["id", "status", "error"]]

# %% [markdown]
# So, as in the other tutorials, a scripted model stands in for a capable one:
# `tutorial_helpers.grounding_model` reads the answers and documents it is shown (never the labels),
# lists each sentence that states something as a claim, and calls a claim `supported` when one
# document holds most of its words and all of its numbers, `contradicted` when it holds the words
# but not the numbers. A crude rule: it cannot do arithmetic or read a negation, which is
# exactly what the comparison with people below will show. Swap in
# `OpenAICompatibleAdapter("gpt-4o-mini")` to judge for real. (`baseline=""`: groundedness needs
# no reference answer, but the runner still asks for the column.)

# %%
# NBVAL_CHECK_OUTPUT
stand_in = ScriptedAdapter(tutorial_helpers.grounding_model(pd.concat([conversations, runs])))
grounded = GroundednessJudge(stand_in, seed=0)
judged_turns = judge_many(grounded, conversations.assign(baseline=""), progress=False)
print(judged_turns["status"].value_counts().to_dict())
print(judged_turns.loc[judged_turns["status"] == "unscored", ["candidate", "error"]].head(2).to_string(
    index=False, max_colwidth=60))
print(pd.crosstab(judged_turns["flaw"], judged_turns["quality_score"].round(2)).to_string())

# %% [markdown]
# One turn in detail: each claim with its verdict and the document that decided it.

# %%
# NBVAL_CHECK_OUTPUT
row = judged_turns.set_index("id").loc["conv-06-t2"]
print(row["prompt"], "->", row["candidate"])
one = grounded.judge(as_response(""), as_response(row["candidate"]), prompt=row["prompt"], run_config=RunConfig(),
                     context=row["context"])
for claim in one.details["claims"]:
    print(f"  {claim['verdict']:12s} doc {claim['document']}: {claim['claim']}")
print("people:", row["human"], "/", conversations.set_index("id").loc["conv-06-t2", "notes"])

# %% [markdown]
# The rule calls "membership is free for everyone" supported: the document says *membership is
# free* (for residents; others pay 20 euros). A negation or an exception defeats word overlap;
# a capable model reads it.
#
# ## 5 · The judges against the people
#
# The verdict of the groundedness judge is "every claim supported" (score 1); unscored turns are
# left out (they are not "wrong"). `agreement_table` gives the agreement and Cohen's kappa with
# bootstrap intervals. One caveat: the turns of one conversation are not independent (the same
# documents, the same assistant), so intervals that resample turns one by one are somewhat too
# narrow; resampling whole conversations is the honest bootstrap for such data.

# %%
# NBVAL_CHECK_OUTPUT
people = (conversations["human"] == "yes").astype(float)
turn_scores = pd.DataFrame({"score_groundedness": judged_turns["quality_score"], "score_human": people})
table = agreement_table(turn_scores, ["groundedness", "human"], thresholds={"groundedness": 1.0}, n_boot=500, seed=0)
print(table.frame[["judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa", "kappa_low", "kappa_high"]]
      .round(2).to_string(index=False))

# %% [markdown]
# Where they disagree is where to look next: turns the people accepted that the rule could not
# verify (arithmetic such as "420 euros a year", advice and instructions), and the two
# contradictions it took for support.

# %%
# NBVAL_CHECK_OUTPUT
disagree = judged_turns[(judged_turns["status"] == "scored")
                        & ((judged_turns["quality_score"] >= 1.0) != (judged_turns["human"] == "yes"))]
print(disagree[["id", "human", "quality_score", "candidate"]].to_string(index=False, max_colwidth=70))

# %% [markdown]
# For the agent runs, the trajectory judge against the people, and the groundedness check of the
# final answers against the tool results:

# %%
# NBVAL_CHECK_OUTPUT
judged_answers = judge_many(grounded, runs, progress=False)  # runs have a baseline: the reference run
run_scores = pd.DataFrame({
    "score_trajectory": judged_runs["quality_score"],
    "score_groundedness": judged_answers["quality_score"],
    "score_human": (runs["human"] == "yes").astype(float),
})
runs_table = agreement_table(run_scores, ["trajectory", "groundedness", "human"],
                             thresholds={"groundedness": 1.0}, n_boot=500, seed=0)
frame = runs_table.frame
print(frame.loc[frame["judge_b"] == "human", ["judge_a", "n", "percent_agreement", "cohen_kappa"]]
      .round(2).to_string(index=False))
print(judged_answers[["id", "flaw", "quality_score", "notes"]].to_string(index=False, max_colwidth=60))

# %% [markdown]
# The trajectory judge agrees with the people on 13 of the 15 runs; the two it misses are the
# runs whose calls were right and whose answers were not. The stand-in's groundedness check is
# no help here: a run's answer *computes* from the tool results (189 euros at 11.52 kroner is
# 2,177 kroner), and a claim whose number appears in no document is "contradicted" or "not found"
# by a rule that cannot multiply. That is the check to give a capable model; the two judges then cover
# each other's blind spots.
#
# With fifteen runs the intervals are wide (print `runs_table` to see them): this is a tutorial's
# data set, not evidence about any judge. On your own logs: label a sample of turns or whole
# conversations with the Labeller (`Labeller(items, ..., unit="turn")`, or `unit="conversation"`
# for one label per conversation, recorded once under the conversation's id and never copied onto
# its turns), judge every turn, and compare as above. See `docs/guides/conversations.md`.

# %%
against_people = frame[frame["judge_b"] == "human"].set_index("judge_a")
assert round(against_people.loc["trajectory", "percent_agreement"] * 15) == 13
assert (judged_runs.loc[runs["flaw"].isin(["needless-call", "wrong-args", "missing-call", "wrong-order"]),
                        "quality_score"] == 0.0).all()
