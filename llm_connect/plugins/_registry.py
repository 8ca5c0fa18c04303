"""The registry of adapters, embedders and judges by name: built-ins, entry points and names registered in code.

Three kinds, each with its entry-point group (:data:`ENTRY_POINT_GROUPS`). Every entry is a :class:`Plugin`: a
name and a target (``"module:attr"``) loaded only when the factory is needed, so listing or resolving a name
imports no provider client, model runtime or plotting library. The built-ins are a table of such targets in
code (:data:`BUILTINS`, the same strings ``pyproject.toml`` declares as entry points), so a source tree works
without reinstalling; entry points of this package's own distribution are therefore skipped (the code is the
truth), and any other entry point adds to them. A name that two sources claim is an error naming both.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

#: The distribution this package ships as; its own entry points are the built-ins, already in :data:`BUILTINS`.
DISTRIBUTION = "llm-connect-judges"

#: The entry-point group of each kind: a plugin package declares its factories under these.
ENTRY_POINT_GROUPS: Mapping[str, str] = {
    "adapter": "llm_connect.adapters",
    "embedder": "llm_connect.embedders",
    "judge": "llm_connect.judges",
}

_HERE = "llm_connect.plugins._builtins"

#: The built-in factories by kind and name, as ``"module:attr"`` targets (pyproject.toml declares the same).
BUILTINS: Mapping[str, Mapping[str, str]] = {
    "adapter": {
        "local": f"{_HERE}:local_adapter",
        "openai": f"{_HERE}:openai_adapter",
        "anthropic": f"{_HERE}:anthropic_adapter",
    },
    "embedder": {
        "local": f"{_HERE}:local_embedder",
        "openai": f"{_HERE}:openai_embedder",
    },
    "judge": {
        "exact": f"{_HERE}:exact_judge",
        "contains": f"{_HERE}:contains_judge",
        "token-f1": f"{_HERE}:token_f1_judge",
        "embedding": f"{_HERE}:embedding_judge",
        "llm": f"{_HERE}:llm_judge",
        "trajectory-strict": f"{_HERE}:trajectory_strict_judge",
        "trajectory-unordered": f"{_HERE}:trajectory_unordered_judge",
        "trajectory-subset": f"{_HERE}:trajectory_subset_judge",
        "trajectory-superset": f"{_HERE}:trajectory_superset_judge",
    },
}

#: The grader id of each built-in judge whose name differs from it (the name is the short word).
BUILTIN_GRADER_IDS: Mapping[str, str] = {"exact": "exact-match", "embedding": "embedding-similarity",
                                         "llm": "llm-judge"}

#: The options shared by every factory of a kind: a factory receives one only if its signature names it.
SHARED_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "adapter": ("base_url", "cache"),
    "embedder": ("base_url", "cache"),
    "judge": ("llm", "embedder", "base_url", "cache", "seed", "rubric", "normalizer", "reference_sep"),
}

_WHAT = {"adapter": "LLM adapter", "embedder": "embedder", "judge": "judge"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _check_kind(kind: str) -> None:
    if kind not in ENTRY_POINT_GROUPS:
        raise ConfigError(f"unknown plugin kind {kind!r}; expected one of {', '.join(ENTRY_POINT_GROUPS)}")


def check_name(name: Any, kind: str) -> str:
    """``name`` as a registry key: lower-case letters, digits, ``.``, ``_`` and ``-``, no colon."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"a {_WHAT[kind]} name must be lower-case letters, digits, '.', '_' or '-' (no ':', which separates "
            f"an adapter's name from its argument), starting with a letter or digit; got {name!r}"
        )
    return name


