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
# # 10 · Align a judge: a rubric of your own, improved from people's labels, proven on labels it never saw
#
# The other notebooks grade answer *correctness* against a reference. Many
# questions are not like that: is a support agent's reply **polite**? There is
# no reference answer; the criteria are the rubric. This notebook
#
# 1. writes a rubric for politeness (`Rubric`: criteria, a scale, no reference)
#    and measures the embedded SmolLM2-135M judge with it against people's labels;
# 2. runs `align()`, which tries to improve the rubric from those labels (worked
#    examples drawn from the judge's disagreements with people, and the decision
#    threshold), ranks the candidates by cross-validation, and then measures the
#    original and the best candidate **once** on a held-out split that no step
#    of the selection saw — accepting the candidate only when the paired
#    bootstrap interval of the kappa difference lies above 0;
# 3. shows the judge card before and after.
#
# Everything runs offline on the embedded model. It is a 135M-parameter model,
# and the figures it reaches are reported as measured.

# %%
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")          # the embedded model loads from disk; never ask a hub
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # llama.cpp's threads wait quietly between steps

from pathlib import Path

import pandas as pd

DATA = Path("../data")                                  # notebooks run with their own folder as cwd
replies = pd.read_json(DATA / "politeness.jsonl", lines=True, dtype=False)

# %% [markdown]
# ## The data
#
# `data/politeness.jsonl`: 95 replies of a support agent to 48 customer
# messages, written and labelled by hand for this project (MIT, like the rest
# of it; `data/README.md` describes it). Each message has a polite reply and,
# mostly, an impolite one in a named style; `notes` says why, in a few words,
# as a labeller would. Politeness only: a polite refusal is polite, and a
# helpful but sarcastic reply is not.

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(replies)} replies to {replies['prompt'].nunique()} customer messages")
print(replies["human"].value_counts().to_dict())
print(replies.groupby("style")["human"].first().to_dict())

# %%
replies[["id", "prompt", "candidate", "human", "style", "notes"]].head(6)

# %% [markdown]
# ## A rubric is a value
#
# `Rubric(criteria, *, scale, examples, instructions, name, reference)`.
# `reference=False`: the judge is shown the reply and the customer's message,
# no reference answer, and the items need no `baseline` (a blank one, or no
# column at all, is no error). Its `hash` identifies
# it wherever scores are recorded (ledgers, judge cards), and it round-trips
# through YAML.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect.grading import Rubric

polite = Rubric(
    "Is the support agent's reply polite and respectful to the customer? Sarcasm, blame, shouting and a "
    "dismissive tone are not polite; a polite refusal is polite.",
    scale="binary", reference=False, name="politeness",
)
print(polite.to_yaml())
print("hash:", polite.hash, "| round trip:", Rubric.from_yaml(polite.to_yaml()) == polite)

# %% [markdown]
# ## The judge, and what it is shown
#
# `LLMJudge(LlamaCppAdapter(), rubric=polite)` is the embedded local judge: the
# rubric's criteria (and, later, its worked examples) form the system message,
# the same for every item, so llama.cpp decodes it once per rubric; each item
# adds only its own few tokens, and the verdict is the probability of "yes" at
# the next token. The adapter keeps its replies in a response cache (a
# temporary directory here), so `align` below does not pay again for judgments
# this cell already made.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect import LLMJudge, LLMResponse
from llm_connect.adapters import LlamaCppAdapter, ResponseCache

cache = ResponseCache(Path(tempfile.mkdtemp(prefix="align-cache-")))
judge = LLMJudge(LlamaCppAdapter(cache=cache), rubric=polite, seed=0)
print("[system]", judge.system_prompt, sep="\n")
print("[user]", judge.build_prompt(LLMResponse("", "-", "-"), LLMResponse("Full.", "agent", "-"),
                                   "Can I book an appointment for Saturday?"), sep="\n")

# %% [markdown]
# ## How well does it agree with people, as written?
#
# Every reply judged once (the progress bar shows the run), then Cohen's kappa
# against people's labels at the rubric's threshold (0.5) with its bootstrap
# interval, as a judge card.

# %%
from llm_connect import judge_many
from llm_connect.calibration import card_from_scores
from llm_connect.stats.labels import parse_labels

