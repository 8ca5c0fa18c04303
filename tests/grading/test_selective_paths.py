"""A selective judge's guarantee where features meet: resuming, the ledger, calibrate(), panels, budgets.

Jung, Brahman & Choi (ICLR 2025, arXiv:2407.18370) guarantee the agreement of a selective judge on the
items it judges. Each test here takes one path by which a score could reach an item the judge abstains on,
or by which the judge returned could differ from the one calibrated: resuming from a ledger
(``grade_dataset`` on a local Ray cluster, ``judge_many``), ``calibrate(thresholds={J: "best"})``,
``calibrate(epochs=k)``, a majority panel, a cascade's budget. Judges are scripted (their replies are
functions of the texts they are shown and the seed, never of people's labels).
"""

from __future__ import annotations

import functools
import json
import re
import sys

import numpy as np
import pandas as pd
import pytest
from strategies import SCRIPTED_ITEM, calibrated_p_yes, selective_items, yes_no_adapter, yes_no_judge

from llm_connect import LLMResponse, RunConfig
from llm_connect.calibration import calibrate
from llm_connect.errors import UncalibratedJudgeError, ValidationError
from llm_connect.grading import (
    FunctionJudge,
    LLMJudge,
    PairwiseJudge,
    PanelJudge,
    SelectiveJudge,
    TokenF1Judge,
    cascade,
    judge_many,
)
from llm_connect.quality import QualityLedger
from llm_connect.stats.selective import Guarantee, Guaranteed, fixed_sequence_cutoff
from llm_connect.testing import ScriptedAdapter

#: Ray's own deprecation notices (e.g. DataContext's use_push_based_shuffle) are not ours
RAY_WARNINGS = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
ITEM = SCRIPTED_ITEM
_items, _calibrated, _yes_no_adapter, _llm = selective_items, calibrated_p_yes, yes_no_adapter, yes_no_judge