@dataclass(frozen=True)
class Plugin:
    """One registered adapter, embedder or judge: its name, where its factory comes from, and how to build it.

    Parameters
    ----------
    kind : {"adapter", "embedder", "judge"}
        What the factory builds.
    name : str
        The name it is found by (``--llm NAME:ARG``, ``--judges NAME``).
    target : str
        ``"module:attr"`` of the factory (loaded on first use), or a description of an object registered in code.
    origin : str
        Where the entry comes from: ``"built-in"``, ``"register_judge()"`` or the entry point and its distribution.
    grader_id : str
        For a judge, the grader id of the judges it builds (the name unless a built-in says otherwise);
        for an adapter or embedder, the name.
    factory_object : callable, optional
        The factory itself, for one registered in code (``None``: :attr:`target` is imported on first use).

    See Also
    --------
    llm_connect.plugins.find_adapter, llm_connect.plugins.find_judge : resolve a name to its :class:`Plugin`.
    """

    kind: str
    name: str
    target: str
    origin: str
    grader_id: str = ""
    factory_object: Any = field(default=None, repr=False, compare=False)
    _loaded: list[Any] = field(init=False, default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.grader_id:
            object.__setattr__(self, "grader_id", self.name)

    def load(self) -> Callable[..., Any]:
        """The factory: imported from :attr:`target` on first call (then kept).

        Returns
        -------
        callable
            The factory the registry calls to build an adapter, embedder or judge.

        Raises
        ------
        llm_connect.errors.ConfigError
            The target cannot be imported or is not callable (the message names the plugin and its origin).
        """
        if self.factory_object is not None:
            return self.factory_object
        if self._loaded:
            return self._loaded[0]
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name.strip())
            for part in attr.strip().split(".") if attr.strip() else ():
                obj = getattr(obj, part)
        except Exception as exc:  # an ImportError, or any error the plugin's module raises while importing
            raise ConfigError(
                f"cannot load the {_WHAT[self.kind]} {self.name!r} ({self.target}, {self.origin}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not callable(obj):
            raise ConfigError(f"the {_WHAT[self.kind]} {self.name!r} ({self.target}, {self.origin}) is not "
                              f"callable: got {type(obj).__name__}")
        self._loaded.append(obj)
        return obj

    def parameters(self) -> Mapping[str, inspect.Parameter] | None:
        """The factory's parameters.

        Returns
        -------
        mapping of str to inspect.Parameter, or None
            ``None`` when its signature cannot be read (a builtin); the factory is loaded first.
        """
        try:
            return inspect.signature(self.load()).parameters
        except (TypeError, ValueError):
            return None

    def takes(self, option: str) -> bool:
        """Whether the factory's signature names ``option``.

        Parameters
        ----------
        option : str
            An option's name, e.g. ``"llm"``.

        Returns
        -------
        bool
            ``**kwargs`` does not count: the shared options (``llm``, ``seed``...) reach only the factories that
            name them.
        """
        params = self.parameters()
        return params is not None and option in params and params[option].kind in (
            inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def argument(self) -> tuple[str, bool] | None:
        """The argument a spec gives after its colon, for an adapter or embedder.

        Returns
        -------
        tuple of (str, bool), or None
            The name of the factory's first positional parameter and whether it is required (no default);
            ``None`` when the factory takes no positional parameter.
        """
        params = self.parameters()
        if params is None:
            return ("ARG", False)
        for p in params.values():
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                return (p.name, p.default is inspect.Parameter.empty)
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                return ("ARG", False)
            break
        return None

    @property
    def usage(self) -> str:
        """How a spec names it: ``openai:MODEL`` (argument required), ``local[:PATH]`` (optional), or the name
        alone (a judge, or a factory that takes no argument)."""
        if self.kind == "judge":
            return self.name
        arg = self.argument()
        if arg is None:
            return self.name
        shown = "PATH" if arg[0].endswith("path") else arg[0].upper()
        return f"{self.name}:{shown}" if arg[1] else f"{self.name}[:{shown}]"


# -- the three sources ----------------------------------------------------------------------------------------

_lock = threading.Lock()
_registered: dict[str, dict[str, Plugin]] = {kind: {} for kind in ENTRY_POINT_GROUPS}


def _builtins(kind: str) -> list[Plugin]:
    return [Plugin(kind, name, target, "built-in", BUILTIN_GRADER_IDS.get(name, name) if kind == "judge" else name)
            for name, target in BUILTINS[kind].items()]


def _normal(dist_name: str | None) -> str:
    return re.sub(r"[-_.]+", "-", dist_name or "").lower()


def _path_state() -> tuple[tuple[str, float], ...]:
    """``sys.path`` with each entry's modification time: it changes when a distribution is installed or a
    directory is put on the path, which is when the entry points must be read again."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime))
        except (OSError, ValueError, TypeError):
            state.append((str(entry), -1.0))
    return tuple(state)


_scanned: list[tuple[tuple[tuple[str, float], ...], dict[str, list[Plugin]]]] = []


def _entry_points(kind: str) -> list[Plugin]:
    """The entry points of ``kind``'s group, of every distribution but this one, sorted by name; the same entry
    point seen twice (a distribution on the path twice) counts once. The installed distributions are read
    once for the three groups, and again only when ``sys.path`` or a directory on it changes."""
    from importlib.metadata import entry_points

    state = _path_state()
    with _lock:
        if _scanned and _scanned[0][0] == state:
            return list(_scanned[0][1][kind])
    installed = entry_points()  # one reading of the installed distributions, for the three groups
    scan: dict[str, list[Plugin]] = {}
    for group_kind, group in ENTRY_POINT_GROUPS.items():
        found: dict[tuple[str, str, str], Plugin] = {}
        for ep in installed.select(group=group):
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            if _normal(dist_name) == _normal(DISTRIBUTION):
                continue  # the built-ins, declared in pyproject.toml and registered in code (BUILTINS)
            version = f" {dist.version}" if dist is not None and dist.version else ""
            origin = (f"entry point {ep.name!r} in group {group!r} of {dist_name or 'an unnamed distribution'}"
                      f"{version}")
            found.setdefault((ep.name, ep.value, _normal(dist_name)), Plugin(group_kind, ep.name, ep.value, origin))
        scan[group_kind] = sorted(found.values(), key=lambda p: p.name)
    with _lock:
        _scanned[:] = [(state, scan)]
    return list(scan[kind])


def _clash(kind: str, new: Plugin, old: Plugin, key: str) -> ConfigError:
    old_is = "the built-in" if old.origin == "built-in" else "the"
    return ConfigError(
        f"two {_WHAT[kind]}s are named {key!r}: {new.target} ({new.origin}) and {old_is} {old.target} "
        f"({old.origin}); rename the entry point of the plugin (or uninstall one of them)"
    )


def table(kind: str) -> dict[str, Plugin]:
    """Every name (a judge's grader id too) of ``kind`` -> its :class:`Plugin`, in order: the built-ins, the
    names registered in code, then the entry points by name. Raises :class:`ConfigError` on a name two claim."""
    _check_kind(kind)
    names: dict[str, Plugin] = {}

    def add(plugin: Plugin) -> None:
        for key in dict.fromkeys((plugin.name, plugin.grader_id)):
            if key in names and names[key] is not plugin:
                raise _clash(kind, plugin, names[key], key)
            names[key] = plugin

    for plugin in _builtins(kind):
        add(plugin)
    with _lock:
        registered = list(_registered[kind].values())
    for plugin in registered:
        add(plugin)
    for plugin in _entry_points(kind):
        if not _NAME.match(plugin.name):
            raise ConfigError(f"the {_WHAT[kind]} entry point {plugin.name!r} ({plugin.origin}) is not a valid name: "
                              "use lower-case letters, digits, '.', '_' or '-' (no ':')")
        add(plugin)
    return names


def available(kind: str, *, usage: bool = False) -> tuple[str, ...]:
    """The names of ``kind`` (each once: a judge by its name, not its grader id), in :func:`table` order; with
    ``usage``, as a spec writes them (``openai:MODEL``, ``local[:PATH]``)."""
    plugins = dict.fromkeys(table(kind).values())
    return tuple(_usage(p) if usage else p.name for p in plugins)


def register(kind: str, name: str, factory: Callable[..., Any], *, grader_id: str | None = None) -> Plugin:
    """Register ``factory`` under ``name`` (see :func:`llm_connect.plugins.register_adapter`)."""
    _check_kind(kind)
    check_name(name, kind)
    if not callable(factory):
        raise ConfigError(f"register_{kind}({name!r}, ...): the factory must be callable, got {type(factory).__name__}")
    if grader_id is not None and (kind != "judge" or not isinstance(grader_id, str) or not grader_id.strip()):
        raise ConfigError("grader_id= is for judges, and must be a non-empty string")
    target = f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', type(factory).__name__)}"
    plugin = Plugin(kind, name, target, f"register_{kind}()", grader_id or name, factory_object=factory)
    with _lock:
        same = _registered[kind].get(name)
        if same is not None and same.factory_object is factory and same.grader_id == plugin.grader_id:
            return same  # the same registration again (a notebook cell run twice)
    current = table(kind)
    for key in dict.fromkeys((plugin.name, plugin.grader_id)):
        if key in current:
            raise _clash(kind, plugin, current[key], key)
    with _lock:
        _registered[kind][name] = plugin
    return plugin


def parse_spec(spec: Any, kind: str) -> tuple[str, str | None]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; ``"local"`` -> ``("local", None)``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"an {_WHAT[kind]} spec is a non-empty string such as "
                          f"{'openai:MODEL' if kind != 'judge' else 'llm'}; got {spec!r}")
    name, _, arg = spec.strip().partition(":")
    return name.strip().lower(), (arg.strip() or None)


def _unknown(kind: str, key: str, names: dict[str, Plugin]) -> ConfigError:
    plugins = list(dict.fromkeys(names.values()))
    if kind == "judge":
        shown = ", ".join(f"{p.name} ({p.grader_id})" if p.grader_id != p.name else p.name for p in plugins)
    else:
        shown = ", ".join(_usage(p) for p in plugins)
    close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return ConfigError(f"unknown {_WHAT[kind]} {key[:60]!r}; {hint}choose from {shown}")


def _usage(plugin: Plugin) -> str:
    try:
        return plugin.usage
    except ConfigError:  # a plugin that cannot be loaded is still listed, by name
        return plugin.name


def find(kind: str, name: str) -> tuple[Plugin, str | None]:
    """The :class:`Plugin` a name or spec resolves to, and the spec's argument (adapters and embedders)."""
    _check_kind(kind)
    if kind == "judge":
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a judge name is a non-empty string such as llm; got {name!r}")
        key, arg = name.strip(), None
    else:
        key, arg = parse_spec(name, kind)
    names = table(kind)
    plugin = names.get(key) or names.get(key.lower().replace("_", "-"))
    if plugin is None:
        raise _unknown(kind, key, names)
    if kind != "judge":
        wanted = plugin.argument()
        if wanted is None and arg is not None:
            raise ConfigError(f"the {_WHAT[kind]} {plugin.name!r} takes no argument after ':'; use {plugin.name}")
        if wanted is not None and wanted[1] and arg is None:
            raise ConfigError(f"the {_WHAT[kind]} {plugin.name!r} needs {wanted[0]}: use {plugin.usage}")
    return plugin, arg


def _call(plugin: Plugin, args: tuple[Any, ...], options: Mapping[str, Any]) -> Any:
    """Call the factory with the shared options it names and every other option; a missing or unknown option
    is a :class:`ConfigError` naming the plugin."""
    factory = plugin.load()
    shared = SHARED_OPTIONS[plugin.kind]
    kwargs = {k: v for k, v in options.items() if k not in shared or plugin.takes(k)}
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            takes = [n for n, p in signature.parameters.items() if p.kind in (
                inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)][len(args):]
            raise ConfigError(f"the {_WHAT[plugin.kind]} {plugin.name!r} ({plugin.origin}): {exc}; it takes "
                              f"{', '.join(takes) or 'no option'}") from None
    return factory(*args, **kwargs)


def _checked(plugin: Plugin, built: Any) -> Any:
    method = {"adapter": "complete", "embedder": "embed", "judge": "judge"}[plugin.kind]
    ok = callable(getattr(built, method, None))
    if plugin.kind == "judge":
        ok = ok and isinstance(getattr(built, "grader_id", None), str)
    if not ok:
        what = {"adapter": "an LLM adapter (a complete(prompt, run_config) method)",
                "embedder": "an embedder (an embed(texts) method)",
                "judge": "a judge (a grader_id and a judge(...) method)"}[plugin.kind]
        raise ConfigError(f"the {_WHAT[plugin.kind]} {plugin.name!r} ({plugin.target}, {plugin.origin}) built "
                          f"{type(built).__name__}, which is not {what}")
    return built


def build(kind: str, name: str, options: Mapping[str, Any]) -> Any:
    """Build the adapter, embedder or judge ``name`` names (see :func:`llm_connect.plugins.adapter`)."""
    plugin, arg = find(kind, name)
    if kind != "judge":
        args: tuple[Any, ...] = () if plugin.argument() is None else (arg,)
        return _checked(plugin, _call(plugin, args, options))
    options = dict(options)
    shared: dict[str, Any] = {k: options.get(k) for k in ("base_url", "cache") if k in options}
    for option, sub in (("llm", "adapter"), ("embedder", "embedder")):
        if isinstance(options.get(option), str) and plugin.takes(option):
            options[option] = build(sub, options[option], shared)
    return _checked(plugin, _call(plugin, (), options))
