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
# # 5 · Compound judges: spend more judge calls, get a more reliable verdict
#
# One LLM call is a noisy judge. `llm_connect` offers four ways to spend more
# calls on a judgment, each reporting what every call cost and what it saw:
#
# | judge | calls per item | what it fixes |
# |---|---|---|
# | a **pipeline** from YAML (`llm_connect.pipelines.from_config`): judge → verify → vote | here 6 | one judge's random mistakes |
# | `PairwiseJudge` in both orders | 2 | position bias in A/B comparisons |
# | `PanelJudge`: several models, aggregated | one per member | one model's blind spots |
# | `CascadeJudge`: cheap judge first, dear one when unsure | 1 or 2 | the cost of always asking the dear one |
#
# All of them are judges: they work with `judge_many`, `PairedGrader`,
# `grade_many` and the ledger like any other.

# %%
from pathlib import Path

import pandas as pd

import tutorial_helpers

DATA = Path("../data")                                # notebooks run with their own folder as cwd
qa = pd.read_json(DATA / "qa_calibration.jsonl", lines=True, dtype=False)

# %% [markdown]
# > **About the scripted judge.** Every model in this notebook is scripted (its
# > reply functions are in `tutorial_helpers.py`, next to this notebook), except
# > one tiny real run of the embedded SmolLM2 at the end of the pipeline section.
# > Each scripted model knows the human label and errs on a fixed, seeded share of
# > the items, so you can see how much each compound judge recovers. It is a
# > `ScriptedAdapter` (from `llm_connect.testing`) with a reply function: a real
# > adapter as far as the package is concerned — it receives the exact judge
# > prompt and its reply goes through the same parser, batch runtime, ledger and
# > statistics as a hosted model's would. It stands in for a capable judge such as
# > a hosted GPT-4o-mini or Claude (`OpenAICompatibleAdapter`,
# > `AnthropicAdapter`), which this offline tutorial cannot call, and for which
# > the embedded SmolLM2-135M is far too weak (notebook 1 shows it). Its biases
# > are planted on purpose so you can see the diagnostics find them; with a real
# > judge you do not know them in advance.

# %% [markdown]
# ## A judge → verify → vote pipeline from YAML
#
# `judge_verify_vote.yaml` (next to this notebook) describes three judges that
# answer yes/no after an explanation, one verifier per judge who may overturn
# its verdict, and a majority vote:

# %%
print(Path("judge_verify_vote.yaml").read_text())

# %% [markdown]
# The scripted model answers both kinds of prompt: as a judge it is wrong 25% of
# the time (its mistakes differ between the three copies, which get seeds 1, 2
# and 3), and on 10% of the items its first reply lacks the `Verdict:` line, which
# makes the unit retry with a note saying what was wrong. As a verifier it
# catches most wrong verdicts.

# %%
pipeline_model = tutorial_helpers.pipeline_model(qa)   # answers both the judge and the verify prompts

# %%
from llm_connect.pipelines import from_config
from llm_connect.testing import ScriptedAdapter

model = ScriptedAdapter(pipeline_model, adapter_id="scripted:judge-model", model_id="scripted-judge",
                        cost_per_call=0.0004)
pipeline = from_config("judge_verify_vote.yaml", adapter=model)
pipeline

# %% [markdown]
# `run_many(items)` runs every item (its independent units concurrently) and
# returns one row per item: the final verdict and score, `passed` at the
# threshold, the status, how many `calls` it took, their tokens and cost, and
# the full `trace`. For comparison, the same judge alone, once:

# %%
items = qa.sample(30, random_state=3)[["id", "prompt", "baseline", "candidate", "human"]]
judged = pipeline.run_many(items, progress=False)

import yaml

judge_unit = yaml.safe_load(Path("judge_verify_vote.yaml").read_text())["pipeline"][0]["layer"]["unit"]
single = from_config({"name": "single-judge", "threshold": 0.5, "pipeline": [judge_unit]}, adapter=model)
alone = single.run_many(items, progress=False)
judged[["id", "candidate", "human", "verdict", "passed", "status", "calls", "judge_cost_usd"]].head()

# %%
# NBVAL_CHECK_OUTPUT
truth = items["human"] == "yes"
for name, frame in [("single judge", alone), ("judge-verify-vote", judged)]:
    totals = frame.attrs["totals"]
    print(f"{name:18} accuracy {(frame['passed'] == truth).mean():.3f}  "
          f"{totals['calls']} calls  ${totals['judge_cost_usd']:.4f}  statuses {frame['status'].value_counts().to_dict()}")

# %% [markdown]
# Six calls and a bit per item buy a clearly better verdict. Every step is in the
# trace: which node, which attempt, the parsed verdict, the reply, tokens, cost
# and latency. Here is an item whose first judge reply could not be parsed and
# was retried:

