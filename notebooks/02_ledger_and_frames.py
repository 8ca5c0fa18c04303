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
# # 2 · The quality ledger and DataFrames
#
# Every grading outcome can be recorded as a `QualityObservation` — which
# adapter, for which task type, how good, how costly, how slow — in a
# `QualityLedger`: a JSON Lines file, one observation per line, appended under a
# file lock (`<path>.lock`, a `filelock.FileLock` other tools can take too).
# The ledger is what adaptive routing (notebook 6) reads.
#
# This notebook appends observations, queries them (`recent`, `mean_quality`,
# `by_task_type`), prunes old ones, records a whole `judge_many` run, and
# loads the ledger as a typed pandas DataFrame with `llm_connect.frames.ledger_frame`
# to plot cost against quality per adapter. It writes only to a temporary folder.

# %%
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from llm_connect import QualityLedger, QualityObservation
from llm_connect.quality import is_stale

workdir = Path(tempfile.mkdtemp(prefix="llm-connect-ledger-"))
ledger = QualityLedger(workdir / "ledger.jsonl")
ledger

# %% [markdown]
# ## Appending observations
#
# An observation needs the task type, the adapter and model ids, the cost in
# USD, a `quality_score` in 0..1, the latency and the token counts;
# `recorded_at` defaults to now (UTC) and `tags` holds anything else that is
# JSON. Here we write two weeks of made-up history for four pretend adapters
# with fixed timestamps, so every number below is reproducible.

# %%
ADAPTERS = {  # adapter_id: (model_id, cost per call in USD, typical quality)
    "openai:gpt-4o-mini": ("gpt-4o-mini", 0.00040, 0.86),
    "anthropic:claude-3-haiku": ("claude-3-haiku", 0.00055, 0.84),
    "local:llama-3-8b": ("llama-3-8b-instruct", 0.00008, 0.72),
    "local:smollm2-135m": ("smollm2-135m-instruct", 0.0, 0.35),
}
start = datetime(2025, 3, 1, tzinfo=UTC)
rng = np.random.default_rng(7)
history = []
for day in range(14):
    for adapter_id, (model_id, cost, quality) in ADAPTERS.items():
        for k in range(3):
            history.append(QualityObservation(
                task_type="qa" if k < 2 else "summarise",
                adapter_id=adapter_id, model_id=model_id,
                cost_usd=round(cost * rng.uniform(0.7, 1.3), 7),
                quality_score=round(float(np.clip(rng.normal(quality, 0.08), 0, 1)), 3),
                latency_ms=round(rng.uniform(200, 900), 1),
                tokens_in=int(rng.integers(150, 400)), tokens_out=int(rng.integers(5, 60)),
                recorded_at=start + timedelta(days=day, hours=k),
                tags={"run": f"day-{day:02d}"},
            ))
ledger.append(history[0])      # one at a time ...
ledger.extend(history[1:])     # ... or many under one lock

# %%
# NBVAL_CHECK_OUTPUT
observations = ledger.read_all()
print(len(observations), "observations;", ledger.malformed_count(), "malformed lines")
print(history[0].to_dict())

# %% [markdown]
# ## Querying
#
# * `recent(limit, task_type=..., adapter_id=...)`: newest first;
# * `mean_quality(task_type, adapter_id=..., min_observations=..., max_age=..., now=...)`:
#   the mean over matching observations that are not stale, or `None` when there
#   are fewer than `min_observations` (too little evidence is not a number);
# * `by_task_type(task_type)`: every observation of one task type.
#
# `now=` pins the clock, so this notebook gives the same answers whenever it runs.

# %%
# NBVAL_CHECK_OUTPUT
for o in ledger.recent(3, task_type="qa"):
    print(o.recorded_at.isoformat(), o.adapter_id, o.quality_score)

now = datetime(2025, 3, 15, 12, tzinfo=UTC)
for adapter_id in ADAPTERS:
    all_time = ledger.mean_quality("qa", adapter_id=adapter_id)
    last_3_days = ledger.mean_quality("qa", adapter_id=adapter_id, max_age=timedelta(days=3), now=now)
    print(f"{adapter_id:26} all: {all_time:.3f}  last 3 days: {last_3_days:.3f}")

