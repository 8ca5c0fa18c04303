"""One budget for a whole cluster: :class:`SharedBudget`, a tracker whose money one small Ray actor keeps.

The actor holds a :class:`BudgetBook` (a :class:`~llm_connect.core.BudgetTracker` and its open reservations
by number); every grading actor's :class:`SharedBudget` reserves on it before a paid call and settles after,
as the runner's run budget does in one process (:mod:`llm_connect.runner`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from typing import Any

from ..core import BudgetReservation, BudgetTracker, as_budget, check_non_negative
from ..errors import BudgetExceededError, ValidationError
from ._extra import need_ray

__all__ = ["BudgetBook", "SharedBudget", "SharedReservation", "shared_budget"]

logger = logging.getLogger("llm_connect.distributed")


class BudgetBook:
    """The shared budget's state (a Ray actor holds one): a :class:`BudgetTracker` and its open reservations
    by number. Calls are served one at a time (a sync Ray actor)."""

    def __init__(self, limit_usd: float | None, spent_usd: float = 0.0) -> None:
        self.tracker = BudgetTracker(limit_usd)
        if spent_usd:
            with contextlib.suppress(BudgetExceededError):
                self.tracker.charge(spent_usd)
        self.open: dict[int, BudgetReservation] = {}
        self.numbers = itertools.count()

    def try_reserve(self, estimated_usd: float) -> tuple[str, Any]:
        """``("ok", number)``, ``("wait", None)`` (only calls in flight stand in the way) or
        ``("refused", (spent, limit, reserved))``."""
        try:
            reservation = self.tracker.try_reserve(estimated_usd)
        except BudgetExceededError as exc:
            return "refused", (exc.spent_usd, exc.limit_usd, getattr(exc, "reserved_usd", 0.0))
        if reservation is None:
            return "wait", None
        number = next(self.numbers)
        self.open[number] = reservation
        return "ok", number

    def finish(self, number: int, cost_usd: float, paid: bool) -> None:
        reservation = self.open.pop(number, None)
        if reservation is not None:
            if paid:
                reservation.settle(cost_usd)
            else:
                reservation.release()

    def charge(self, cost_usd: float) -> tuple[float, float | None]:
        with contextlib.suppress(BudgetExceededError):
            self.tracker.charge(cost_usd)
        return self.tracker.spent_usd, self.tracker.limit_usd

    def snapshot(self) -> dict[str, Any]:
        out = self.tracker.snapshot()
        out["in_flight"] = self.tracker.in_flight
        return out


class SharedReservation(BudgetReservation):
    """A reservation held on a :class:`SharedBudget` (its number in the shared book)."""

    __slots__ = ("number",)

    def __init__(self, tracker: BudgetTracker, amount_usd: float, number: int) -> None:
        super().__init__(tracker, amount_usd)
        self.number = number


class SharedBudget(BudgetTracker):
    """One budget for every actor of a :func:`~llm_connect.distributed.grade_dataset` job: a
    :class:`~llm_connect.core.BudgetTracker` whose money is kept by one small Ray actor, as the rate limit is.

    It is a ``BudgetTracker`` in every way that counts (reservations before each call, settled after it;
    ``spent_usd``, ``exhausted``, ``snapshot()``...), read from and charged to that actor, so each actor's
    calls are refused once the whole job's spend reaches ``limit_usd``: the job overshoots it by no more
    than the calls in flight, and rows not attempted are ``error`` rows saying "budget exhausted", as in
    ``judge_many``. Read ``spent_usd`` here after the dataset is consumed to see what the job spent.

    The actor is started on first use (Ray must be running) and lives as long as this object's handle;
    each call is a round trip to it (a millisecond or so on one host, next to a model call's seconds).
    Pass it as ``grade_dataset(..., budget=...)`` or in ``run_config.budget_tracker``; a plain
    ``BudgetTracker`` or a number given there becomes one (with that limit and spend).

    Parameters
    ----------
    limit_usd : float, optional
        The job's limit in USD; ``None``: no limit (the spend is still counted).
    spent_usd : float, default 0.0
        Money already spent (e.g. by an earlier job), counted against the limit.

    Raises
    ------
    ValidationError
        ``limit_usd`` or ``spent_usd`` is not a number >= 0.
    MissingDependencyError
        On first use without Ray (``pip install -e '.[ray]'``).

    See Also
    --------
    llm_connect.core.BudgetTracker : the one-process tracker it stands in for.
    """

    def __init__(self, limit_usd: float | None = None, *, spent_usd: float = 0.0) -> None:
        super().__init__(limit_usd)
        if isinstance(spent_usd, bool) or not isinstance(spent_usd, (int, float)) or not spent_usd >= 0:
            raise ValidationError(f"SharedBudget: spent_usd must be a number >= 0, got {spent_usd!r}")
        self._initial_spent = float(spent_usd)
        self._book: Any = None

    def _actor(self) -> Any:
        if self._book is None:
            ray = need_ray()
            # never restarted: a new book would have forgotten the money spent
            self._book = ray.remote(num_cpus=0, max_restarts=0)(BudgetBook).remote(
                self.limit_usd, self._initial_spent)
        return self._book

    def _call(self, method: str, *args: Any) -> Any:
        ray = need_ray()
        return ray.get(getattr(self._actor(), method).remote(*args))

    def __getstate__(self) -> dict[str, Any]:
        return {"limit_usd": self.limit_usd, "spent_usd": self._initial_spent, "book": self._actor()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        BudgetTracker.__init__(self, state["limit_usd"])
        self._initial_spent = state["spent_usd"]
        self._book = state["book"]

    # -- what BudgetTracker offers, kept by the shared book --

    def snapshot(self) -> dict[str, Any]:
        out = dict(self._call("snapshot"))
        out.pop("in_flight", None)
        return out

    @property
    def spent_usd(self) -> float:
        return float(self._call("snapshot")["spent_usd"])

    @property
    def calls(self) -> int:
        return int(self._call("snapshot")["calls"])

    @property
    def reserved_usd(self) -> float:
        return float(self._call("snapshot")["reserved_usd"])

    @property
    def in_flight(self) -> int:
        return int(self._call("snapshot")["in_flight"])

    @property
    def remaining_usd(self) -> float | None:
        if self.limit_usd is None:
            return None
        return max(0.0, self.limit_usd - self.spent_usd)

    @property
    def exhausted(self) -> bool:
        if self.limit_usd is None:
            return False
        return bool(self._call("snapshot")["exhausted"])

    def charge(self, cost_usd: float) -> None:
        check_non_negative("cost_usd", cost_usd)
        spent, limit = self._call("charge", float(cost_usd))
        if limit is not None and spent > limit:
            raise BudgetExceededError(spent, limit)

    def check(self) -> None:
        if self.limit_usd is None:
            return
        spent = self.spent_usd
        if spent >= self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def try_reserve(self, estimated_usd: float = 0.0) -> BudgetReservation | None:
        check_non_negative("estimated_usd", estimated_usd)
        state, value = self._call("try_reserve", float(estimated_usd))
        if state == "ok":
            return SharedReservation(self, float(estimated_usd), value)
        if state == "wait":
            return None
        spent, limit, reserved = value
        exc = BudgetExceededError(spent, limit)
        exc.reserved_usd = reserved  # type: ignore[attr-defined]
        raise exc

    def reserve(
        self, estimated_usd: float = 0.0, *, wait: bool = False, timeout_s: float | None = None
    ) -> BudgetReservation:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pause = 0.001
        while True:
            reservation = self.try_reserve(estimated_usd)
            if reservation is not None:
                return reservation
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                snap = self.snapshot()
                exc = BudgetExceededError(snap["spent_usd"], snap["limit_usd"])
                exc.reserved_usd = snap["reserved_usd"]  # type: ignore[attr-defined]
                raise exc
            time.sleep(pause)
            pause = min(0.02, pause * 2)

    def _finish(self, reservation: BudgetReservation, cost_usd: float, *, paid: bool) -> None:
        if reservation._done:
            return
        reservation._done = True
        number = getattr(reservation, "number", None)
        if number is None:
            return
        cost = float(cost_usd) if paid and isinstance(cost_usd, (int, float)) and cost_usd > 0 else 0.0
        try:  # settle() never raises: a reply that was paid for is kept
            self._call("finish", number, cost, paid)
        except Exception as exc:  # the shared book is gone (Ray shut down)
            logger.warning("llm_connect: could not settle a call on the shared budget: %s", type(exc).__name__)

    def __repr__(self) -> str:
        try:
            spent = f"{self.spent_usd:.6f}"
        except Exception:  # a repr never raises (Ray may be down)
            spent = "?"
        return f"SharedBudget(limit_usd={self.limit_usd!r}, spent_usd={spent})"


def shared_budget(value: Any) -> SharedBudget | None:
    """``value`` (a tracker, a limit in USD or ``None``, checked by the entry point) as the job's
    :class:`SharedBudget`."""
    if value is None or isinstance(value, SharedBudget):
        return value
    if isinstance(value, BudgetTracker):
        # A BudgetTracker lives in one process (a lock): the cluster gets one budget with its limit and spend
        return SharedBudget(value.limit_usd, spent_usd=value.spent_usd)
    tracker = as_budget(value)
    assert tracker is not None
    return SharedBudget(tracker.limit_usd)
