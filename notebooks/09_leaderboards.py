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
# # 9 · Leaderboards: rank models with a judge, check the ranking against people, and re-judge
#
# Users compare *models*, not single answers. This notebook turns pairwise
# judgments into a ranking you can defend:
#
# 1. people's leaderboard from the bundled pairwise data (Bradley–Terry ratings
#    on the Elo scale, bootstrap intervals, Chatbot Arena rank ranges);
# 2. a judge's leaderboard from the same pairs (`judge_many` with a
#    `PairwiseJudge`, read by `battles`), set beside people's with
#    `compare_leaderboards`;
# 3. the length-controlled win rate (AlpacaEval 2's regression), which exposes a
#    judge that rewards long answers;
# 4. a small tournament (`tournament`) among answers the embedded SmolLM2 model
#    writes and the answers in the data;
# 5. repeated judging (`epochs=`): the same comparison judged several times,
#    the scores reduced, and the judge's run-to-run reliability.

# %%
from pathlib import Path

import pandas as pd

from llm_connect import PairwiseJudge, judge_many, leaderboard
from llm_connect.calibration import battle_outcomes, compare_leaderboards
from llm_connect.stats import length_controlled_win_rate
from llm_connect.views import plot_leaderboard

DATA = Path("../data")                                # notebooks run with their own folder as cwd
pairs = pd.read_json(DATA / "pairwise.jsonl", lines=True, dtype=False)
print(f"{len(pairs)} pairs, {pairs['prompt'].nunique()} prompts")

# %% [markdown]
# ## People's leaderboard
#
# Each row is one comparison: two answers to a prompt, by two (pretend) models,
# and which one people found better. That is a *battle*: `model_a`, `model_b`
# and a `winner` of `a`, `b` or `tie`.

# %%
human = pd.DataFrame({"model_a": pairs["answer_a_model"], "model_b": pairs["answer_b_model"],
                      "winner": pairs["better"]})
human_board = leaderboard(human, n_boot=300, seed=0)
human_board

# %%
# NBVAL_CHECK_OUTPUT
print(human_board[["model", "rank", "n"]].to_string(index=False))

# %% [markdown]
# Read the intervals before the order: with 70 comparisons of 7 models,
# neighbouring models' rank ranges overlap, and a rank range of 1–4 means the
# data cannot tell that model from three others.

# %%
ax = plot_leaderboard(human_board)

# %% [markdown]
# ## A judge's leaderboard
#
# > **A scripted stand-in judge.** Comparing 70 long pairs in both orders with
# > the embedded 135M model would take minutes and its verdicts are near chance,
# > so the judge here is a `ScriptedAdapter` from `llm_connect.testing` whose
# > reply function (below) sees only the two answers in the prompt and prefers
# > the **longer** one — the length bias real judges show — except on a quarter
# > of the calls, drawn from a hash of the answers and the call's seed, where it
# > picks the other (a sampled model's noise). It never reads `better`. It goes
# > through the same `PairwiseJudge` parser, runner and both-orders logic
# > as a hosted model would.
#
# `judge_many` takes answer A as the `baseline` and answer B as the
# `candidate`; naming their models in `baseline_model` and `candidate_model`
# is all `battles` needs to read the judge's verdicts as battles.

# %%
import hashlib
import re

from llm_connect.testing import ScriptedAdapter


def longer_answer_judge(prompt: str, run_config) -> str:
    """Prefers the longer of the two answers shown; slips on a seeded quarter of the calls."""
    a, b = (re.search(rf"<<<ANSWER {x} (\S+)>>>\n(.*?)\n<<<END ANSWER {x} ", prompt, re.S).group(2) for x in "AB")
    seed = run_config.model_params.get("seed", 0)
    draw = hashlib.sha256(f"{a}|{b}|{seed}".encode()).digest()[0] / 256
    longer = "A" if len(a) >= len(b) else "B"
    winner = longer if draw >= 0.25 else {"A": "B", "B": "A"}[longer]
    return f'{{"notes": "the more complete answer", "winner": "{winner}"}}'


judge = PairwiseJudge(ScriptedAdapter(longer_answer_judge), grader_id="longer-judge")
items = pd.DataFrame({"id": pairs["id"], "prompt": pairs["prompt"], "baseline": pairs["answer_a"],
                      "candidate": pairs["answer_b"], "baseline_model": pairs["answer_a_model"],
                      "candidate_model": pairs["answer_b_model"]})
judged = judge_many(judge, items, progress=False)
judge_battles = battle_outcomes(judged)
print(f"{len(judge_battles)} battles, {judge_battles.attrs['dropped']} without a winner; "
      f"winners: {judge_battles['winner'].value_counts().to_dict()}")

# %% [markdown]
# A pair whose two orders disagree is a tie: the judge's preference flipped
# with the position, so it is not a preference. `compare_leaderboards` fits
# both boards on the same comparisons, gives their rank correlation and the
# judge's agreement with people per pair of models.

# %%
both = pd.DataFrame({"model_a": pairs["answer_a_model"], "model_b": pairs["answer_b_model"],
                     "judge": judged["verdict"].map({"baseline": "a", "candidate": "b", "tie": "tie"}),
                     "human": pairs["better"]})
comparison = compare_leaderboards(both, judge_winner="judge", human_winner="human", n_boot=300, seed=0)
comparison

# %% [markdown]
# ## Length control
#
# AlpacaEval 2 (Dubois et al. 2024) fits, per model, a logistic regression of
# its wins on a model term and the length difference of the two answers, then
# reports the win rate with the length term set to zero. `length_coef` is
# positive when the winner tends to be the longer answer. Each pair is counted
# from both sides here, each model against the field.

