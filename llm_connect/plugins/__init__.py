"""Adapters, embedders and judges by name: one registry the command line and ``from_config`` read.

A name builds the thing it names::

    >>> from llm_connect import plugins
    >>> plugins.available_adapters()
    ('local', 'openai', 'anthropic')
    >>> plugins.judge("exact").grader_id
    'exact-match'

An LLM adapter or an embedder is named by a *spec*, ``NAME`` or ``NAME:ARG`` (``local``, ``local:PATH.gguf``,
``openai:gpt-4o-mini``, ``anthropic:claude-3-5-haiku-latest``): the text after the first colon is the factory's
first argument. A judge is named by its name or its grader id (``exact`` or ``exact-match``). The
``llm-connect`` options that name one (``--llm``, ``--embedder``, ``--judge``, ``--judges``, ``align --judge``
and ``--optimizer``) and a pipeline unit's ``adapter:`` in :func:`~llm_connect.pipelines.from_config` read
this registry, so a name registered here works in all of them.

Where names come from, in order:

1. the built-ins, registered in code (so a source tree needs no reinstall) and declared in ``pyproject.toml``
   as entry points in the same words; entry points of this package's own distribution are skipped;
2. :func:`register_adapter`, :func:`register_embedder`, :func:`register_judge` (this process only);
3. the entry points of installed packages, in the groups of :data:`ENTRY_POINT_GROUPS`
   (``llm_connect.adapters``, ``llm_connect.embedders``, ``llm_connect.judges``), each
   ``name = "module:factory"``: how a plugin package ships (see the guide, docs/guides/plugins.md).

A name two of them claim is a :class:`~llm_connect.errors.ConfigError` naming both, never a silent choice.
An unknown name is a :class:`~llm_connect.errors.ConfigError` listing the names there are.

Lazy: listing names reads the installed packages' metadata only; resolving one imports its factory's module
(the built-ins' is light); the provider client, the model runtime or torch load only when the adapter is
built. So ``llm-connect --help`` lists every name without loading a model.

Why not pluggy, as simonw/llm does: llm's plugins are modules implementing *hooks* (``register_models``,
``register_commands``) that pluggy calls in turn, and ``load_setuptools_entrypoints`` imports every plugin
module up front. Here a plugin contributes one named factory, so the entry point's name *is* the registry
key: names are listed from metadata without importing any plugin, and a clash is detected by name before
anything loads. :mod:`importlib.metadata` does all of that in a few lines, without a dependency.

Factories
---------
An adapter or embedder factory is ``factory(arg, **options)`` (``arg``: the text after the colon, ``None``
without; a factory whose first parameter has no default *needs* one, ``openai:MODEL``; one with no positional
parameter takes none). A judge factory is ``factory(**options)``. The *shared* options
(:data:`SHARED_OPTIONS`: ``base_url`` and ``cache``; for judges also ``llm``, ``embedder``, ``seed``,
``rubric``, ``normalizer``, ``reference_sep``) are what a caller such as the command line passes to every
factory: each receives only those its signature names (not through ``**kwargs``), and a judge factory that
names ``llm`` or ``embedder`` gets an adapter built from a spec string. Any other option is passed as
given, and one the factory does not take is a :class:`~llm_connect.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _registry
from ._registry import BUILTINS, ENTRY_POINT_GROUPS, SHARED_OPTIONS, Plugin

if TYPE_CHECKING:
    from ..core import EmbeddingAdapter, LLMAdapter
    from ..grading import Judge

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUPS",
    "SHARED_OPTIONS",
    "Plugin",
    "adapter",
    "available_adapters",
    "available_embedders",
    "available_judges",
    "embedder",
    "find_adapter",
    "find_embedder",
    "find_judge",
    "judge",
    "register_adapter",
    "register_embedder",
    "register_judge",
]


def adapter(spec: str, /, **options: Any) -> LLMAdapter:
    """Build the LLM adapter a spec names.

    Parameters
    ----------
    spec : str
        ``NAME`` or ``NAME:ARG``: ``local``, ``local:PATH.gguf``, ``openai:MODEL``, ``anthropic:MODEL``, or a
        plugin's name (see :func:`available_adapters`).
    **options
        ``base_url`` and ``cache`` (the shared options: passed only to a factory that names them), and any
        option of the factory (``openai:MODEL`` and ``anthropic:MODEL`` take those of
        :class:`~llm_connect.adapters.HTTPAdapter`, e.g. ``api_key_env``, ``max_retries``).

    Returns
    -------
    LLMAdapter
        What the factory built (checked to have a ``complete`` method).

    Raises
    ------
    llm_connect.errors.ConfigError
        An unknown name (the message lists the names there are), a missing or unexpected argument after the
        colon, an option the factory does not take, a name two sources claim, a plugin that cannot be loaded.
    llm_connect.errors.MissingDependencyError
        The adapter needs an extra that is not installed (``local`` without the ``local`` extra).

    See Also
    --------
    available_adapters, find_adapter, register_adapter

    Examples
    --------
    >>> from llm_connect import plugins
    >>> plugins.adapter("openai:gpt-4o-mini", base_url="http://127.0.0.1:8000/v1").model_id
    'gpt-4o-mini'
    """
    built: LLMAdapter = _registry.build("adapter", spec, options)
    return built


def embedder(spec: str, /, **options: Any) -> EmbeddingAdapter:
    """Build the embedder a spec names (``local``, ``local:PATH``, ``openai:MODEL`` or a plugin's name).

    Parameters
    ----------
    spec : str
        ``NAME`` or ``NAME:ARG`` (see :func:`available_embedders`).
    **options
        ``base_url`` and ``cache`` (passed only to a factory that names them), and any option of the factory.

    Returns
    -------
    EmbeddingAdapter
        What the factory built (checked to have an ``embed`` method).

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`adapter`.

    See Also
    --------
    available_embedders, register_embedder
    """
    built: EmbeddingAdapter = _registry.build("embedder", spec, options)
    return built


def judge(name: str, /, **options: Any) -> Judge:
    """Build the judge a name (or grader id) names.

    Parameters
    ----------
    name : str
        A judge's name or grader id: ``exact`` (``exact-match``), ``contains``, ``token-f1``, ``embedding``
        (``embedding-similarity``), ``llm`` (``llm-judge``), ``trajectory-strict``, ``trajectory-unordered``,
        ``trajectory-subset``, ``trajectory-superset``, or a plugin's (see :func:`available_judges`).
    **options
        The shared options (:data:`SHARED_OPTIONS`), each passed only to a factory that names it:
        ``llm`` (an adapter, or a spec built with :func:`adapter`), ``embedder`` (an embedder or a spec),
        ``base_url`` and ``cache`` (for the adapters built from specs), ``seed``, ``rubric``, ``normalizer``,
        ``reference_sep``; and any option of the judge (``tool_args=`` of the trajectory judges,
        ``scoring=`` of the LLM judge...), passed as given.

    Returns
    -------
    Judge
        What the factory built (checked to have a ``grader_id`` and a ``judge`` method).

    Raises
    ------
    llm_connect.errors.ConfigError
        An unknown name ("did you mean", and every name with its grader id), a missing required option
        (``llm`` for the LLM judge), an option the factory does not take, a name two sources claim.

    See Also
    --------
    available_judges, find_judge, register_judge

    Examples
    --------
    >>> from llm_connect import plugins
    >>> plugins.judge("contains", reference_sep="|").grader_id
    'contains'
    """
    built: Judge = _registry.build("judge", name, options)
    return built


def available_adapters(*, usage: bool = False) -> tuple[str, ...]:
    """The names of the LLM adapters: the built-ins, then those registered in code, then the entry points'.

    Parameters
    ----------
    usage : bool, default False
        Give each as a spec writes it: ``local[:PATH]`` (the argument is optional), ``openai:MODEL`` (needed).

    Returns
    -------
    tuple of str
        Each adapter once.

    Raises
    ------
    llm_connect.errors.ConfigError
        A name two sources claim, or an entry point whose name is not valid.
    """
    return _registry.available("adapter", usage=usage)


def available_embedders(*, usage: bool = False) -> tuple[str, ...]:
    """The names of the embedders, in the order of :func:`available_adapters`.

    Parameters
    ----------
    usage : bool, default False
        Give each as a spec writes it (``local[:PATH]``, ``openai:MODEL``).

    Returns
    -------
    tuple of str

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`available_adapters`.
    """
    return _registry.available("embedder", usage=usage)


def available_judges() -> tuple[str, ...]:
    """The names of the judges (``find_judge(name).grader_id`` gives each one's grader id).

    Returns
    -------
    tuple of str

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`available_adapters`.
    """
    return _registry.available("judge")


def find_adapter(spec: str) -> Plugin:
    """The registry entry a spec resolves to, without building anything (its factory's module is imported).

    Parameters
    ----------
    spec : str
        ``NAME`` or ``NAME:ARG``.

    Returns
    -------
    Plugin

    Raises
    ------
    llm_connect.errors.ConfigError
        An unknown name, or an argument the factory needs and the spec lacks (``openai`` without ``:MODEL``)
        or one it does not take.
    """
    return _registry.find("adapter", spec)[0]


def find_embedder(spec: str) -> Plugin:
    """The registry entry an embedder spec resolves to, as :func:`find_adapter`.

    Parameters
    ----------
    spec : str

    Returns
    -------
    Plugin

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`find_adapter`.
    """
    return _registry.find("embedder", spec)[0]


def find_judge(name: str) -> Plugin:
    """The registry entry a judge's name or grader id resolves to (case and ``_``/``-`` aside).

    Parameters
    ----------
    name : str

    Returns
    -------
    Plugin
        Its ``name`` (the short name ``--judges`` takes) and ``grader_id``.

    Raises
    ------
    llm_connect.errors.ConfigError
        An unknown name (with "did you mean" for a near miss, and every name).
    """
    return _registry.find("judge", name)[0]


def register_adapter(name: str, factory: Callable[..., Any]) -> Plugin:
    """Register an LLM adapter factory under ``name`` for this process.

    Parameters
    ----------
    name : str
        Lower-case letters, digits, ``.``, ``_``, ``-`` (no colon: a spec's colon separates the argument).
    factory : callable
        ``factory(arg, **options)``, as the entry points' (see the module docstring).

    Returns
    -------
    Plugin
        The new entry. Registering the same factory under the same name again returns it unchanged.

    Raises
    ------
    llm_connect.errors.ConfigError
        A name already taken (by a built-in, an entry point or another factory: the message names both), an
        invalid name, a factory that is not callable.

    See Also
    --------
    adapter, available_adapters
    """
    return _registry.register("adapter", name, factory)


def register_embedder(name: str, factory: Callable[..., Any]) -> Plugin:
    """Register an embedder factory under ``name`` for this process, as :func:`register_adapter`.

    Parameters
    ----------
    name : str
    factory : callable
        ``factory(arg, **options)``.

    Returns
    -------
    Plugin

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`register_adapter`.
    """
    return _registry.register("embedder", name, factory)


def register_judge(name: str, factory: Callable[..., Any], *, grader_id: str | None = None) -> Plugin:
    """Register a judge factory under ``name`` for this process.

    Parameters
    ----------
    name : str
        The name ``--judges`` and :func:`judge` take.
    factory : callable
        ``factory(**options)`` returning a judge; it receives the shared options its signature names
        (``llm``: an adapter built from ``--llm``; ``seed``, ``rubric``...).
    grader_id : str, optional
        The grader id of the judges it builds, also accepted as a name (default: ``name``); the command line
        names the judge by it in its tables, files and ``--require``.

    Returns
    -------
    Plugin

    Raises
    ------
    llm_connect.errors.ConfigError
        As :func:`register_adapter` (the grader id counts as a name too).

    See Also
    --------
    judge, available_judges

    Examples
    --------
    >>> from llm_connect import plugins
    >>> from llm_connect.grading import ExactMatchJudge
    >>> def strict(**options):
    ...     return ExactMatchJudge(grader_id="strict-exact", **options)
    >>> _ = plugins.register_judge("strict-exact", strict)
    >>> plugins.judge("strict-exact").grader_id
    'strict-exact'
    """
    return _registry.register("judge", name, factory, grader_id=grader_id)