def _lexical_items(n, seed=3):
    """Token-F1 items: half the candidates are the reference, half four random words; people say whether they
    match (a deterministic judge, the same in every Ray actor)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    base = [" ".join(rng.choice(words, 4)) for _ in range(n)]
    cand = [b if rng.random() < 0.5 else " ".join(rng.choice(words, 4)) for b in base]
    return pd.DataFrame({"id": range(n), "prompt": [f"q{i}" for i in range(n)], "baseline": base,
                         "candidate": cand, "human": [c == b for b, c in zip(base, cand, strict=True)]})


def _selective_f1(data):
    """A token-F1 judge calibrated as a selective judge on ``data`` (deterministic: the same in every actor)."""
    return SelectiveJudge(TokenF1Judge(), alpha=0.2, delta=0.2).calibrate(data, human="human", progress=False)


def _plain_f1():
    return TokenF1Judge()


def _llm_cascade(data, screen_p, strong_p):
    """A cascade of two scripted yes/no LLM judges (each with a rubric hash) calibrated on ``data``
    (deterministic: the same in every actor)."""
    chain = cascade([_llm(screen_p, "screen"), _llm(strong_p, "strong")])
    return chain.calibrate(data, human="human", progress=False)


# -- identity: a selective judge's records are its own ------------------------------------------------------


def test_a_selective_judge_and_a_cascade_have_their_own_ledger_identity():
    items = _items(200, seed=1)
    inner = _llm(items["p_yes"].to_numpy())
    judge = SelectiveJudge(inner, alpha=0.2, delta=0.2).calibrate(items, human="human", progress=False)
    assert 0.5 < judge.cutoff < 1 and judge.grader_id == inner.grader_id  # the pinned default
    assert judge.rubric_hash != inner.rubric_hash  # ...but never the plain judge's records
    assert judge.rubric_hash == judge.replace().rubric_hash == judge.with_seed_offset(3).rubric_hash  # stable
    for change in ({"cutoff": judge.cutoff + 0.01}, {"alpha": 0.1}, {"delta": 0.05}, {"threshold": 0.6}):
        assert judge.replace(**change).rubric_hash != judge.rubric_hash, change
    assert judge.scorer.rubric_hash == inner.rubric_hash  # the scorer's scores are the judge's own
    pooled = SelectiveJudge(inner, epochs=3)
    assert pooled.scorer.rubric_hash not in (inner.rubric_hash, None)  # a mean of 3 is not one judgment
    assert SelectiveJudge(TokenF1Judge()).rubric_hash is not None  # a judge without a rubric too

    ledger_items = items.iloc[:100]
    chain = cascade([_llm(items["p_yes"].to_numpy(), "a"), _llm(items["p_yes"].to_numpy(), "b")]).calibrate(
        ledger_items, human="human", progress=False)
    assert chain.rubric_hash not in {s.rubric_hash for s in chain.stages}
    assert chain.rubric_hash == chain.with_seed_offset(2).rubric_hash
    assert cascade(chain.stages, alpha=0.2).rubric_hash != chain.rubric_hash


def test_judge_many_records_a_selective_judge_apart_from_its_inner_judge(tmp_path):
    """A ledger holding the plain judge's judgments of every item: the selective judge neither reads them nor
    records under their identity, and the items below its cut-off stay without a score."""
    items = _items(300, seed=2)
    cal, fresh = items.iloc[:150].reset_index(drop=True), items.iloc[150:].reset_index(drop=True)
    inner = _llm(items["p_yes"].to_numpy())
    judge = SelectiveJudge(inner, alpha=0.2, delta=0.2).calibrate(cal, human="human", progress=False)
    assert 0.5 < judge.cutoff < 1
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    judge_many(inner, fresh, progress=False, ledger=ledger, task_type="qa")  # every item, scored
    df = judge_many(judge, fresh, progress=False, ledger=ledger, task_type="qa")
    below = df["confidence"] < judge.cutoff
    assert below.any() and (df.loc[below, "status"] == "abstained").all()
    assert df.loc[below, "quality_score"].isna().all()
    by_hash = pd.Series([o.tags.get("rubric_hash") for o in ledger.read_all()]).value_counts()
    assert by_hash[inner.rubric_hash] == len(fresh)
    assert by_hash[judge.rubric_hash] == int((df["status"] == "scored").sum())  # the confident items only


def test_a_cascade_records_every_row_under_its_own_identity(tmp_path):
    items = _items(800, seed=4)
    cal, fresh = items.iloc[:400].reset_index(drop=True), items.iloc[400:].reset_index(drop=True)
    screen = _calibrated(items["human"] == "yes", low=0.5, seed=1, sure=0.4)
    strong = _calibrated(items["human"] == "yes", low=0.6, seed=2, sure=0.3)
    chain = cascade([_llm(screen, "screen"), _llm(strong, "strong")]).calibrate(cal, human="human", progress=False)
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    df = chain.judge_many(fresh, ledger=ledger, task_type="qa", progress=False)
    assert set(df.loc[df["status"] == "scored", "decided_by"]) == {"screen", "strong"}
    recorded = ledger.read_all()
    assert len(recorded) == int((df["status"] == "scored").sum())
    assert {(o.tags["grader_id"], o.tags["rubric_hash"]) for o in recorded} == {(chain.grader_id, chain.rubric_hash)}


# -- resuming grade_dataset (a local Ray cluster) -------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster(ray_session):
    """The session's Ray cluster (tests/conftest.py), with the factories above sent to the workers by value."""
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray_session.cloudpickle.register_pickle_by_value(sys.modules["strategies"])  # and the builders they call
    return ray_session


@RAY_WARNINGS
def test_grade_dataset_never_resumes_a_selective_judge_from_its_inner_judges_records(ray_cluster, tmp_path):
    from llm_connect.distributed import RESUMED, grade_dataset

    data = _lexical_items(240)
    calib, fresh = data.iloc[:160], data.iloc[160:].drop(columns="human").reset_index(drop=True)
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    kw = {"ledger": ledger, "task_type": "qa", "num_actors": 1, "concurrency": 4, "batch_size": 40}
    plain = grade_dataset(ray_cluster.data.from_pandas(fresh), _plain_f1, **kw).to_pandas()
    assert (plain["status"] == "scored").all()  # the plain judge's records: every item, same grader id
    local = judge_many(_selective_f1(calib), fresh, progress=False)
    assert (local["status"] == "abstained").any()
    out = grade_dataset(ray_cluster.data.from_pandas(fresh), functools.partial(_selective_f1, calib),
                        **kw).to_pandas().sort_values("id").reset_index(drop=True)
    assert out["status"].tolist() == local["status"].tolist()  # no abstention comes back scored
    assert out.loc[out["status"] == "abstained", "quality_score"].isna().all()
    assert not out[RESUMED].any()  # nothing of the plain judge's was read back
    again = grade_dataset(ray_cluster.data.from_pandas(fresh), functools.partial(_selective_f1, calib),
                          **kw).to_pandas().sort_values("id").reset_index(drop=True)
    scored = again["status"] == "scored"
    assert again.loc[scored, RESUMED].all() and not again.loc[~scored, RESUMED].any()  # its own records only
    assert again["status"].tolist() == local["status"].tolist()


