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
    """Base class of every error raised by ``llm_connect`` on purpose.

    See Also
    --------
    llm_connect.errors : The tree of its subclasses, drawn in the module's docstring.

    Examples
    --------
    >>> from llm_connect import RunConfig
    >>> try:
    ...     RunConfig(temperature=-1)
    ... except LLMConnectError as exc:
    ...     print(type(exc).__name__, "-", exc)
    ValidationError - RunConfig.temperature must be >= 0, got -1
    """


class ValidationError(LLMConnectError, ValueError):
    """An argument, a field or an observation is invalid; the message names it and says what it must be.

    Also a ``ValueError``, so ``except ValueError`` keeps working where a contract names that.
    """


class ConfigError(ValidationError):
    """A configuration (pipeline config, CLI option) is invalid; the message names the key."""


class EmbeddingShapeError(ValidationError):
    """An embedding adapter returned other than two usable vectors."""


class JudgeReplyError(ValidationError):
    """A judge's reply holds no usable verdict. In a run over many items its row is *unscored*, never 0.

    Parameters
    ----------
    message : str
        What was wrong with the reply.
    reply : str, optional
        The reply itself, kept for audit.

    Attributes
    ----------
    reply : str or None
        The reply.
    response : LLMResponse or None
        The response that held the reply, when there was one (its usage and cost are still counted).
    """

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        super().__init__(message)
        self.reply = reply
        self.response: object | None = None  # the LLMResponse that held the reply, when there was one


class LogprobsUnavailableError(JudgeReplyError):
    """Logprob scoring was asked for but the adapter returned no token probabilities.

    Never a silent fallback to the text verdict: the row is *unscored*, with this reason.

    Parameters
    ----------
    message : str
        What was missing.
    reply : str, optional
        The reply, kept for audit.
    """


