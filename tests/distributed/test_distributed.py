"""grade_dataset on a real local Ray cluster, against the loopback server (no mocks).

The cluster is the session's ``ray.init(num_cpus=2)`` (``ray_session`` in tests/conftest.py); every judgment is an
HTTP call to a :class:`~llm_connect.testing.LoopbackServer` on 127.0.0.1, which counts and timestamps what it received.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from llm_connect.errors import MissingDependencyError, ValidationError
from llm_connect.testing import LoopbackServer

SKIP_MESSAGE = "ray is not installed: pip install 'llm-connect[ray]'"
# Ray's own deprecation notices (e.g. DataContext's use_push_based_shuffle) are not ours
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")


def make_judge(base_url: str):
    """The judge factory the actors call (each builds its own adapter and HTTP session)."""
    from llm_connect import LLMJudge
    from llm_connect.adapters import OpenAICompatibleAdapter

    return LLMJudge(OpenAICompatibleAdapter("loopback-model", base_url=base_url, max_retries=0), seed=0)


def make_registered_judge(base_url: str, registry: str):
    """The same judge, and the actor that built it told to the test's registry (so the test can kill it)."""
    import ray

    judge = make_judge(base_url)
    ray.get(ray.get_actor(registry).add.remote(ray.get_runtime_context().current_actor))
    return judge


class Registry:
    """A named Ray actor the pool's actors tell their handles to (make_registered_judge), so a test can kill one."""

    def __init__(self) -> None:
        self.handles: list = []

    def add(self, handle) -> None:
        self.handles.append(handle)

    def all(self) -> list:
        return self.handles


def start_registry(ray, name: str):
    return ray.remote(num_cpus=0)(Registry).options(name=name).remote()


def items(n: int, start: int = 0) -> pd.DataFrame:
    ids = range(start, start + n)
    return pd.DataFrame({
        "id": list(ids),
        "prompt": [f"Question #{i}: what number follows {i}?" for i in ids],
        "baseline": [str(i + 1) for i in ids],
        "candidate": [f"It is {i + 1}." for i in ids],
    })


@pytest.fixture(scope="module")
def ray_cluster(ray_session):
    """The session's Ray cluster (tests/conftest.py), with the factories above sent to the workers by value."""
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray_session


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def fresh(server):
    server.reset()
    return server


def test_a_missing_ray_names_the_extra():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import llm_connect, llm_connect.distributed as d\n"
        "assert 'ray' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n    d.grade_dataset(None, lambda: None)\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingDependencyError")
    assert "pip install -e '.[ray]'" in proc.stdout and "'llm-connect[" not in proc.stdout
    assert issubclass(MissingDependencyError, ImportError)


def test_rate_limit_is_validated():
    from llm_connect.distributed import RateLimit

    assert RateLimit.of({"requests_per_minute": 60}) == RateLimit(requests_per_minute=60)
    for bad in ({}, {"requests_per_minute": 0}, {"requests_per_minute": True}, {"rpm": 5},
                {"tokens_per_minute": 100, "block": 0}):
        with pytest.raises(ValidationError):
            RateLimit.of(bad)
    assert RateLimit(requests_per_minute=100).block_requests() == 4  # at most 1/20 of a minute's, minus one
    assert RateLimit(requests_per_minute=6000).block_requests() == 8


def test_actors_are_sized_to_leave_the_tasks_in_front_of_them_a_cpu():
    from llm_connect.distributed import ACTOR_CPUS, UPSTREAM_CPUS, actor_cpus

    assert actor_cpus(None, 4, 2.0) == ACTOR_CPUS  # room enough: the default
    assert actor_cpus(None, 1, 1.0) == 0.0  # one CPU: the actor takes none, the split of the dataset gets it
    assert actor_cpus(None, 3, 1.5) == 0.16 and 1.5 - UPSTREAM_CPUS >= 3 * 0.16
    assert actor_cpus(None, 2, None) == ACTOR_CPUS and actor_cpus(2.0, 2, None) == 2.0  # unknown: Ray decides
    assert actor_cpus(0.5, 2, 2.0) == 0.5
    with pytest.raises(ValidationError, match=r"1 actor\(s\) x num_cpus=1 .* cluster's 1 CPU.*wait forever.*"
                                              r"num_cpus=0 or less.*ray.init\(num_cpus=N\)"):
        actor_cpus(1.0, 1, 1.0)