# %%
def from_both_sides(winner: pd.Series) -> pd.DataFrame:
    flip = {"a": "b", "b": "a", "tie": "tie"}
    la, lb = pairs["answer_a"].str.len(), pairs["answer_b"].str.len()
    first = pd.DataFrame({"model": pairs["answer_a_model"], "winner": winner, "length_a": la, "length_b": lb})
    second = pd.DataFrame({"model": pairs["answer_b_model"], "winner": winner.map(flip), "length_a": lb,
                           "length_b": la})
    out = pd.concat([first, second], ignore_index=True)
    out["baseline_model"] = "the field"
    return out


lc_judge = length_controlled_win_rate(from_both_sides(both["judge"]), n_boot=200, seed=0)
lc_human = length_controlled_win_rate(from_both_sides(both["human"]), n_boot=200, seed=0)
pd.DataFrame({"judge length_coef": lc_judge.set_index("model")["length_coef"],
              "people length_coef": lc_human.set_index("model")["length_coef"]}).round(2)

# %% [markdown]
# The judge's length coefficients are positive for every model: its wins
# follow length. People's are negative: in this data set the longer answer is
# more often the padded or wrong one (it is better in 26 of 70 pairs), and a
# model whose wins length alone separates gets a coefficient that runs off
# (read it as "strongly negative", not as a number). A judge with coefficients
# like these ranks verbose models up whatever their answers say; the
# length-controlled win rate below takes that term out.

# %%
lc_judge[["model", "n", "win_rate", "lc_win_rate", "lc_win_rate_low", "lc_win_rate_high", "length_coef"]].round(3)

# %% [markdown]
# ## A tournament with answers the embedded model writes
#
# `tournament` takes N models' answers to the same prompts (a long frame: a
# prompt, a model, an answer), schedules the comparisons on each prompt (all
# pairs here; `pairs=k` draws k at random per prompt), lets a coin decide which
# model is shown as A, and runs them through the runner. SmolLM2-135M
# writes its own answers to six of the prompts, beside the two in the data.

# %%
from llm_connect import RunConfig
from llm_connect.adapters import LlamaCppAdapter

smol = LlamaCppAdapter()   # SmolLM2-135M-Instruct, in-process, offline
few = pairs.drop_duplicates("prompt").head(6)
written = [smol.complete(p, RunConfig(max_tokens=40, model_params={"seed": 0})).content.strip() for p in few["prompt"]]
answers = pd.concat([
    pd.DataFrame({"prompt": few["prompt"], "model": few["answer_a_model"], "answer": few["answer_a"]}),
    pd.DataFrame({"prompt": few["prompt"], "model": few["answer_b_model"], "answer": few["answer_b"]}),
    pd.DataFrame({"prompt": few["prompt"], "model": "smollm2-135m (here)", "answer": written}),
], ignore_index=True)
print(answers[answers["model"] == "smollm2-135m (here)"]["answer"].str.slice(0, 80).to_string())

# %%
from llm_connect.grading import tournament

games = tournament(judge, answers, seed=0, progress=False)
games[["prompt", "model_a", "model_b", "winner", "status"]]

# %% [markdown]
# The frame holds `model_a`, `model_b` and `winner` beside the judge's columns,
# so `leaderboard(games)` reads it as it is (a battle the judge could not decide
# has no winner and is left out). Six prompts are far too few for a ranking:
# the point is the shape, not the order.

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(games)} battles over {games['prompt'].nunique()} prompts, "
      f"{games.attrs['tournament']['decided']} decided")

# %% [markdown]
# ## Repeated judging: epochs
#
# Many hosted judges are not deterministic even at temperature 0. `epochs=k`
# judges each comparison k times — each epoch with another seed, so a response
# cache never serves a repeat — and `reducer=` (`mean`, `median`, `mode`, `max`,
# `min` or a function) reduces the epochs' scores. `epoch_scores` keeps them
# (NaN for an epoch that could not be scored, never 0), `score_spread` says how
# far they lie apart, and `df.attrs["reliability"]` measures how much the judge
# agrees with itself across epochs: percent agreement and Krippendorff's alpha,
# the epochs as coders.

# %%
from llm_connect.grading import epoch_reliability

repeated = judge_many(judge, items, epochs=5, reducer="mode", progress=False)
repeated[["id", "epoch_scores", "quality_score", "verdict", "score_spread"]].head(8)

# %%
reliability = epoch_reliability(repeated)
reliability

# %% [markdown]
# Per epoch, the share of comparisons whose two orders agreed (position
# consistency): a judge whose answers flip with the order calls those pairs a
# tie in that epoch.

# %%
pd.DataFrame(repeated.attrs["position_consistency"])

# %% [markdown]
# The reliability goes on the judge's card beside its agreement with people
# (`card_from_scores(..., reliability=repeated)` or `card.with_reliability(...)`),
# and the reduced verdicts make a steadier leaderboard than any single epoch.
# The embedded SmolLM2 judge decodes greedily, so its epochs repeat each other
# exactly: its reliability is perfect agreement and an undefined alpha, which
# says nothing about whether it is right.

# %%
steady = battle_outcomes(repeated)
steady_board = leaderboard(steady, n_boot=300, seed=0)
assert len(repeated) == len(items) and repeated["epochs_scored"].max() == 5
assert 0.0 <= reliability.agreement <= 1.0 and reliability.epochs == 5
assert set(steady_board["model"]) == set(human_board["model"])
assert (lc_judge["length_coef"] > 0).all()