@RAY_WARNINGS
def test_grade_dataset_resumes_a_cascade_and_records_each_decided_item_once(ray_cluster, tmp_path):
    from llm_connect.distributed import RESUMED, grade_dataset

    items = _items(800, seed=4)
    calib, fresh = items.iloc[:400].reset_index(drop=True), items.iloc[400:].drop(columns="human")
    fresh = fresh.reset_index(drop=True)
    screen = _calibrated(items["human"] == "yes", low=0.5, seed=1, sure=0.4)
    strong = _calibrated(items["human"] == "yes", low=0.6, seed=2, sure=0.3)
    factory = functools.partial(_llm_cascade, calib, screen, strong)
    local = factory().judge_many(fresh, progress=False)
    decided = int((local["status"] == "scored").sum())
    assert set(local.loc[local["status"] == "scored", "decided_by"]) == {"screen", "strong"}
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    kw = {"ledger": ledger, "task_type": "qa", "num_actors": 1, "concurrency": 4, "batch_size": 100}
    first = grade_dataset(ray_cluster.data.from_pandas(fresh), factory, **kw).to_pandas()
    assert not first[RESUMED].any() and int((first["status"] == "scored").sum()) == decided
    again = grade_dataset(ray_cluster.data.from_pandas(fresh), factory, **kw).to_pandas()
    scored = again["status"] == "scored"
    assert int(again[RESUMED].sum()) == decided and again.loc[scored, RESUMED].all()  # nothing decided is paid again
    ids = [o.tags["item_id"] for o in ledger.read_all()]
    assert len(ids) == len(set(ids)) == decided  # each decided item recorded once, not twice


# -- calibrate(): the judge returned is the judge calibrated ------------------------------------------------


def _graded_items(n, seed):
    """Scores in 0..1 and people who pass an answer at about 0.75 of it (so the best threshold is not 0.5)."""
    rng = np.random.default_rng(seed)
    score = np.round(rng.uniform(size=n), 3)
    human = (score + rng.normal(0, 0.08, size=n)) >= 0.75
    return pd.DataFrame({"id": range(n), "prompt": [f"q{i}" for i in range(n)], "baseline": ["ref"] * n,
                         "candidate": [f"{s:.3f}" for s in score], "human": human})


def _graded_judge():
    return FunctionJudge(lambda b, c: float(c), grader_id="graded")


def test_calibrate_best_threshold_returns_the_judge_at_the_threshold_it_was_calibrated_at():
    cal = _graded_items(400, seed=1)
    report = calibrate([_graded_judge()], cal, human="human", thresholds={"graded": "best"}, selective=(0.1, 0.1),
                       probes=None, n_boot=20, progress=False)
    t = report.threshold_of("graded")
    assert 0.65 <= t <= 0.85
    chosen = report.selective["graded"]
    assert chosen.threshold == t  # not the 0.5 its confidence was first read at
    table = chosen.calibration_frame
    again = judge_many(chosen.scorer, cal, progress=False)  # the same judge on the same items...
    assert np.allclose(again["confidence"].to_numpy(dtype=float), table["confidence"].to_numpy(dtype=float))
    assert np.allclose(report.scores["confidence_graded"], table["confidence"])  # ...as the report shows it
    assert "chosen on these labels" in chosen.note
    fresh = _graded_items(3000, seed=2)
    df = judge_many(chosen, fresh, progress=False)
    judged = df[df["status"] == "scored"]
    assert 0 < len(judged) < len(df)
    agree = ((judged["quality_score"] >= chosen.threshold) == judged["human"]).mean()
    assert agree >= chosen.guaranteed_agreement - 0.02  # at its own threshold (it was 76% at 0.5)


def _varying_reply(prompt, run_config):
    """A JSON judge whose score of ``item-i`` moves with the seed (as a sampled LLM's does)."""
    i = int(ITEM.search(prompt).group(1))
    seed = int(run_config.model_params.get("seed", 0) or 0)
    base = (i * 37 % 100) / 100
    noise = np.random.default_rng([i, seed]).normal(0, 0.25)
    return json.dumps({"notes": "x", "quality_score": round(float(min(1.0, max(0.0, base + noise))), 3)})


