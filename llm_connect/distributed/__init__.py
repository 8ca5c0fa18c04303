"""Grading a Ray Dataset past one machine: :func:`grade_dataset`, one rate limit for the whole cluster.

Optional extra: ``pip install -e '.[ray]'`` in a clone. ``import llm_connect`` never
imports Ray; this package imports it when :func:`grade_dataset` is called, and a
missing Ray is a :class:`~llm_connect.errors.MissingDependencyError` naming the
extra.

How a job runs
--------------
:func:`grade_dataset` is ``judge_many`` spread over a pool of Ray actors
(``ds.map_batches(..., compute=ActorPoolStrategy(size=num_actors), batch_format="pandas")``, the
way Ray Data runs LLM inference over a dataset). Each actor calls ``judge_factory()``
once, so adapters, HTTP sessions and local models are built once per actor, and
runs ``judge_many``'s run plan on the package's runner
(:func:`llm_connect.runner.run_plan`) on each *chunk* of rows Ray Data hands it
(``batch_size`` rows; Ray's ``map_batches`` calls it a batch) with ``concurrency``
items in flight. So the job has ``num_actors * concurrency`` judgments in
flight, and each output row has the columns ``judge_many`` gives it: a failed
item is an ``error`` row, an unusable reply an ``unscored`` one, never dropped.

Failures: Ray Data starts the actors with ``max_restarts=-1`` and
``max_task_retries=-1``: an actor that dies (``ray.kill``, a crashed worker,
a lost node) is restarted and the chunk it held is run again; Ray Data emits a
chunk's rows only when it completes, so each input row comes out exactly once.

One rate limit for the cluster
------------------------------
``rate_limit=RateLimit(requests_per_minute=R, tokens_per_minute=T)`` (or the
same as a dict) is enforced across all actors by one small Ray actor, the
*limiter*. It hands out time on a single schedule (GCRA, a virtual-time token
bucket): each item is a slot of ``max(k/r, tokens/t)`` seconds (``r``, ``t``
the per-second rates, ``k`` the item's ``requests_per_item``), and slots never
overlap whichever actor holds them (an actor uses only the part of a granted
span that is granted however long the round trip took). An actor asks for a
*block* of the schedule at once (``block`` requests' worth, 8 by default) and
spends it locally, so the limiter costs one round trip per ``block`` requests,
not per call. An item waits for its slot's start; a slot not used within
``(block + 1 - k)/r`` seconds of its start is dropped, never saved up, so a
late actor cannot burst. So in any window of ``W`` seconds the items released
make at most ``W*r + block + 1`` requests (``W*r + k + 1`` when one item makes
more calls than a block holds), whatever the number of actors and however
late their loops run (checked against the limiter's grants and on the loopback
server in ``tests/distributed/test_distributed.py``), which is within 5% of ``R`` in any minute once
``R >= 20 * (block + 1)``; for smaller limits the block shrinks so that it holds.
Tokens are estimated before a call (the item's text at 4 characters a token,
plus ``output_tokens``) and the estimate is settled after it: a call that used
more delays that actor's next requests by the difference.

What the limiter does not see: retries of the HTTP adapters (a 429 or 5xx
retried inside the adapter) and calls a judge makes beyond
``requests_per_item`` per item (set it for a compound judge making several
calls per item). Keep the adapters' own ``requests_per_minute`` off
(``None``) under a shared limit, or set it to the per-actor share.

Resumable
---------
With ``ledger=`` (a :class:`~llm_connect.quality.QualityLedger`, or a
``ParquetLedger`` shared by many machines) and ``task_type=``, each scored row is
recorded (tags ``grader_id``, ``rubric_hash``, ``item_id`` and the job's
``run_id``; a chunk's observations are written together when the chunk ends, once: a judgment
the ledger already holds -- recorded by another actor, a retried chunk or an earlier job -- is not
recorded again, as :meth:`~llm_connect.quality.BaseLedger.extend_once` says),
and a job run again with the same ledger skips the items that the same grader
and rubric already scored (keyed by grader id, rubric hash and the item's key,
:func:`~llm_connect.items.item_key`: its id and its candidate's adapter and model,
so one question answered by two models is two items; an id is matched on its text,
``1.0`` is ``1``, and a row whose id is missing is keyed by its texts, never by its
position): their rows
come back from the ledger with ``status="scored"`` and ``resumed=True`` (the
judge's notes, latency and token counts are not in the ledger: ``None``, NaN
and 0), so a crashed job restarts where it stopped, losing at most the chunks
that were in flight. The items need an ``id`` column, unique per item (one id
may repeat across candidate models: ``candidate_model`` / ``candidate_adapter``). Each
actor reads the ledger once, when it starts: keep one job per ledger and
task type at a time.

The package
-----------
One idea a module: ``_rate_limit`` (:class:`RateLimit`, the limiter's schedule, each actor's permits),
``_budget`` (:class:`SharedBudget`), ``_resume`` (what the ledger says is done; a chunk's judgments
written at once), ``_actor`` (what each actor runs on a chunk) and ``_grade`` (:func:`grade_dataset` and
the pool's sizing, :func:`actor_cpus`); ``_extra`` imports Ray when it is first needed.
"""

from __future__ import annotations

from ._budget import SharedBudget
from ._grade import ACTOR_CPUS, UPSTREAM_CPUS, actor_cpus, grade_dataset
from ._rate_limit import RateLimit
from ._resume import RESUMED

__all__ = ["ACTOR_CPUS", "RESUMED", "UPSTREAM_CPUS", "RateLimit", "SharedBudget", "actor_cpus", "grade_dataset"]