ONE_CPU_JOB = """
import functools, json, sys
import pandas as pd
import ray
from llm_connect import ExactMatchJudge
from llm_connect.distributed import grade_dataset
from llm_connect.errors import ValidationError

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
ray.data.DataContext.get_current().enable_progress_bars = False
items = pd.DataFrame({"id": range(20), "prompt": ["q"] * 20, "baseline": ["a"] * 20, "candidate": ["a", "b"] * 10})
out = grade_dataset(ray.data.from_pandas(items), functools.partial(ExactMatchJudge), num_actors=1,
                    batch_size=8).to_pandas()
try:
    grade_dataset(ray.data.from_pandas(items), functools.partial(ExactMatchJudge), num_actors=1, num_cpus=1)
    refused = ""
except ValidationError as exc:
    refused = str(exc)
print(json.dumps({"rows": len(out), "scored": int((out["status"] == "scored").sum()),
                  "ids": sorted(int(i) for i in out["id"]), "refused": refused}))
ray.shutdown()
"""


@pytest.mark.timeout(420)  # a regression hangs forever: fail instead
def test_a_one_cpu_cluster_finishes_with_the_default_actors_and_refuses_actors_that_would_hang():
    """ray.init(num_cpus=1) with one actor: the actor held the only CPU while the repartition in front of it
    waited for one, forever. Now the default actor takes none and the job ends; an actor asked to hold the CPU
    is refused before anything runs, with what would fit."""
    pytest.importorskip("ray", reason=SKIP_MESSAGE)
    env = {**os.environ, "RAY_raylet_start_wait_time_s": "180"}  # a busy machine starts a node slowly
    proc = subprocess.run([sys.executable, "-c", ONE_CPU_JOB], capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rows"] == 20 and result["scored"] == 20 and result["ids"] == list(range(20))
    assert "wait forever" in result["refused"] and "num_cpus=0" in result["refused"]


def test_bad_arguments_are_refused(ray_cluster, tmp_path):
    from llm_connect import QualityLedger
    from llm_connect.distributed import grade_dataset

    ds = ray_cluster.data.from_pandas(items(4))
    factory = functools.partial(make_judge, "http://127.0.0.1:9/v1")
    with pytest.raises(ValidationError, match=r"ray\.data\.Dataset"):
        grade_dataset(items(4), factory)
    with pytest.raises(ValidationError, match="zero-argument callable"):
        grade_dataset(ds, "judge")
    with pytest.raises(ValidationError, match="not be one"):
        grade_dataset(ds, make_judge("http://127.0.0.1:9/v1"))
    with pytest.raises(ValidationError, match="num_actors"):
        grade_dataset(ds, factory, num_actors=0)
    with pytest.raises(ValidationError, match=r"a ledger needs task_type='...'"):
        grade_dataset(ds, factory, ledger=QualityLedger(tmp_path / "l.jsonl"))
    with pytest.raises(ValidationError, match=r"ledger must be a ledger .*got object"):
        grade_dataset(ds, factory, ledger=object(), task_type="qa")
    with pytest.raises(ValidationError, match=r"concurrency must be a positive integer \(how many items"):
        grade_dataset(ds, factory, concurrency=0)
    with pytest.raises(ValidationError, match=r"budget must be >= 0 USD"):
        grade_dataset(ds, factory, budget=-1)
    with pytest.raises(ValidationError, match="candidate"):
        grade_dataset(ray_cluster.data.from_pandas(items(4).drop(columns="candidate")), factory)
    with pytest.raises(ValidationError, match="'id' column"):
        grade_dataset(ray_cluster.data.from_pandas(items(4).drop(columns="id")), factory,
                      ledger=QualityLedger(tmp_path / "l.jsonl"), task_type="qa")
    with pytest.raises(ValidationError, match="max_restarts"):
        grade_dataset(ds, factory, ray_remote_args={"max_restarts": 0})


def test_ten_thousand_items_through_four_actors_give_each_row_once(ray_cluster, fresh):
    from llm_connect import judge_many
    from llm_connect.distributed import grade_dataset

    n = 10_000
    df = items(n)
    df.loc[[3, 4_000], "baseline"] = None  # a failed item is a row with its error, never dropped
    out = grade_dataset(ray_cluster.data.from_pandas(df), functools.partial(make_judge, fresh.base_url),
                        num_actors=4, concurrency=16, batch_size=500).to_pandas()
    assert len(out) == n
    assert out["id"].is_unique and set(out["id"]) == set(range(n))
    by_id = out.set_index("id")
    assert by_id.loc[[3, 4_000], "status"].tolist() == ["error", "error"]
    assert by_id.loc[3, "error"].startswith("ValidationError: baseline is missing")
    assert (by_id.drop(index=[3, 4_000])["status"] == "scored").all()
    assert fresh.stats()["total"] == n - 2  # every item asked once: no retries, no duplicates

    local = judge_many(make_judge(fresh.base_url), df.head(50), progress=False)
    assert list(out.columns) == list(local.columns)  # the columns judge_many returns, in its order
    ours = by_id.loc[range(50), "quality_score"].astype(float).fillna(-1.0)
    assert ours.tolist() == local["quality_score"].fillna(-1.0).tolist()  # the same scores (row 3: NaN in both)


def test_an_actor_killed_mid_run_loses_nothing(ray_cluster, fresh):
    from llm_connect.distributed import grade_dataset

    registry = start_registry(ray_cluster, "h6-kill-registry")
    n = 3_000
    factory = functools.partial(make_registered_judge, fresh.base_url, "h6-kill-registry")
    ds = grade_dataset(ray_cluster.data.from_pandas(items(n)), factory, num_actors=2, concurrency=8, batch_size=250)
    killed = []

    def kill_one_mid_run() -> None:
        deadline = time.monotonic() + 120
        while fresh.stats()["total"] < n // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        handles = ray_cluster.get(registry.all.remote())
        ray_cluster.kill(handles[0], no_restart=False)  # Ray restarts it and runs its batch again
        killed.append(fresh.stats()["total"])

    killer = threading.Thread(target=kill_one_mid_run)
    killer.start()
    out = ds.to_pandas()
    killer.join()
    assert killed and killed[0] < n, "the kill came after the run had finished"
    assert len(out) == n
    assert out["id"].is_unique and set(out["id"]) == set(range(n))
    assert (out["status"] == "scored").all()
    assert len(ray_cluster.get(registry.all.remote())) > 2  # the killed actor was restarted (it registered again)
    ray_cluster.kill(registry)


def test_the_shared_rate_limit_holds_across_four_actors(ray_cluster, fresh):
    """R = 3,600 requests a minute, i.e. 60 a second: the property "at most R (+5%) in any minute" is checked
    on every 5-second window (300 requests +5%), so the test takes ~10 s instead of minutes; the limiter does
    not know the window, only the rate, so it is the same property."""
    from llm_connect.distributed import RateLimit, grade_dataset

    n, per_second, window = 600, 60.0, 5.0
    limit = RateLimit(requests_per_minute=per_second * 60)
    out = grade_dataset(ray_cluster.data.from_pandas(items(n)), functools.partial(make_judge, fresh.base_url),
                        num_actors=4, concurrency=16, batch_size=40, rate_limit=limit).to_pandas()
    assert len(out) == n and (out["status"] == "scored").all()
    times = sorted(r.received_at for r in fresh.requests)
    assert len(times) == n
    worst = max(sum(1 for t in times[k:] if t < start + window) for k, start in enumerate(times))
    per_half_second = pd.Series(times).sub(times[0]).floordiv(0.5).value_counts().sort_index().tolist()
    assert worst <= window * per_second * 1.05, (worst, per_half_second)
    # and the limit is a pace, not a stall: the run took about n / rate seconds
    assert times[-1] - times[0] >= (n - limit.block_requests() * 4 - 1) / per_second


def test_a_rerun_with_the_same_ledger_skips_what_was_graded(ray_cluster, fresh, tmp_path):
    """A ParquetLedger, the ledger many hosts share (the same two calls, by_task_type and extend, serve a
    QualityLedger: see the in-process test below)."""
    from llm_connect.distributed import RESUMED, grade_dataset
    from llm_connect.quality import ParquetLedger

    ledger = ParquetLedger(tmp_path / "ledger")
    factory = functools.partial(make_judge, fresh.base_url)
    kw = {"ledger": ledger, "task_type": "qa", "num_actors": 2, "concurrency": 8, "batch_size": 50}
    first = grade_dataset(ray_cluster.data.from_pandas(items(200)), factory, **kw).to_pandas()
    assert fresh.stats()["total"] == 200 and not first[RESUMED].any()
    assert first["ledger_error"].isna().all()
    fresh.reset()

    again = grade_dataset(ray_cluster.data.from_pandas(items(400)), factory, **kw).to_pandas()
    assert fresh.stats()["total"] == 200  # the server saw only the rest
    assert sorted(asked_ids(fresh)) == list(range(200, 400))
    assert len(again) == 400 and again["id"].is_unique
    by_id = again.set_index("id").sort_index()
    assert by_id[RESUMED].tolist() == [True] * 200 + [False] * 200
    assert (by_id["status"] == "scored").all()
    assert by_id.loc[range(200), "quality_score"].tolist() == first.sort_values("id")["quality_score"].tolist()
    observations = ledger.read_all()
    assert len(observations) == 400
    assert sorted(o.tags["item_id"] for o in observations) == list(range(400))
    assert len({o.tags["run_id"] for o in observations}) == 2
    assert list(again.columns)[-3:] == ["judge_cost_usd", "ledger_error", RESUMED]


def test_a_ledger_given_by_a_relative_path_is_one_file_for_every_actor(ray_cluster, fresh, tmp_path, monkeypatch):
    """grade_dataset(ledger="ledger.jsonl"): opened with open_ledger, made absolute first (the actors' working
    directory is not the caller's), so both actors record to it and a rerun resumes from it."""
    from llm_connect import QualityLedger
    from llm_connect.distributed import RESUMED, grade_dataset

    monkeypatch.chdir(tmp_path)
    factory = functools.partial(make_judge, fresh.base_url)
    kw = {"ledger": "ledger.jsonl", "task_type": "qa", "num_actors": 2, "concurrency": 4, "batch_size": 10}
    first = grade_dataset(ray_cluster.data.from_pandas(items(40)), factory, **kw).to_pandas()
    assert (first["status"] == "scored").all() and first["ledger_error"].isna().all()
    assert sorted(o.tags["item_id"] for o in QualityLedger(tmp_path / "ledger.jsonl").read_all()) == list(range(40))
    fresh.reset()
    again = grade_dataset(ray_cluster.data.from_pandas(items(40)), factory, **kw).to_pandas()
    assert again[RESUMED].all() and fresh.stats()["total"] == 0


def asked_ids(server) -> list[int]:
    """The item ids whose judgments the server was asked for (each judge prompt holds its item's question)."""
    return [int(re.search(r"Question #(\d+):", r.body["messages"][-1]["content"]).group(1)) for r in server.requests]


def test_the_actor_resumes_from_a_jsonl_ledger_in_process(fresh, tmp_path):
    """The pool's actor class run in this process (no Ray): a QualityLedger, rows read back, ids of any type."""
    from llm_connect import QualityLedger
    from llm_connect.distributed import RESUMED
    from llm_connect.distributed._actor import GradingActor

    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    factory = functools.partial(make_judge, fresh.base_url)

    def actor() -> GradingActor:
        return GradingActor(factory, 4, ledger, "qa", None, None, None, run_id="r1")

    df = items(6)
    df["id"] = ["a", "b", 3, 4, "5", 6.0]  # text and numbers: "5" and 5 stay distinct, 6.0 is 6
    first = actor()(df.iloc[:3])
    assert first["status"].tolist() == ["scored"] * 3 and not first[RESUMED].any()
    df.loc[1, "status"] = "an input column named like a result"
    out = actor()(df)
    assert fresh.stats()["total"] == 6  # 3, then the 3 not yet graded
    assert out[RESUMED].tolist() == [True, True, True, False, False, False]
    assert out["quality_score"].iloc[:3].tolist() == first["quality_score"].tolist()
    assert out["status_input"].tolist()[1] == "an input column named like a result"
    assert list(out.columns) == [*df.columns.str.replace("^status$", "status_input", regex=True),
                                 *first.columns[len(df.columns) - 1:]]
    assert sorted(map(str, (o.tags["item_id"] for o in ledger.read_all()))) == ["3", "4", "5", "6", "a", "b"]


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_two_actors_that_judged_one_item_record_it_once_in_process(fresh, tmp_path, kind):
    """Two actors (here of two jobs, run ids r1 and r2) that both read the ledger before either wrote judge the
    same items: the later batch finds the earlier one's judgments when it records, and writes them not again
    (the rows stand, scored); each judgment is in the ledger once, for either ledger."""
    from llm_connect import ParquetLedger, QualityLedger
    from llm_connect.distributed._actor import GradingActor

    ledger = QualityLedger(tmp_path / "l.jsonl") if kind == "jsonl" else ParquetLedger(tmp_path / "pq")
    factory = functools.partial(make_judge, fresh.base_url)
    first, second = (GradingActor(factory, 4, ledger, "qa", None, None, None, run_id=r) for r in ("r1", "r2"))
    df = items(6)
    outs = [first(df.iloc[:4]), second(df.iloc[2:])]
    assert fresh.stats()["total"] == 8  # both judged items 2 and 3
    for out in outs:
        assert (out["status"] == "scored").all() and out["ledger_error"].isna().all()
    observations = ledger.read_all()
    assert sorted(o.tags["item_id"] for o in observations) == list(range(6))
    assert [o.tags["run_id"] for o in sorted(observations, key=lambda o: o.tags["item_id"])] == ["r1"] * 4 + ["r2"] * 2


def test_rows_of_one_item_in_two_ray_batches_are_recorded_once(ray_cluster, fresh, tmp_path):
    """A dataset holding each item twice, the copies in different Ray batches on different actors: every row
    comes out scored, and the ledger holds each judgment once (the actors record through extend_once)."""
    from llm_connect import QualityLedger
    from llm_connect.distributed import RESUMED, grade_dataset

    ledger = QualityLedger(tmp_path / "l.jsonl")
    df = pd.concat([items(60), items(60)], ignore_index=True)
    out = grade_dataset(ray_cluster.data.from_pandas(df), functools.partial(make_judge, fresh.base_url),
                        ledger=ledger, task_type="qa", num_actors=2, concurrency=8, batch_size=30).to_pandas()
    assert len(out) == 120 and (out["status"] == "scored").all() and out["ledger_error"].isna().all()
    assert fresh.stats()["total"] + int(out[RESUMED].sum()) == 120  # judged again unless read back as done
    assert sorted(o.tags["item_id"] for o in ledger.read_all()) == list(range(60))


def test_a_token_limit_paces_two_holders_and_settles_what_a_call_used(ray_cluster):
    """The token side of the shared schedule, with the limiter a real Ray actor and two permit holders (two
    actors' worth) on one loop: 120,000 tokens a minute (2,000 a second), items of 100 tokens."""
    import asyncio

    from llm_connect.distributed import RateLimit
    from llm_connect.distributed._rate_limit import Permits, Schedule

    limit = RateLimit(tokens_per_minute=120_000, output_tokens=0)
    limiter = ray_cluster.remote(num_cpus=0)(Schedule).remote()
    holders = [Permits(limiter, limit), Permits(limiter, limit)]
    times: list[float] = []

    async def run() -> None:
        async def one(holder: Permits) -> None:
            for _ in range(30):
                await holder.acquire(100)
                times.append(time.monotonic())
        await asyncio.gather(*(one(h) for h in holders))

    asyncio.run(run())
    span = max(times) - min(times)
    tokens = 100 * len(times)  # 6,000 tokens: 3 s at 2,000 a second
    assert tokens <= 2_000 * span + 2_000 * holders[0].block_s + 100  # the rate, plus at most a block early
    assert span >= (tokens - 2 * 2_000 * holders[0].block_s - 100) / 2_000  # a pace, not a burst
    assert ray_cluster.get(limiter.count.remote()) <= 2 * (span / holders[0].block_s + 2)  # a block a round trip

    holder = holders[0]
    holder.settle(100, 1_100)  # the call used 1,000 tokens more than reserved: owed as 0.5 s of the schedule
    assert holder.debt == 0.5
    holder.settle(100, 50)  # less than reserved: nothing is given back
    assert holder.debt == 0.5


def _selective_token_f1(data: pd.DataFrame):
    """A token-F1 judge calibrated as a selective judge on ``data`` (deterministic: the same in every actor)."""
    from llm_connect.grading import SelectiveJudge, TokenF1Judge

    return SelectiveJudge(TokenF1Judge(), alpha=0.2, delta=0.2).calibrate(data, human="human", progress=False)


def test_grade_dataset_takes_a_selective_judge_unchanged(ray_cluster):
    """grade_dataset runs a calibrated SelectiveJudge as judge_many does: the same statuses (abstained rows
    without a score) and the same scores, row for row (issue 27)."""
    from llm_connect import judge_many
    from llm_connect.distributed import grade_dataset

    rng = np.random.default_rng(3)
    n = 240
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    base = [" ".join(rng.choice(words, 4)) for _ in range(n)]
    cand = [b if rng.random() < 0.5 else " ".join(rng.choice(words, 4)) for b in base]
    df = pd.DataFrame({"id": range(n), "prompt": [f"q{i}" for i in range(n)], "baseline": base, "candidate": cand,
                       "human": [c == b for b, c in zip(base, cand, strict=True)]})
    calib, fresh_items = df.iloc[:160], df.iloc[160:].drop(columns="human").reset_index(drop=True)
    judge = _selective_token_f1(calib)
    local = judge_many(judge, fresh_items, progress=False)
    out = grade_dataset(ray_cluster.data.from_pandas(fresh_items), functools.partial(_selective_token_f1, calib),
                        num_actors=2, concurrency=4, batch_size=40).to_pandas().sort_values("id")
    assert out["status"].tolist() == local["status"].tolist()
    assert set(local["status"]) <= {"scored", "abstained"} and (local["status"] == "abstained").any()
    assert out["quality_score"].fillna(-1).tolist() == local["quality_score"].fillna(-1).tolist()
    assert out.loc[out["status"] == "abstained", "quality_score"].isna().all()  # never a score


def test_grade_dataset_batch_one_provider_batch_per_ray_batch_and_a_killed_actor_pays_nothing_twice(
        ray_cluster, tmp_path):
    """grade_dataset(batch=True, ledger=...): each Ray batch is one provider batch; an actor killed while it
    polls is restarted by Ray, runs its Ray batch again and collects the batch it submitted (state beside the
    ledger) instead of submitting it again; the rows and the ledger are those of the run without batch."""
    from llm_connect import QualityLedger, judge_many
    from llm_connect.adapters import BatchOptions
    from llm_connect.distributed import RESUMED, grade_dataset
    from llm_connect.testing._batch_api import batch_stats, release_batches

    registry = start_registry(ray_cluster, "batch-kill-registry")
    n, size = 120, 40
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer(batch={"hold": True}) as server:
        direct = judge_many(make_judge(server.base_url), items(n), progress=False)
        chats = server.stats()["total"]
        ds = grade_dataset(ray_cluster.data.from_pandas(items(n)),
                           functools.partial(make_registered_judge, server.base_url, "batch-kill-registry"),
                           num_actors=2, concurrency=8, batch_size=size, ledger=ledger, task_type="qa",
                           batch=BatchOptions(poll_interval_s=0.05, poll_max_interval_s=0.2))
        killed: list = []

        def kill_one_mid_poll() -> None:
            deadline = time.monotonic() + 120
            while (batch_stats(server).get("submissions", 0) < 2 or batch_stats(server).get("polls", 0) < 6) \
                    and time.monotonic() < deadline:  # both actors hold a submitted batch and poll it
                time.sleep(0.05)
            handles = ray_cluster.get(registry.all.remote())
            ray_cluster.kill(handles[0], no_restart=False)  # Ray restarts it and runs its Ray batch again
            killed.append(batch_stats(server)["submissions"])
            time.sleep(1.0)
            release_batches(server)

        killer = threading.Thread(target=kill_one_mid_poll)
        killer.start()
        out = ds.to_pandas()
        killer.join()
        stats = batch_stats(server)
        assert server.stats()["total"] == chats  # no direct chat call: every reply came from a provider batch
    assert killed == [2]
    assert stats["submissions"] == n // size  # one per Ray batch, none twice
    assert len(ray_cluster.get(registry.all.remote())) > 2  # the killed actor was restarted
    out = out.sort_values("id").reset_index(drop=True)
    assert len(out) == n and out["id"].is_unique and not out[RESUMED].any()
    assert out["quality_score"].tolist() == direct["quality_score"].tolist()
    assert out["status"].tolist() == direct["status"].tolist() == ["scored"] * n
    assert len(ledger.read_all()) == n
    ray_cluster.kill(registry)


def test_grade_dataset_batch_without_a_state_folder_warns_that_nothing_resumes(ray_cluster, fresh):
    from llm_connect.distributed import grade_dataset

    ds = ray_cluster.data.from_pandas(items(4))
    with pytest.warns(UserWarning, match="state has no folder .* submits its batches again"):
        grade_dataset(ds, functools.partial(make_judge, fresh.base_url), batch=True)  # lazy: nothing runs


def test_grade_dataset_takes_conversation_items_unchanged(ray_cluster, fresh, tmp_path):
    """Conversation items (messages with tool calls, trajectories, documents, conversation_id and turn) through
    Ray Data's Arrow round trip: every row as judge_many scores it, the judge shown each turn's transcript, and
    each turn recorded once under its conversation and turn."""
    from llm_connect import QualityLedger, TrajectoryMatchJudge, judge_many
    from llm_connect.conversations import per_turn
    from llm_connect.distributed import grade_dataset

    call = {"id": "k1", "type": "function", "function": {"name": "search", "arguments": '{"q": "louvre"}'}}
    conversations = []
    for c in range(6):
        messages = [{"role": "user", "content": f"Where is museum {c}?"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "k1", "content": "It is in Paris."},
                    {"role": "assistant", "content": "In Paris."},
                    {"role": "user", "content": "Thanks!"},
                    {"role": "assistant", "content": "You're welcome."}]
        conversations.append({"conversation_id": f"c{c}", "messages": messages, "context": ["Paris has museums."]})
    df = per_turn(conversations)
    df["baseline"] = [list(r) if isinstance(r, list) else r for r in df["candidate"]]
    ledger = QualityLedger(tmp_path / "l.jsonl")
    out = grade_dataset(ray_cluster.data.from_pandas(df), functools.partial(make_judge, fresh.base_url),
                        ledger=ledger, task_type="chat", num_actors=1, concurrency=4, batch_size=6).to_pandas()
    assert len(out) == 12 and (out["status"] == "scored").all(), out[["status", "error"]]
    prompts = [r.body["messages"][-1]["content"] for r in fresh.requests]
    assert sum("MESSAGE" in p and "Where is museum" in p for p in prompts) == 12
    recorded = sorted((o.tags["conversation_id"], o.tags["turn"]) for o in ledger.read_all())
    assert recorded == sorted((f"c{c}", t) for c in range(6) for t in (0, 1))
    direct = judge_many(TrajectoryMatchJudge("strict"), df, progress=False)
    traj = grade_dataset(ray_cluster.data.from_pandas(df), functools.partial(TrajectoryMatchJudge, "strict"),
                         num_actors=1, batch_size=6).to_pandas()
    assert traj.sort_values(["conversation_id", "turn"])["quality_score"].tolist() == \
        direct.sort_values(["conversation_id", "turn"])["quality_score"].tolist() == [1.0] * 12


# -- a budget for the whole job, and the limiter's burst bound with several requests per item ----------------


def _items(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(n)), "prompt": [f"q{i}" for i in range(n)],
                         "baseline": ["yes"] * n, "candidate": ["yes"] * n})