# %%
retried = judged[judged["calls"] > 6].iloc[0]
print(retried["candidate"], "| human:", retried["human"], "| verdict:", retried["verdict"])
retried["trace"]

# %%
retried["trace"].to_frame()[["node", "status", "attempt", "verdict", "score", "reply", "cost_usd"]]

# %% [markdown]
# `pipeline.as_judge()` makes the pipeline an ordinary judge, e.g. for
# `judge_many` with a ledger.
#
# ### The same pipeline shape on the embedded SmolLM2-135M
#
# One real, offline run to show the path end to end: a judge and a verifier on
# one item, with short replies and no retries (about ten seconds on a small CPU).
# **Do not expect a useful verdict from a 135M model**: it often does not
# follow the reply format, and then the unit has no verdict and the row is
# *unscored* — which the trace shows.

# %%
from llm_connect.adapters import LlamaCppAdapter

tiny = from_config({"name": "smollm2-judge-verify", "threshold": 0.5, "pipeline": [
    {"type": "boolean-judge", "name": "judge", "retries": 0, "max_tokens": 12, "seed": 0,
     "prompt": "Question: {prompt}\nReference answer: {baseline}\nCandidate answer: {candidate}\n"
               "Is the candidate answer correct?"},
    {"type": "verify", "name": "verify", "retries": 0, "max_tokens": 12,
     "prompt": "Question: {prompt}\nReference answer: {baseline}\nCandidate answer: {candidate}"},
]}, adapter=LlamaCppAdapter(logits_all=False))
real = tiny.run_many(qa[qa["id"] == "qa-001"], progress=False)
real[["candidate", "verdict", "status", "error", "calls"]]

# %%
real["trace"].iloc[0]

# %% [markdown]
# ## Pairwise, in both orders
#
# `PairwiseJudge` shows the model the baseline and the candidate as answers A
# and B and asks which is better — by default **twice**, once in each order.
# When the two orders agree, that is the verdict (`candidate` 1.0, `baseline`
# 0.0); when they disagree, the judge was swayed by position and the verdict is
# a `tie` (0.5). The scripted model below (as in notebook 4) picks the better of
# the 70 pairs of `data/pairwise.jsonl`, except on the 15 where it is unsure and
# picks A.

# %%
pw = pd.read_json(DATA / "pairwise.jsonl", lines=True, dtype=False)
pairwise_model = tutorial_helpers.pairwise_model(pw)   # knows which answer of each pair is the better one

# PairwiseJudge compares the item's baseline with its candidate: show answer_a as the baseline,
# answer_b as the candidate. The "human" verdict is then: is the candidate (b) the better one?
pw_items = pd.DataFrame({
    "id": pw["id"], "prompt": pw["prompt"], "baseline": pw["answer_a"], "candidate": pw["answer_b"],
    "b_better": (pw["better"] == "b").map({True: "yes", False: "no"}), "category": pw["category"],
})

# %%
from llm_connect import PairwiseJudge

pair_model = ScriptedAdapter(pairwise_model, adapter_id="scripted:pairwise", model_id="scripted-pairwise",
                             cost_per_call=0.0005)
both = PairwiseJudge(pair_model, seed=0)
one = PairwiseJudge(pair_model, both_orders=False, grader_id="pairwise-one-order")
pairs = both.judge_many(pw_items, progress=False)
pairs_one = one.judge_many(pw_items, progress=False)
pairs[["id", "category", "b_better", "verdict", "consistent", "quality_score", "judge_cost_usd"]].head()

# %%
# NBVAL_CHECK_OUTPUT
for name, frame in [("one order", pairs_one), ("both orders", pairs)]:
    summary = PairwiseJudge.summary(frame)
    decided = frame[frame["verdict"] != "tie"]
    right = (decided["verdict"] == decided["b_better"].map({"yes": "candidate", "no": "baseline"})).sum()
    print(f"{name:11} decided {len(decided)}/{summary.n}, right {right}, ties {summary.ties}, "
          f"consistent {summary.consistent}/{summary.n_both_orders}, "
          f"answer A won {summary.first_position_rate:.2f} of the time, cost ${frame['judge_cost_usd'].sum():.4f}")

# %% [markdown]
# Asked once, the judge decides every pair but gets the unsure ones wrong
# whenever the better answer was B, and answer A wins far more than half the
# time — the signature of position bias. Asked in both orders, every decided pair
# is right and the position-biased ones become ties, for twice the cost. Each
# judgment keeps both prompts and replies:

# %%
inconsistent = pairs[pairs["consistent"] == False].iloc[0]  # noqa: E712
print(inconsistent["notes"])
[{k: order[k] for k in ("order", "winner", "verdict", "raw_reply")} for order in inconsistent["details"]["orders"]]

