"""The one exception tree of ``llm_connect``.

Every error the package raises on purpose derives from :class:`LLMConnectError`.
Where a contract says ``ValueError`` (or ``TypeError``, ``ImportError``,
``TimeoutError``), the class also subclasses that built-in, so
``except ValueError`` keeps working::

    LLMConnectError
    ├── ValidationError (ValueError)            bad argument, field or observation
    │   ├── ConfigError                         a pipeline / CLI config is wrong (names the key)
    │   ├── EmbeddingShapeError                 embedder gave other than two usable vectors
    │   ├── JudgeReplyError                     a judge reply holds no usable verdict
    │   │   ├── LogprobsUnavailableError        logprob scoring asked, adapter gave none
    │   │   └── JudgeAbstained                  a selective judge is not sure enough: the item goes on
    │   └── UncalibratedJudgeError              a judge without a (good enough) card was asked to decide
    ├── BudgetExceededError                     the run's budget is spent
    ├── QualityNotMet (AssertionError)          a quality gate failed: the interval lies below the threshold
    ├── QualityInconclusive (AssertionError)    a quality gate is not settled: the interval holds the threshold
    ├── JudgeFailedError                        a judge scored no item: every call failed (the first error says why)
    ├── MissingDependencyError (ImportError)    an optional extra is not installed
    └── AdapterError                            a provider call failed (status, message, what to do)
        ├── AuthenticationError                 401/403: key missing or refused
        ├── BadRequestError                     other 4xx: not retried
        ├── RateLimitError                      429 after retries
        ├── ServerError                         5xx after retries
        ├── AdapterTimeoutError (TimeoutError)  the call timed out after retries
        ├── AdapterConnectionError              could not connect after retries
        ├── MalformedResponseError              the provider's body could not be read
        └── ReplayMissError                     replaying recorded replies, none was recorded for this request

Messages say what to do next; they never contain an API key.
"""

from __future__ import annotations

__all__ = [
    "AdapterConnectionError",
    "AdapterError",
    "AdapterTimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceededError",
    "ConfigError",
    "EmbeddingShapeError",
    "JudgeAbstained",
    "JudgeFailedError",
    "JudgeReplyError",
    "LLMConnectError",
    "LogprobsUnavailableError",
    "MalformedResponseError",
    "MissingDependencyError",
    "QualityInconclusive",
    "QualityNotMet",
    "RateLimitError",
    "ReplayMissError",
    "ServerError",
    "UncalibratedJudgeError",
    "ValidationError",
]


class LLMConnectError(Exception):
    """Base class of every error raised by ``llm_connect``."""


class ValidationError(LLMConnectError, ValueError):
    """An argument, a field or an observation is invalid."""


class ConfigError(ValidationError):
    """A configuration (pipeline config, CLI option) is invalid; the message names the key."""


class EmbeddingShapeError(ValidationError):
    """An embedding adapter returned other than two usable vectors."""


class JudgeReplyError(ValidationError):
    """A judge's reply holds no usable verdict. In a batch this row is *unscored*, never 0."""

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        super().__init__(message)
        self.reply = reply
        self.response: object | None = None  # the LLMResponse that held the reply, when there was one


class LogprobsUnavailableError(JudgeReplyError):
    """Logprob scoring was asked for but the adapter returned no token probabilities."""