def test_calibrate_epochs_returns_a_judge_that_judges_as_it_was_calibrated():
    items = _items(120, seed=7)
    items["human"] = np.where(np.arange(120) * 37 % 100 >= 50, "yes", "no")
    adapter = ScriptedAdapter(_varying_reply)
    judge = LLMJudge(adapter, grader_id="varying", seed=0)
    report = calibrate([judge], items, human="human", epochs=3, selective=(0.2, 0.2), probes=None, n_boot=20,
                       progress=False)
    chosen = report.selective["varying"]
    before = len(adapter.calls)
    again = judge_many(chosen.scorer, items, progress=False)
    assert len(adapter.calls) - before == 3 * len(items)  # three judgments an item, as calibrated
    assert chosen.repeats == 3 and chosen.source == "margin"
    table = chosen.calibration_frame
    assert np.allclose(again["quality_score"].to_numpy(dtype=float), report.scores["score_varying"])
    assert np.allclose(again["confidence"].to_numpy(dtype=float), table["confidence"].to_numpy(dtype=float))
    with pytest.raises(ValidationError, match="epochs=1"):  # a selective judge judged k times is not the one calibrated
        judge_many(chosen, items, epochs=2, progress=False)


def test_calibrate_pairwise_data_refuses_selective():
    data = pd.DataFrame({"prompt": ["q1", "q2"], "candidate_a": ["a", "b"], "candidate_b": ["b", "a"],
                         "preference": ["a", "b"]})
    judge = PairwiseJudge(ScriptedAdapter(['{"winner": "A"}'], cycle=True))
    with pytest.raises(ValidationError, match="pairwise data"):
        calibrate([judge], data, human="preference", selective=True, probes=None, progress=False)


# -- the judge's own score, one budget, clear errors ---------------------------------------------------------


def test_a_selective_majority_panel_scores_as_the_panel():
    members = [FunctionJudge(lambda b, c, v=v: v, grader_id=f"m{i}") for i, v in enumerate((0.0, 0.6, 0.6))]
    panel = PanelJudge(members, aggregate="majority")
    args = (LLMResponse("ref", "b", "r"), LLMResponse("c", "c", "m"))
    assert panel.judge(*args, prompt="q", run_config=RunConfig()).quality_score == 1.0  # two of three pass
    selective = SelectiveJudge(panel, cutoff=0.6)
    assert selective.source == "panel"
    result = selective.judge(*args, prompt="q", run_config=RunConfig())
    assert result.quality_score == 1.0 and result.details["votes"] == {"pass": 2, "fail": 1}
    assert result.details["confidence"] == pytest.approx(2 / 3)
    median = SelectiveJudge(PanelJudge(members, aggregate="median")).scorer.judge(*args, prompt="q",
                                                                                   run_config=RunConfig())
    assert median.quality_score == pytest.approx(0.6)


def test_a_cascade_calibration_spends_one_budget():
    items = _items(100, seed=9)
    screen_adapter = _yes_no_adapter(items["p_yes"].to_numpy(), cost=0.01)
    strong_adapter = _yes_no_adapter(items["p_yes"].to_numpy(), cost=0.01)
    chain = cascade([LLMJudge(screen_adapter, grader_id="screen", scoring="yes-no"),
                     LLMJudge(strong_adapter, grader_id="strong", scoring="yes-no")], alpha=0.2, delta=0.2)
    chain.calibrate(items, human="human", progress=False, budget=0.5, concurrency=1)
    spent = 0.01 * (len(screen_adapter.calls) + len(strong_adapter.calls))
    assert spent <= 0.5 + 0.01 + 1e-9  # the limit, plus at most the one call in flight


def test_plotting_an_uncalibrated_selective_judge_says_to_calibrate():
    from llm_connect.views import plot_risk_coverage

    for judge in (SelectiveJudge(TokenF1Judge()), SelectiveJudge(TokenF1Judge(), cutoff=0.8)):
        with pytest.raises(UncalibratedJudgeError, match=r"\.calibrate\(data, human=COLUMN\)"):
            judge.plot()
        with pytest.raises(UncalibratedJudgeError, match="calibrate"):
            plot_risk_coverage(judge)


