"""One numpydoc text for each shared run option, spliced into the docstrings of the functions that take it.

Seventeen entry points (``judge_many``, ``calibrate``, ``score_items``, ``grade_dataset``, ``tournament``,
``Pipeline.run_many``, ...) take five or more of the same run options: ``concurrency``, ``progress``,
``run_config``, ``ledger``, ``task_type``, ``budget``, ``batch``, ``epochs`` and ``reducer``. Each option
means one thing wherever it is taken, so its text is written once, here (:data:`RUN_OPTIONS`), the way
seaborn's ``seaborn/_docstrings.py`` (``DocstringComponents``) writes the text of ``data``, ``hue`` or
``ax`` once for every plot function. Its value is checked once too, by
:func:`llm_connect._options.check_run_options`.

A function takes the shared text by naming the option on a line of its own in its ``Parameters``
section, in braces, and by the :func:`share_parameters` decorator::

    @share_parameters
    def judge_many(judge, items, *, concurrency=16, progress=True):
        \"\"\"Judge many items.

        Parameters
        ----------
        judge : Judge
            The judge.
        items : DataFrame or iterable of mapping
            The items.
        {concurrency}
        {progress}

        Returns
        -------
        DataFrame
            One row per item.
        \"\"\"

The decorator fills the placeholders when the module is imported, so ``help()``, ``inspect.getdoc``,
numpydoc's validation and Jupyter's ``?`` read the whole text. The documentation site reads the source
without importing it (griffe): its extension ``docs/hooks/griffe_shared.py`` fills the same placeholders
with :func:`fill_shared` before the docstring is parsed, so the built reference shows the same text.

Only a line that holds nothing but ``{name}`` is a placeholder; other braces in a docstring are left alone
(no ``{{`` escaping, unlike ``str.format``). A placeholder that names no shared text, or an option the
function does not take, is an error when the module is imported (:class:`ValueError`), so a typo never
reaches a reader. A function whose option means something else (``align``'s ``budget`` raises when it
is spent) writes its own text instead of the placeholder.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, overload

__all__ = [
    "ADAPTER_TEXTS", "CALIBRATION_TEXTS", "JUDGE_TEXTS", "PIPELINE_TEXTS", "PLOT_TEXTS", "RUN_OPTIONS", "SHARED_TEXTS",
    "TEXT_SETS", "DocstringComponents", "fill_shared", "share_parameters",
]

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}[ \t]*$", re.M)


class DocstringComponents(Mapping[str, str]):
    """Named numpydoc entries, read by name (``components["budget"]``) or attribute (``components.budget``).

    Parameters
    ----------
    entries : mapping of str to str
        Each entry's name and its numpydoc text: a first line ``name : type`` and the description below
        it, indented. Surrounding blank lines and a common indentation are removed, so an entry of
        another set (already without them) can be reused as it is.

    Raises
    ------
    ValueError
        When an entry's first line does not start with its name (``budget : ...`` for ``"budget"``).

    See Also
    --------
    share_parameters : Splice the entries into a docstring's placeholders.

    Notes
    -----
    Modelled on seaborn's ``DocstringComponents`` (``seaborn/_docstrings.py``), which shares the text
    of the parameters its plot functions have in common.
    """

    def __init__(self, entries: Mapping[str, str]) -> None:
        cleaned: dict[str, str] = {}
        for name, text in entries.items():
            body = textwrap.dedent(text).strip("\n").rstrip()  # a raw entry, or one already cleaned
            first = body.split("\n", 1)[0]
            if not re.match(rf"{re.escape(name)}\s*(:|$)", first):
                raise ValueError(f"the shared text of {name!r} must start with '{name} : <type>', got {first!r}")
            cleaned[name] = body
        self._entries = cleaned

    def __getitem__(self, name: str) -> str:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getattr__(self, name: str) -> str:
        try:
            return self.__dict__["_entries"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"DocstringComponents({', '.join(self._entries)})"


#: The run options' texts. Each says what the option means wherever it is taken; what one entry point
#: does beyond that (its columns, its ``attrs``) belongs to that entry point's own text.
RUN_OPTIONS = DocstringComponents({
    "concurrency": """
        concurrency : int, default 16
            How many items are judged at once (each with its calls in flight); a positive integer. With
            ``batch``, every item runs at once and the provider's Batch API paces the calls.
        """,
    "progress": """
        progress : bool, default True
            Show a progress bar of the items: live on a terminal or in a notebook, one line per 5% of the
            items in a log. ``False`` is a quiet run (the Batch APIs' polling bar is off too).
        """,
    "run_config": """
        run_config : RunConfig, optional
            How each call is made (temperature, ``max_tokens``, ``model_params`` such as the seed,
            timeout, system prompt), handed to the judge with every item. Its ``budget_tracker`` is the
            run's budget when ``budget`` is not given. ``None``: ``RunConfig()``.
        """,
    "ledger": """
        ledger : BaseLedger or str or os.PathLike, optional
            The quality ledger every scored judgment is appended to, once: a judgment the ledger already
            holds (same item, grader, rubric and candidate model) is not recorded again. A path or URI is
            opened with :func:`~llm_connect.quality.open_ledger` (a JSON Lines file, or a Parquet
            directory). An unscored, failed or abstained row is never recorded. Needs ``task_type``.
            ``None``: nothing is recorded.
        """,
    "task_type": """
        task_type : str, optional
            The task the judgments are recorded under in ``ledger`` (e.g. ``"qa"``): what
            :func:`~llm_connect.route` and the ledger's queries select on. A non-empty string; required
            with ``ledger``.
        """,
    "budget": """
        budget : BudgetTracker or float, optional
            One budget for the whole run: a :class:`~llm_connect.BudgetTracker`, or a limit in USD. Every
            paid call made for an item, the judge's own included, is reserved on it before it starts;
            once the money is spent no call starts (the limit is overshot by at most the calls then in
            flight, and a reply that came back is kept and counted), and the items not attempted are
            ``error`` rows saying "budget exhausted". ``None``: ``run_config.budget_tracker``, if any.
        """,
    "batch": """
        batch : bool or str or os.PathLike or BatchOptions, default False
            Send the judge's calls to OpenAI-compatible and Anthropic adapters through the providers'
            Batch APIs (half the price, no per-minute rate limit), one provider batch per round of calls;
            the rows, statuses, columns and ledger records are those of the same run without it.
            ``True``: the batch state lives beside ``ledger`` (``<ledger>.batches/``), so the same call
            resumes a run that was killed (submitted batches are collected, never submitted again); a
            path: the state folder; a :class:`~llm_connect.adapters.BatchOptions`: poll interval, limits,
            resubmitting expired requests. ``False``: every call is made directly.
        """,
    "epochs": """
        epochs : int, default 1
            How many times each item is judged. With ``k > 1``, epoch ``e`` moves ``model_params["seed"]``
            and a judge's own ``seed`` by ``e`` (so the response cache never serves a repeat), and
            ``reducer`` turns an item's scored epochs into its score; an unscored or failed epoch is left
            out, never 0. ``1``: the single judgment.
        """,
    "reducer": """
        reducer : {"mean", "median", "mode", "max", "min"} or callable, default "mean"
            How an item's epoch scores become its score when ``epochs > 1``: one of the named reducers
            (:data:`~llm_connect.grading.REDUCERS`), or a callable taking the list of the scored epochs'
            scores and returning a number in 0..1.
        """,
})


def _indented(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else "" for line in text.split("\n"))


def fill_shared(docstring: str, components: Mapping[str, str] = RUN_OPTIONS,
                parameters: Callable[[str], bool] | None = None) -> str:
    """Replace every placeholder line ``{name}`` of ``docstring`` by the shared text of ``name``.

    Parameters
    ----------
    docstring : str
        A docstring, raw (indented, as ``__doc__`` holds it) or cleaned (as ``inspect.getdoc`` or griffe
        hold it): each placeholder takes its line's indentation.
    components : mapping of str to str, default RUN_OPTIONS
        The shared texts by name.
    parameters : callable, optional
        Says whether the documented callable takes a parameter of that name; a placeholder naming
        one it does not take is an error. ``None``: not checked.

    Returns
    -------
    str
        The docstring with each placeholder replaced; unchanged when it has none.

    Raises
    ------
    ValueError
        When a placeholder names no shared text, or a parameter the callable does not take.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in components:
            raise ValueError(f"the docstring placeholder {{{name}}} names no shared text; "
                             f"known: {', '.join(components)}")
        if parameters is not None and not parameters(name):
            raise ValueError(f"the docstring placeholder {{{name}}} documents a parameter the function does not take")
        return _indented(components[name], match.group("indent"))

    return _PLACEHOLDER.sub(one, docstring)


T = TypeVar("T")


@overload
def share_parameters(obj: T, /) -> T: ...


@overload
def share_parameters(*, texts: Mapping[str, str]) -> Callable[[T], T]: ...


def share_parameters(obj: Any = None, /, *, texts: Mapping[str, str] | None = None) -> Any:
    """Fill the shared-text placeholders (``{concurrency}``, ``{budget}``, ...) of a function's or class's docstring.

    Used bare (``@share_parameters``) it fills them from :data:`SHARED_TEXTS`; called with ``texts``
    (``@share_parameters(texts=JUDGE_TEXTS)``) from that set instead, for parameters whose names the run
    options already use with another meaning (a judge's ``run_config``, an adapter's ``prompt``).

    Parameters
    ----------
    obj : function or class
        What to document; a class documents its constructor's parameters (numpydoc), a method its own. Its
        ``__doc__`` is replaced by the filled text (nothing happens when it has none, as under ``python -OO``).
    texts : mapping of str to str, optional
        The shared texts by name (:data:`JUDGE_TEXTS`, :data:`ADAPTER_TEXTS`, :data:`PIPELINE_TEXTS`,
        :data:`PLOT_TEXTS`); given without ``obj``, it makes the decorator. ``None``: :data:`SHARED_TEXTS`.

    Returns
    -------
    function or class
        ``obj`` itself; with ``texts`` alone, the decorator that fills from them.

    Raises
    ------
    ValueError
        When a placeholder names no shared text in the set, or a parameter that ``obj`` does not take.

    See Also
    --------
    fill_shared : The replacement, also used by the documentation site's griffe extension.
    """
    if obj is None:
        if texts is None:
            raise TypeError("share_parameters() needs the function or class to document, or texts=")
        chosen = texts
        return lambda target: _share(target, chosen)
    return _share(obj, SHARED_TEXTS if texts is None else texts)


def _share(obj: T, texts: Mapping[str, str]) -> T:
    doc = obj.__doc__
    if not doc:
        return obj
    try:
        names = set(inspect.signature(obj).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # pragma: no cover - every function and class has a signature
        names = None
    where = getattr(obj, "__qualname__", repr(obj))
    try:
        filled = fill_shared(doc, texts, None if names is None else names.__contains__)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    obj.__doc__ = filled
    return obj


# -- the calibration floor's shared texts --------------------------------------------------------------------------

#: The parameters the calibration floor's diagnostics, agreement, probes and result objects share (issue #35): a
#: scores frame and the judge read from it, the intervals' settings, a result's bounds and clusters. Each means
#: one thing wherever it is taken; an entry point whose parameter means something narrower writes its own text.
CALIBRATION_TEXTS = DocstringComponents({
    "scores": """
        scores : pandas.DataFrame
            A scores frame: one row per item, a ``score_<name>`` column per judge and label (NaN where a judge
            could not score the item), as :func:`~llm_connect.calibration.score_items` makes it and a
            :class:`~llm_connect.CalibrationReport` holds it.
        """,
    "judge": """
        judge : str
            The judge whose scores are read: its name (the column ``score_<judge>``) or a column of the scores
            frame; an unknown one is a :class:`~llm_connect.errors.ValidationError` naming the judges there.
        """,
    "label": """
        label : str, default "human"
            What stands for correctness, read like ``judge``: people's label column (``"human"``, an
            annotator) or a reference judge (``"exact"``); an item is correct when its label is at least
            ``threshold``.
        """,
    "control": """
        control : str or sequence of str, optional
            Judges or labels whose scores stand in for correctness (``"human"``, ``"exact"``), read like
            ``judge`` and held fixed in the fit; only the rows with every score present are used. ``None``:
            no control.
        """,
    "n_boot": """
        n_boot : int, default 1000
            Bootstrap resamples of each interval.
        """,
    "confidence": """
        confidence : float, default 0.95
            The intervals' confidence level, in (0, 1).
        """,
    "seed": """
        seed : int or None, default 0
            Seeds the bootstrap, so the same call gives the same intervals; ``None``: a fresh seed each call.
        """,
    "low": """
        low : float
            The lower bound of the interval at the call's ``confidence`` (NaN when there is none).
        """,
    "high": """
        high : float
            The upper bound of that interval.
        """,
    "note": """
        note : str, default ""
            Why the figure is missing or rests on little data, in words; empty when there is nothing to say.
        """,
    "cluster": """
        cluster : str or None, default None
            The column the items were clustered by (every bootstrap resampled whole clusters, such as the turns
            of one conversation); ``None``: independent items.
        """,
    "n_clusters": """
        n_clusters : int or None, default None
            How many clusters the items fall in; ``None`` without clusters.
        """,
    "probe": """
        probe : {"length", "format", "injection", "position"}
            The probe (:data:`~llm_connect.calibration.PROBES`): filler appended to the candidate, the
            candidate in markdown, an instruction to the grader appended, or baseline and candidate swapped
            (pairwise judges only).
        """,
    "reference_sep": """
        reference_sep : str, optional
            The separator of several references in one ``baseline`` text (each judge reads them as it
            reads references); ``None``: one reference.
        """,
    "injection": """
        injection : str, default DEFAULT_INJECTION
            What the ``injection`` probe appends to the candidate
            (:data:`~llm_connect.testing.DEFAULT_INJECTION` asks the grader for full marks).
        """,
})

#: Every text :func:`share_parameters` fills a placeholder with: the run options and the calibration floor's.
SHARED_TEXTS: dict[str, str] = {**RUN_OPTIONS, **CALIBRATION_TEXTS}


# -- the judges' and the adapters' shared texts --------------------------------------------------------------------

#: The parameters of every judge's ``judge`` and ``ajudge``, and of its ``with_item`` (issue #35). ``prompt`` and
#: ``run_config`` mean one call here, not a run, so these texts are a set of their own, taken with
#: ``@share_parameters(texts=JUDGE_TEXTS)``; a judge whose parameter means something more (a trajectory, several
#: references, an optional configuration) writes its own text.
JUDGE_TEXTS = DocstringComponents({
    "baseline": """
        baseline : LLMResponse
            The reference answer.
        """,
    "candidate": """
        candidate : LLMResponse
            The answer judged.
        """,
    "prompt": """
        prompt : str
            The prompt both answer (a judge that reads only the answers ignores it).
        """,
    "run_config": """
        run_config : RunConfig
            The caller's call configuration: how each of the judge's calls is made (a judge that makes no call
            ignores it).
        """,
    "messages": """
        messages : list of mapping, optional
            The messages before the judged reply.
        """,
    "context": """
        context : list of str, optional
            The item's documents.
        """,
})

#: The parameters of every adapter's ``complete`` and ``acomplete`` (and an embedding adapter's ``embed`` and
#: ``aembed``), taken with
#: ``@share_parameters(texts=ADAPTER_TEXTS)``.
ADAPTER_TEXTS = DocstringComponents({
    "prompt": """
        prompt : str
            The prompt (the user message).
        """,
    "run_config": """
        run_config : RunConfig, optional
            How the call is made; ``None``: ``RunConfig()``.
        """,
    "texts": """
        texts : sequence of str
            The texts, one vector each.
        """,
})

#: The parameters the pipelines' units and pools share, taken with ``@share_parameters(texts=PIPELINE_TEXTS)``.
PIPELINE_TEXTS = DocstringComponents({
    "min_valid": """
        min_valid : int, default 1
            The fewest inputs with a verdict the pool needs.
        """,
    "origin": """
        origin : str, optional
            Where a config defined it, for error messages.
        """,
})

#: The parameters the plot functions share, taken with ``@share_parameters(texts=PLOT_TEXTS)``: seaborn's ``ax``, and
#: for a plot of a scores frame the frame and the judge and label read from it (the calibration floor's words).
PLOT_TEXTS = DocstringComponents({
    "ax": """
        ax : matplotlib.axes.Axes, optional
            Where to draw (default: the current Axes).
        """,
    "data": """
        data : pandas.DataFrame
            A scores frame, as :func:`~llm_connect.calibration.score_items` makes it (a ``score_<name>`` column per
            judge and label).
        """,
    "judge": CALIBRATION_TEXTS["judge"],
    "label": CALIBRATION_TEXTS["label"],
})

#: The sets of texts :func:`share_parameters` can be given with ``texts=``, by name (what the site's griffe
#: extension reads from a decorator such as ``@share_parameters(texts=JUDGE_TEXTS)``).
TEXT_SETS: dict[str, Mapping[str, str]] = {"SHARED_TEXTS": SHARED_TEXTS, "JUDGE_TEXTS": JUDGE_TEXTS,
                                           "ADAPTER_TEXTS": ADAPTER_TEXTS, "PIPELINE_TEXTS": PIPELINE_TEXTS,
                                           "PLOT_TEXTS": PLOT_TEXTS}