class JudgeAbstained(JudgeReplyError):
    """A selective judge's confidence is below its calibrated cut-off: it gives no verdict on this item.

    In a batch the row's status is *abstained* (no score, never 0; its ``confidence`` in the row),
    and a cascade passes the item to its next judge or to people. A subclass of
    :class:`JudgeReplyError`, so code written for unusable replies (a panel member that gives
    none, the fixed-band ``EscalationJudge`` escalating) treats an abstention as one. ``confidence``:
    the judge's confidence on the item; ``cutoff``: its cut-off; ``result``: the withheld judgment
    (a ``GradingResult``, for audit, never a score), when there is one; ``columns``: the judge's own
    columns of the batch row (``decided_by``, ``stage``...); ``response``: what the abstaining
    judgment cost, as for any unusable reply.
    """

    def __init__(self, message: str, *, confidence: float | None = None, cutoff: float | None = None,
                 result: object | None = None, columns: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.confidence = confidence
        self.cutoff = cutoff
        self.result = result
        self.columns: dict[str, object] = dict(columns or {})


class UncalibratedJudgeError(ValidationError):
    """A decision (routing, a CI gate) was asked of a judge whose card is missing or below the bar.

    The message names the judge and what to run to calibrate it.
    """


class BudgetExceededError(LLMConnectError):
    """The run's budget is spent; the message holds what was spent and the limit."""

    def __init__(self, spent_usd: float, limit_usd: float) -> None:
        super().__init__(
            f"budget exceeded: spent ${spent_usd:.6f} of a ${limit_usd:.6f} limit; "
            "raise BudgetTracker(limit_usd=...) or start a new tracker"
        )
        self.spent_usd = spent_usd
        self.limit_usd = limit_usd


class JudgeFailedError(LLMConnectError):
    """A judge scored none of the items it was given: every row failed (an error, or a reply with no verdict).

    A run in which nothing was scored has nothing to measure, so ``align`` and ``calibrate`` refuse it
    rather than report agreement, a card or "no improvement" about a judge that never judged. The
    message names the judge and its first error (the same fault is usually behind every row: a
    missing model or extra, a refused key, an endpoint that is down). ``judge``: its name;
    ``first_error``: that error's text; ``n``: the rows it was given.
    """

    def __init__(self, judge: str, first_error: str, n: int, *, what: str = "") -> None:
        doing = f" ({what})" if what else ""
        shown = first_error if len(first_error) <= 400 else first_error[:399] + "…"
        super().__init__(
            f"judge {judge} scored none of the {n} items{doing}: every row failed; first error: {shown}. "
            "Fix that error (usually the same on every row: a missing model or extra, a refused key, an "
            "endpoint that is down) and run again"
        )
        self.judge = judge
        self.first_error = first_error
        self.n = n


#: This project's distribution name (``[project].name``): ``llm-connect`` on PyPI is an unrelated project,
#: so install hints never name it. The import name is ``llm_connect``, the command ``llm-connect``.
DISTRIBUTION = "llm-connect-judges"


def module_installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (a missing extra is told before it is
    needed: the command line checks its judges' packages this way)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[module] is None (blocked, as in the tests)
        return False


def install_hint(extra: str) -> str:
    """The ``pip install`` that adds ``extra``: from a clone (what works today), then the published name."""
    return f"pip install -e '.[{extra}]' in a clone of this project (or pip install '{DISTRIBUTION}[{extra}]')"


class QualityNotMet(LLMConnectError, AssertionError):
    """A quality gate failed: the upper end of the mean score's interval is below the threshold.

    An ``AssertionError``, so a test that raises it fails as an ``assert`` would. ``check`` holds the
    :class:`~llm_connect.testing.QualityCheck` behind it (``None`` when there was no scored item).
    """

    def __init__(self, message: str, *, check: object | None = None) -> None:
        super().__init__(message)
        self.check = check


class QualityInconclusive(LLMConnectError, AssertionError):
    """A quality gate is not settled: the mean score's interval holds the threshold.

    The message says about how many more items would settle it; ``check`` holds the
    :class:`~llm_connect.testing.QualityCheck`.
    """

    def __init__(self, message: str, *, check: object | None = None) -> None:
        super().__init__(message)
        self.check = check


class MissingDependencyError(LLMConnectError, ImportError):
    """An optional dependency is missing; the message holds the ``pip install`` to run (:func:`install_hint`)."""

    def __init__(self, package: str, extra: str, feature: str = "", *, hint: str | None = None) -> None:
        what = f" for {feature}" if feature else ""
        super().__init__(f"{package} is needed{what} but is not installed; run: {hint or install_hint(extra)}")
        self.package = package
        self.extra = extra


class AdapterError(LLMConnectError):
    """A call to a model provider failed.

    ``status`` is the HTTP status when there was one; ``provider_message`` the
    provider's own words (with any key scrubbed).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_message: str | None = None,
        adapter_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.provider_message = provider_message
        self.adapter_id = adapter_id


class AuthenticationError(AdapterError):
    """The provider refused the credentials (401/403)."""


class BadRequestError(AdapterError):
    """The provider rejected the request (4xx other than 429); not retried."""


class RateLimitError(AdapterError):
    """The provider kept answering 429 until the retry budget ran out."""


class ServerError(AdapterError):
    """The provider kept answering 5xx until the retry budget ran out."""


class AdapterTimeoutError(AdapterError, TimeoutError):
    """The call timed out (after retries)."""


class AdapterConnectionError(AdapterError):
    """The endpoint could not be reached (after retries)."""


class MalformedResponseError(AdapterError):
    """The provider's reply body could not be read as the API promises."""


class ReplayMissError(AdapterError):
    """Replaying recorded replies (``--llm-cache-mode=replay``), no reply was recorded for this request.

    Nothing was sent to the provider. The message names the adapter, the model and the start of the
    prompt; record the replies once where the API key is available (``--llm-cache-mode=auto`` or
    ``record``) and keep the cache folder with the tests.
    """