def paid_judge(cost: float):
    """A judge whose every call costs ``cost`` USD (built in each Ray actor)."""
    from llm_connect import LLMJudge
    from llm_connect.testing import ScriptedAdapter

    return LLMJudge(ScriptedAdapter(['{"quality_score": 1.0}'], cycle=True, cost_per_call=cost, latency_s=0.005))



@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
def test_grade_dataset_with_a_budget_in_the_run_config_shares_it_across_the_actors(ray_cluster):
    """``grade_dataset(ds, factory, run_config=RunConfig(budget_tracker=BudgetTracker(0.105)))`` died inside Ray
    ("cannot pickle '_thread.lock' object"). Now the cluster has one budget: 11 calls of $0.01 fit in $0.105
    whatever the number of actors, and the other rows say "budget"."""
    from llm_connect import BudgetTracker, RunConfig
    from llm_connect.distributed import grade_dataset

    factory = functools.partial(paid_judge, 0.01)
    kw = {"num_actors": 2, "concurrency": 4, "batch_size": 10}
    ds = ray_cluster.data.from_pandas(_items(60))
    out = grade_dataset(ds, factory, run_config=RunConfig(budget_tracker=BudgetTracker(0.105)), **kw).to_pandas()
    assert len(out) == 60 and out["id"].is_unique
    assert (out["status"] == "scored").sum() == 11
    assert out.loc[out["status"] != "scored", "error"].str.contains("budget").all()
    # a SharedBudget given as budget= is read back after the run
    from llm_connect.distributed import SharedBudget

    budget = SharedBudget(0.05)
    out = grade_dataset(ray_cluster.data.from_pandas(_items(30)), factory, budget=budget, **kw).to_pandas()
    assert (out["status"] == "scored").sum() == 5 and budget.spent_usd == pytest.approx(0.05)
    assert budget.exhausted and budget.in_flight == 0
    # a number is a limit in USD
    out = grade_dataset(ray_cluster.data.from_pandas(_items(30)), factory, budget=0.03, **kw).to_pandas()
    assert (out["status"] == "scored").sum() == 3