# %% [markdown]
# ## A panel of judges
#
# `PanelJudge` asks several judges — typically different models, with different
# blind spots — and aggregates: `mean`, `median` or `majority` (pass/fail votes
# at `threshold`; a split panel does not pass). A member whose reply is unusable
# abstains instead of voting. The three scripted members below are wrong on 15%,
# 20% and 25% of the items, and the cheapest one refuses 5%.

# %%
from functools import partial

# judge_model(error_rate, refuse_rate=..., unsure_over_words=..., name=...): a reply function for LLMJudge
judge_model = partial(tutorial_helpers.judge_model, qa)

# %%
from llm_connect import LLMJudge, PanelJudge

members = [
    LLMJudge(ScriptedAdapter(judge_model(0.15, name="a"), adapter_id="scripted:model-a", model_id="model-a",
                             cost_per_call=0.0006), grader_id="model_a"),
    LLMJudge(ScriptedAdapter(judge_model(0.20, name="b"), adapter_id="scripted:model-b", model_id="model-b",
                             cost_per_call=0.0004), grader_id="model_b"),
    LLMJudge(ScriptedAdapter(judge_model(0.25, refuse_rate=0.05, name="c"), adapter_id="scripted:model-c",
                             model_id="model-c", cost_per_call=0.0001), grader_id="model_c"),
]
panel = PanelJudge(members, aggregate="majority")
voted = panel.judge_many(qa, progress=False)
voted[["id", "human", "score_model_a", "score_model_b", "score_model_c", "quality_score", "passed", "notes"]].head()

# %%
# NBVAL_CHECK_OUTPUT
truth = qa["human"] == "yes"
for column in ["score_model_a", "score_model_b", "score_model_c", "quality_score"]:
    scored = voted[column].notna()
    accuracy = ((voted.loc[scored, column] >= 0.5) == truth[scored]).mean()
    print(f"{column:15} scored {scored.sum()}  accuracy {accuracy:.3f}")
print(f"panel cost ${voted['judge_cost_usd'].sum():.4f} for {len(voted)} items")

# %%
panel.agreement(voted)

# %% [markdown]
# The majority is right more often than its best member, because the members'
# mistakes fall on different items. Krippendorff's α between the members says
# how far they agree beyond chance (1 = always, 0 = no better than chance).
#
# ## A cascade: the cheap judge first
#
# `CascadeJudge(cheap, dear, band=(0.3, 0.7))` asks the cheap judge; only when
# its score falls inside the band (it is unsure) or its reply is unusable does it
# ask the dear one. Here the cheap model is sure of itself on answers of up to
# four words and answers 0.5 on longer ones; the dear model costs 30 times more
# and is rarely wrong.

# %%
from llm_connect import CascadeJudge

cheap = LLMJudge(ScriptedAdapter(judge_model(0.05, unsure_over_words=4, name="cheap"), adapter_id="scripted:cheap",
                                 model_id="cheap-model", cost_per_call=0.0001), grader_id="cheap")
dear = LLMJudge(ScriptedAdapter(judge_model(0.03, name="dear"), adapter_id="scripted:dear",
                                model_id="dear-model", cost_per_call=0.003), grader_id="dear")
cascade = CascadeJudge(cheap, dear, band=(0.3, 0.7))
cascaded = cascade.judge_many(qa, progress=False)
cascaded[["id", "candidate", "human", "cheap_score", "escalated", "dear_score", "quality_score", "judge_cost_usd"]].head()

# %%
# NBVAL_CHECK_OUTPUT
summary = CascadeJudge.summary(cascaded)
print(f"{summary.escalated} of {summary.n} escalated ({summary.share_escalated:.1%})")
print(f"cost ${summary.cost_usd:.4f} (cheap ${summary.cheap_cost_usd:.4f} + dear ${summary.dear_cost_usd:.4f}); "
      f"always dear: ${summary.always_dear_cost_usd:.4f}; saved {summary.saved_share:.1%}")
print(f"accuracy {((cascaded['quality_score'] >= 0.5) == (qa['human'] == 'yes')).mean():.3f}")

# %%
summary

# %% [markdown]
# Each row says why it escalated (or not) in `details`, and its `judge_cost_usd` is the
# sum of the calls it actually made.

# %%
cascaded.loc[cascaded["escalated"], "details"].iloc[0]

# %%
assert len(judged) == len(items) and set(judged["status"]) <= {"scored", "unscored", "error"}
assert (judged["passed"] == truth.loc[items.index]).mean() > (alone["passed"] == truth.loc[items.index]).mean()
assert judged.attrs["totals"]["calls"] > 6 * len(items) and len(real) == 1
assert len(pairs) == 70 and PairwiseJudge.summary(pairs).ties > 0 and pairs["judge_cost_usd"].eq(0.001).all()
assert len(voted) == 269 and voted["score_model_c"].isna().sum() > 0
assert 0 < summary.escalated < summary.n and summary.saved_usd > 0