print(ledger.mean_quality("qa", adapter_id="local:llama-3-8b", min_observations=100))   # too few: None
print(len(ledger.by_task_type("summarise")), "summarise observations")
print(is_stale(history[0], timedelta(days=7), now=now))

# %% [markdown]
# ## Robust to damage, and pruning
#
# A line that is not a valid observation (a crashed writer, a hand edit) is
# skipped and counted, never fatal. `prune_before(timestamp)` removes the valid
# observations recorded before `timestamp` (atomically: a crash leaves the old
# file or the new one) and keeps the malformed lines for you to inspect.

# %%
# NBVAL_CHECK_OUTPUT
with open(ledger.path, "a", encoding="utf-8") as f:
    f.write('{"task_type": "qa", "adapter_id": "broken"\n')      # a half-written line

print(len(ledger.read_all()), "valid,", ledger.malformed_count(), "malformed")
removed = ledger.prune_before(datetime(2025, 3, 8, tzinfo=UTC))
print(removed, "pruned;", len(ledger.read_all()), "valid left,", ledger.malformed_count(), "malformed")

# %% [markdown]
# ## Recording a grading run
#
# Give `judge_many` (or `grade_many`, or `PairedGrader`) a `ledger` and a
# `task_type`, and every **scored** row is appended as an observation of the
# candidate, with the grader id, the rubric hash (for LLM judges) and the item id
# in `tags`. Unscored and error rows are not recorded: they say nothing about the
# candidate's quality. The QA set's `candidate_model` column names the candidate
# (its adapter id too, unless a `candidate_adapter` column says otherwise).

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect import ExactMatchJudge, judge_many

qa = pd.read_json(Path("../data/qa_calibration.jsonl"), lines=True, dtype=False)
graded = judge_many(ExactMatchJudge(normalizer="squad", reference_sep="|"), qa, progress=False,
                    ledger=ledger, task_type="qa-exact")
print(graded.attrs["counts"], "->", len(ledger.by_task_type("qa-exact")), "observations recorded")
print(next(o.tags for o in ledger.by_task_type("qa-exact") if o.tags["item_id"] == "qa-001"))

# %% [markdown]
# ## The ledger as a DataFrame
#
# `ledger_frame(ledger)` reads the file into one row per valid observation, in
# file order, with typed columns: `recorded_at` as UTC datetimes, the ids as
# categoricals, `total_tokens`, and one `tag.<key>` column per tag key
# (`tags="dict"` keeps them as one column of dicts instead).
# `df.attrs["malformed_count"]` says how many lines were skipped.

# %%
# NBVAL_CHECK_OUTPUT
from llm_connect.frames import ledger_frame, observations_from_frame

df = ledger_frame(ledger)
print(df.shape, df.attrs["malformed_count"])
print(df.dtypes.to_string())

# %%
df.head()

# %% [markdown]
# From here it is ordinary pandas: quality, cost and latency per adapter and
# task type, or quality per day.

# %%
# NBVAL_CHECK_OUTPUT
summary = (df[df["task_type"] == "qa"]
           .groupby("adapter_id", observed=True)
           .agg(n=("quality_score", "size"), quality=("quality_score", "mean"),
                cost_usd=("cost_usd", "mean"), latency_ms=("latency_ms", "mean"))
           .sort_values("cost_usd"))
print(summary.round({"quality": 3, "cost_usd": 6, "latency_ms": 0}).to_string())

# %%
qa_obs = df[df["task_type"] == "qa"]
daily = (qa_obs.groupby([qa_obs["recorded_at"].dt.date.rename("day"), "adapter_id"], observed=True)
         ["quality_score"].mean().unstack())
daily.round(3)