class JudgeAbstained(JudgeReplyError):
    """A selective judge's confidence is below its calibrated cut-off: it gives no verdict on this item.

    In a run over many items the row's status is *abstained* (no score, never 0; its ``confidence`` in
    the row), and a cascade passes the item to its next judge or to people. A subclass of
    :class:`JudgeReplyError`, so code written for unusable replies (a panel member that gives none, the
    fixed-band ``EscalationJudge`` escalating) treats an abstention as one.

    Parameters
    ----------
    message : str
        Why the judge abstained.
    confidence : float, optional
        The judge's confidence on the item.
    cutoff : float, optional
        Its calibrated cut-off.
    result : GradingResult, optional
        The withheld judgment, for audit (never a score), when there is one.
    columns : dict, optional
        The judge's own columns of the item's row (``decided_by``, ``stage``, ...).

    Attributes
    ----------
    confidence : float or None
        As given.
    cutoff : float or None
        As given.
    result : GradingResult or None
        As given.
    columns : dict
        As given (a copy; empty when none).
    response : LLMResponse or None
        What the abstaining judgment cost, as for any unusable reply.

    See Also
    --------
    llm_connect.SelectiveJudge : The judge that abstains.
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
    """The run's budget is spent; the message holds what was spent and the limit, and what to do.

    Parameters
    ----------
    spent_usd : float
        What was spent, in USD.
    limit_usd : float
        The limit, in USD.

    Attributes
    ----------
    spent_usd : float
        As given.
    limit_usd : float
        As given.

    See Also
    --------
    llm_connect.BudgetTracker : Raises it.
    """

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
    missing model or extra, a refused key, an endpoint that is down).

    Parameters
    ----------
    judge : str
        The judge's name.
    first_error : str
        The first row's error (shown cut to 400 characters).
    n : int
        How many rows the judge was given.
    what : str, default ""
        What the run was doing, shown in the message (e.g. ``"the original rubric"``).

    Attributes
    ----------
    judge : str
        As given.
    first_error : str
        As given, whole.
    n : int
        As given.
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
    """Whether a module can be imported, found without importing it.

    A missing extra is told before it is needed: the command line checks its judges' packages this way.

    Parameters
    ----------
    module : str
        The module's import name (e.g. ``"llama_cpp"``).

    Returns
    -------
    bool
        Whether it can be imported.
    """
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[module] is None (blocked, as in the tests)
        return False


def install_hint(extra: str) -> str:
    """The ``pip install`` that adds an extra: from a clone (what works today), then the published name.

    Parameters
    ----------
    extra : str
        The extra's name (``"local"``, ``"ray"``, ...).

    Returns
    -------
    str
        The command(s) to run, for an error message.

    Examples
    --------
    >>> install_hint("ray")
    "pip install -e '.[ray]' in a clone of this project (or pip install 'llm-connect-judges[ray]')"
    """
    return f"pip install -e '.[{extra}]' in a clone of this project (or pip install '{DISTRIBUTION}[{extra}]')"


class QualityNotMet(LLMConnectError, AssertionError):
    """A quality gate failed: the upper end of the mean score's interval is below the threshold.

    An ``AssertionError``, so a test that raises it fails as an ``assert`` would.

    Parameters
    ----------
    message : str
        The gate's verdict, with the interval and the threshold.
    check : QualityCheck, optional
        The :class:`~llm_connect.testing.QualityCheck` behind it (``None`` when there was no scored item).

    Attributes
    ----------
    check : QualityCheck or None
        As given.

    See Also
    --------
    llm_connect.testing.assert_quality : Raises it.
    """

    def __init__(self, message: str, *, check: object | None = None) -> None:
        super().__init__(message)
        self.check = check


class QualityInconclusive(LLMConnectError, AssertionError):
    """A quality gate is not settled: the mean score's interval holds the threshold.

    An ``AssertionError``, as :class:`QualityNotMet` is.

    Parameters
    ----------
    message : str
        The gate's verdict; it says about how many more items would settle it.
    check : QualityCheck, optional
        The :class:`~llm_connect.testing.QualityCheck` behind it.

    Attributes
    ----------
    check : QualityCheck or None
        As given.

    See Also
    --------
    llm_connect.testing.assert_quality : Raises it (with ``inconclusive="fail"``).
    """

    def __init__(self, message: str, *, check: object | None = None) -> None:
        super().__init__(message)
        self.check = check


class MissingDependencyError(LLMConnectError, ImportError):
    """An optional dependency is missing; the message holds the ``pip install`` to run (:func:`install_hint`).

    Also an ``ImportError``.

    Parameters
    ----------
    package : str
        The missing package.
    extra : str
        The extra that installs it (``"local"``, ``"ray"``, ...).
    feature : str, default ""
        What needs it, shown in the message.
    hint : str, optional
        The command to suggest instead of :func:`install_hint`'s.

    Attributes
    ----------
    package : str
        As given.
    extra : str
        As given.

    Examples
    --------
    >>> print(MissingDependencyError("ray", "ray", "grade_dataset"))
    ray is needed for grade_dataset but is not installed; run: pip install -e '.[ray]' in a clone of ...
    """

    def __init__(self, package: str, extra: str, feature: str = "", *, hint: str | None = None) -> None:
        what = f" for {feature}" if feature else ""
        super().__init__(f"{package} is needed{what} but is not installed; run: {hint or install_hint(extra)}")
        self.package = package
        self.extra = extra


class AdapterError(LLMConnectError):
    """A call to a model provider failed; the message says what to do next.

    Adapters translate the provider's errors into its subclasses at the adapter's boundary (a 401 is an
    :class:`AuthenticationError`, a 429 after retries a :class:`RateLimitError`, ...), which take the same
    parameters.

    Parameters
    ----------
    message : str
        What failed and what to do (never an API key).
    status : int, optional
        The HTTP status, when there was one.
    provider_message : str, optional
        The provider's own words, with any key scrubbed.
    adapter_id : str, optional
        The adapter that made the call.

    Attributes
    ----------
    status : int or None
        As given.
    provider_message : str or None
        As given.
    adapter_id : str or None
        As given.
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
    """The provider refused the credentials (401/403).

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class BadRequestError(AdapterError):
    """The provider rejected the request (4xx other than 429); not retried.

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class RateLimitError(AdapterError):
    """The provider kept answering 429 until the retry budget ran out.

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class ServerError(AdapterError):
    """The provider kept answering 5xx until the retry budget ran out.

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class AdapterTimeoutError(AdapterError, TimeoutError):
    """The call timed out (after retries).

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class AdapterConnectionError(AdapterError):
    """The endpoint could not be reached (after retries).

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class MalformedResponseError(AdapterError):
    """The provider's reply body could not be read as the API promises.

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """


class ReplayMissError(AdapterError):
    """Replaying recorded replies (``--llm-cache-mode=replay``), no reply was recorded for this request.

    Nothing was sent to the provider. The message names the adapter, the model and the start of the
    prompt; record the replies once where the API key is available (``--llm-cache-mode=auto`` or
    ``record``) and keep the cache folder with the tests.

    Parameters
    ----------
    message, status, provider_message, adapter_id
        As :class:`AdapterError` takes them.
    """