def _worst(times: list[float], window: float) -> int:
    """The most release times in any closed window of ``window`` seconds."""
    times = sorted(times)
    worst, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] <= t + window:
            j += 1
        worst = max(worst, j - i)
    return worst


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
def test_the_shared_limit_keeps_its_burst_bound_with_several_requests_per_item(ray_cluster):
    """At 12,000 requests a minute (200 a second) with 4 requests per item, three actors' worth of permit
    holders (8 items in flight each) on one event loop that is held up now and then (a model loading, a long
    parse): the permits released before let 6 items (24 requests) go at once where ``W*r + block + 1`` = 9
    allow. Counted on the release times the holders report (each the clock reading the holder's check used),
    so the bound is exact whatever the load: no timing margin is needed."""
    from llm_connect.distributed import RateLimit
    from llm_connect.distributed._rate_limit import Permits, Schedule

    limit = RateLimit(requests_per_minute=12_000, requests_per_item=4)
    per_second, k, burst = 200.0, 4, limit.block_requests()  # B = block (8) when an item makes fewer calls
    assert burst == 8
    limiter = ray_cluster.remote(num_cpus=0)(Schedule).remote()
    holders = [Permits(limiter, limit) for _ in range(3)]
    released: list[float] = []

    async def run() -> None:
        async def one(holder: Permits, stalls: list[float]) -> None:
            for n in range(6):
                t = await holder.acquire(0.0)
                released.append(time.monotonic() if t is None else t)
                if n < len(stalls):
                    time.sleep(stalls[n])  # holds up the whole loop: slots fall due meanwhile

        stalls = {0: [0.12], 3: [0.0, 0.07], 9: [0.0, 0.0, 0.15], 14: [0.0, 0.0, 0.0, 0.03]}
        await asyncio.gather(*(one(holders[j % 3], stalls.get(j, [])) for j in range(24)))

    asyncio.run(run())
    assert len(released) == 24 * 6
    for window in (0.0, 0.005, 0.02, 0.1, 0.5):
        requests = k * _worst(released, window)
        assert requests <= window * per_second + burst + 1 + 1e-9, (window, requests)