# %% [markdown]
# ## Cost against quality, per adapter
#
# Each small dot is one observation; the large marker is the adapter's mean.
# The adapters worth using are on the upper left (cheap and good); routing
# (notebook 6) makes that choice with a confidence bound instead of by eye.

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4))
for (adapter_id, part), color in zip(qa_obs.groupby("adapter_id", observed=True), plt.cm.tab10.colors, strict=False):
    ax.scatter(part["cost_usd"] * 1000, part["quality_score"], s=12, alpha=0.4, color=color)
    ax.scatter(part["cost_usd"].mean() * 1000, part["quality_score"].mean(), s=140, marker="D",
               color=color, edgecolor="black", label=adapter_id)
ax.set_xlabel("cost per call (USD per 1,000 calls)")
ax.set_ylabel("quality_score")
ax.set_title("task type 'qa': cost vs quality per adapter")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# ## Past one machine: the same job on Ray
#
# `llm_connect.distributed.grade_dataset(ds, judge_factory, ...)` runs the job
# above on a pool of Ray actors (`pip install -e '.[ray]'` in a clone): each actor
# builds its own judge from the factory, once, and grades its chunks with the
# same runner as `judge_many`, so the rows have the same columns. With a ledger,
# each chunk's observations are written at once, and a rerun skips the items
# the same grader already scored (their rows come back with `resumed=True`).
# Here the cluster is local (2 CPUs); on a real one, `ray.init()` joins the
# cluster `RAY_ADDRESS` names and the ledger is a `ParquetLedger` at an `s3://`
# root that every host appends to without a lock. The cell does nothing when Ray
# is not installed.

# %%
try:
    import ray
except ImportError:  # the ray extra is not installed
    ray = None

if ray is not None:
    import warnings

    from llm_connect.distributed import grade_dataset
    from llm_connect.quality import ParquetLedger

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    with warnings.catch_warnings():  # Ray's own deprecation notices
        warnings.simplefilter("ignore", DeprecationWarning)
        ray.data.DataContext.get_current().enable_progress_bars = False
    shared = ParquetLedger(workdir / "shared-ledger")
    on_ray = grade_dataset(ray.data.from_pandas(qa), lambda: ExactMatchJudge(normalizer="squad", reference_sep="|"),
                           num_actors=2, batch_size=64, ledger=shared, task_type="qa-exact").to_pandas()
    again = grade_dataset(ray.data.from_pandas(qa), lambda: ExactMatchJudge(normalizer="squad", reference_sep="|"),
                          num_actors=2, batch_size=64, ledger=shared, task_type="qa-exact").to_pandas()
    ray.shutdown()
    scores = on_ray.set_index("id")["quality_score"].astype(float).reindex(graded["id"])
    print(len(on_ray), "rows; the same scores as judge_many:",
          np.allclose(scores, graded["quality_score"], equal_nan=True))
    print("rerun:", int(again["resumed"].sum()), "rows read back from the ledger,",
          int((~again["resumed"]).sum()), "graded again")
    shared_frame = ledger_frame(shared)
    print(shared_frame.shape, shared_frame["tag.grader_id"].unique().tolist())
    assert np.allclose(scores, graded["quality_score"], equal_nan=True)
    assert len(shared_frame) == graded.attrs["counts"]["scored"]

# %% [markdown]
# ## Back from a frame
#
# `observations_from_frame(df)` turns a ledger-shaped frame back into validated
# observations, e.g. to write a filtered copy of a ledger.

# %%
# NBVAL_CHECK_OUTPUT
good = df[df["quality_score"] >= 0.8]
copy = QualityLedger(workdir / "good.jsonl")
copy.extend(observations_from_frame(good))
print(len(good), len(copy.read_all()), observations_from_frame(df) == ledger.read_all())

# %%
assert len(df) == len(ledger.read_all()) == len(history) - removed + graded.attrs["counts"]["scored"]
assert df.attrs["malformed_count"] == ledger.malformed_count() == 1
assert str(df["recorded_at"].dtype) == "datetime64[us, UTC]"
assert set(df["adapter_id"].cat.categories) >= set(ADAPTERS)
shutil.rmtree(workdir)