def test_one_guarantee_value_everywhere():
    """``alpha``, ``delta``, ``cutoff``, ``coverage``, ``guaranteed_agreement`` and ``confidence_level`` live in one
    frozen Guarantee: a calibrated judge holds its calibration's, a cascade's summary the cascade's, and every
    number of the guarantee is read from it; a calibration made at another level is refused, not mixed in."""
    items = _items(120, seed=11)
    inner = _llm(items["p_yes"].to_numpy())
    judge = SelectiveJudge(inner, alpha=0.2).calibrate(items, human="human", progress=False)
    chain = cascade([_llm(items["p_yes"].to_numpy())], alpha=0.2).calibrate(items, human="human", progress=False)
    summary = chain.summary(chain.judge_many(items, progress=False))
    cut = fixed_sequence_cutoff(np.linspace(0, 1, 50), np.ones(50, bool), alpha=0.2)
    assert judge.guarantee == judge.calibration.guarantee and summary.guarantee is chain.guarantee
    assert judge.guarantee == Guarantee(0.2, 0.1, judge.calibration.cutoff, judge.calibration.coverage)
    assert (judge.cutoff, judge.coverage) == (judge.guarantee.cutoff, judge.guarantee.coverage)
    assert chain.coverage == chain.guarantee.coverage == pytest.approx(sum(s["coverage"] for s in chain.calibration))
    for holder in (judge, judge.calibration, chain, summary, cut):
        g = holder.guarantee
        assert isinstance(holder, Guaranteed) and (holder.alpha, holder.delta) == (g.alpha, g.delta) == (0.2, 0.1)
        assert holder.guaranteed_agreement == g.guaranteed_agreement == pytest.approx(0.8)
        assert holder.confidence_level == g.confidence_level == pytest.approx(0.9)
    assert {k: judge.summary()[k] for k in g.to_dict()} == judge.guarantee.to_dict()
    assert summary.to_dict()["guaranteed_agreement"] == pytest.approx(0.8)
    with pytest.raises(ValidationError):
        Guarantee(0.0, 0.1)
    with pytest.raises(ValidationError, match="calibrate again"):
        SelectiveJudge(inner, alpha=0.1, calibration=judge.calibration)
    with pytest.raises(ValidationError, match="calibrate again"):
        SelectiveJudge(inner, alpha=0.2, cutoff=0.99, calibration=judge.calibration)
    moved = judge.replace(cutoff=judge.cutoff + 0.01)  # no longer the calibrated cut-off: no guarantee claimed
    assert moved.calibration is None and "set by hand" in moved.describe() and np.isnan(moved.coverage)
    assert judge.replace(seed=3).calibration is judge.calibration


def test_a_selective_judge_calibrates_on_one_turn_per_conversation_and_says_so():
    """The exact binomial bound needs independent items: turns of one conversation are not, so with a
    ``conversation_id`` column the judge calibrates on one labelled turn per conversation (seeded), its note
    says so, and ``cluster=None`` (independent rows, said by the caller) uses every turn."""
    n_conv, turns = 60, 5
    data = _items(n_conv * turns, seed=3)
    data["conversation_id"] = np.repeat([f"c{i}" for i in range(n_conv)], turns)
    p_yes = _calibrated(data["human"] == "yes", low=0.9, seed=4)
    judge = SelectiveJudge(_llm(p_yes), alpha=0.2, delta=0.2)
    clustered = judge.calibrate(data, human="human", progress=False, seed=1)
    assert clustered.calibration.n == n_conv  # one turn of each conversation
    assert "one labelled turn per conversation" in clustered.note and "'conversation_id'" in clustered.note
    kept = clustered.calibration_frame["id"].map(lambda i: int(re.search(r"q(\d+)$", str(i)).group(1)))
    assert (kept // turns).nunique() == n_conv
    assert clustered.calibrate(data, human="human", progress=False, seed=1).cutoff == clustered.cutoff  # seeded
    independent = judge.calibrate(data, human="human", progress=False, cluster=None)
    assert independent.calibration.n == n_conv * turns and "conversation" not in independent.note
    few = data[data["conversation_id"].isin([f"c{i}" for i in range(5)])]
    with pytest.raises(ValidationError, match="label more conversations"):
        judge.calibrate(few, human="human", progress=False)
    with pytest.raises(ValidationError, match="cluster='session'"):
        judge.calibrate(data, human="human", progress=False, cluster="session")
    # calibrate(selective=...) takes the same care
    report = calibrate({"llm": _llm(p_yes)}, data, human="human", selective={"alpha": 0.2, "delta": 0.2},
                       probes=None, n_boot=0, progress=False)
    assert "one labelled turn per conversation" in report.selective["llm"].note
    assert report.selective["llm"].calibration.n == n_conv