items = replies                     # no baseline column: the rubric shows no reference (reference=False)
scored = judge_many(judge, items, concurrency=1)
# a judge that cannot run (no model, no llama.cpp) fails every row: stop here with its first error
assert (scored["status"] == "scored").all(), scored["error"].dropna().head(1).tolist()
people = parse_labels(replies["human"])
before = card_from_scores(scored["quality_score"], people, grader_id=judge.grader_id, rubric_hash=judge.rubric_hash)
before

# %% [markdown]
# Read the card's kappa interval: where it contains 0, the judge cannot be told
# from chance on this task. The spread of its P(yes) tells the same story: a
# judge that does not separate polite from rude replies gives both much the
# same probability.

# %%
scored.assign(polite=replies["human"]).groupby("polite")["quality_score"].describe().round(3)

# %% [markdown]
# ## Align
#
# `align(judge, data, human="human", ...)` sets aside 30% of the labelled
# replies (stratified by label) before anything else. On the other 70% it
# proposes candidates — here worked-example sets of 4 replies (disagreements
# with people first, balanced by label) and the decision threshold of P(yes) —
# and scores each by 3-fold cross-validation: in each fold the candidate is
# built from the other folds and judged on this one. Then the original and the
# best candidate are measured once on the held-out replies.
#
# The first line it prints, before any call, is what it will spend: judge calls
# (and dollars, for a model with a known price; the embedded model is free).
# `candidates="auto"` (the default) would also try 2 and 8 examples, and with
# `optimizer=` criteria rewritten by another model; we keep the run short.

# %%
from llm_connect.alignment import align

result = align(judge, items, human="human", candidates=["examples:4", "threshold"], folds=3, seed=0,
               concurrency=1)
result

# %%
# NBVAL_CHECK_OUTPUT
print(f"held out: {len(result.heldout_ids)} replies; selection: {result.provenance['split']['selection']} "
      f"in {result.provenance['split']['folds']} folds")
print(f"planned judge calls: {result.plan['judge_calls']}")
print("worked examples drawn from the held-out split:",
      len({e.item_id for e in result.aligned_rubric.examples} & set(result.heldout_ids)))

# %% [markdown]
# `result.heldout` is the proof: both rubrics on the same held-out replies,
# kappa with its interval and percent agreement; `result.difference` is the
# paired bootstrap interval of the kappa difference. `result.summary()` says in
# one line what was decided.

# %%
print(result.summary())
result.heldout[["rubric", "candidate", "n", "kappa", "kappa_low", "kappa_high", "agreement"]].round(3)

# %% [markdown]
# Each candidate in each fold, and the pooled out-of-fold figures that ranked
# them (`fold == "all"`). These are *selection* figures: the best of several
# is optimistic, which is why the decision is taken on the held-out split.

# %%
result.candidates.round(3)

# %% [markdown]
# ## The card before and after
#
# `result.cards()`: the original's and the best candidate's cards, both
# measured on the held-out replies. When the candidate is accepted,
# `result.save_card(ledger)` keeps the new card in the registry beside a
# ledger, under the new rubric's hash, with its provenance (the parent rubric,
# the labels, the split, the held-out figures); the parent's card stays, and
# routing reads the card of the rubric that wrote the scores.

# %%
original_card, aligned_card = result.cards()
original_card

# %%
aligned_card

# %% [markdown]
# The remaining disagreements on held-out replies, for a person to read:

# %%
result.disagreements().head(10)

# %% [markdown]
# ## What a 135M model reaches
#
# On this task SmolLM2-135M does not tell polite from rude replies: its
# probability of "yes" barely moves with the reply, and its kappa interval
# against people contains 0, with worked examples or without. Cross-validation
# may still rank a candidate first — with a dozen replies a fold, some
# candidate always looks better by chance — but on the held-out replies the
# difference interval includes 0, and `align` keeps the original: *kept: no
# held-out improvement*. That refusal is the point: a better-looking number from
# the selection step is not an improvement until labels it never saw confirm
# it. With a capable judge (`--judge openai:MODEL`, or a larger GGUF through
# `LlamaCppAdapter(path)`) the same call is how a rubric earns its worked
# examples, and `llm-connect align` does it from the command line.

# %%
assert not {e.item_id for e in result.aligned_rubric.examples} & set(result.heldout_ids)
assert set(result.heldout["rubric"]) == {"original", "aligned"}
assert result.judge.rubric is result.rubric  # its rubric_hash: the rubric's under yes-no scoring
assert result.accepted == (result.difference.low > 0)
assert result.accepted or result.reason.startswith("kept: no held-out improvement")
assert len(result.heldout_ids) == round(0.3 * 48) + round(0.3 * 47)
