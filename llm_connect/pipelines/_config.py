"""Build a pipeline from a dict or a YAML file.

Shape (every key checked; a wrong one is a :class:`ConfigError` naming it, e.g.
``pipeline[1].layer.unit.type: unknown unit type 'foo'; expected one of ...``)::

    name: factual-errors            # optional
    threshold: 0.7                  # optional: score >= threshold passes
    pipeline:                       # the stages, in order
      - layer:                      # a layer ...
          unit: {type: ..., ...}    #   ... of one unit (or `units: [...]`)
          repeat: 3                 #   optional
          inner: independent        #   or chain
          connect: dense            #   how it feeds the next stage (dense|broadcast|cumulative|last)
      - type: majority-pool         # a single unit is a stage too (or `unit: {...}`)

Unit types: ``categorical-judge`` (``categories``, ``values``), ``boolean-judge``
(``values``), ``likert-judge`` (``min``, ``max``), ``continuous-judge`` (``low``,
``high``), ``pairwise-judge`` (``order``, ``allow_tie``), ``verify``; judges and
verify take ``prompt``, ``name``, ``explanation``, ``adapter`` (a name from
``adapters=``, else an adapter spec of :mod:`llm_connect.plugins` such as
``openai:MODEL``), ``retries``, ``temperature``, ``seed``, ``max_tokens``; judges
also ``scoring`` and ``top_logprobs``. Pools: ``majority-pool`` (``tie_break``;
``max-pool`` is an alias of it, Verdict's name for majority vote), ``mean-pool``,
``median-pool``, ``weighted-mean-pool`` (``weights``); all take ``name`` and
``min_valid``.

A verify layer without ``repeat`` after a layer of n units verifies each of
them (see :mod:`llm_connect.pipelines._pipeline`). In YAML, quote ``"yes"`` and
``"no"``: unquoted they are booleans.

Limits, pinned (each checked when the config is loaded; past one is a
:class:`ConfigError` naming the key): ``repeat`` <= :data:`MAX_REPEAT` (defined
beside :class:`~llm_connect.pipelines.Layer`, which enforces it too),
``retries`` <= :data:`MAX_RETRIES`, at most :data:`MAX_UNITS` units in the
whole pipeline (counting repeats and the verifiers a verify stage is
replicated into), a YAML file of at most :data:`MAX_CONFIG_BYTES` bytes, and
template format specs no wider or more precise than :data:`MAX_FORMAT_WIDTH`
(item fields take no attributes or indices: see
:mod:`llm_connect.pipelines._template`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core import LLMAdapter
from ..errors import ConfigError, LLMConnectError
from ..grading._parse import brief_repr
from ._llm_units import MAX_RETRIES, JudgeUnit, PairwiseUnit, VerifyUnit
from ._pipeline import CONNECTIONS, INNER, MAX_REPEAT, Layer, Pipeline, Unit
from ._pools import MajorityPool, MeanPool, MedianPool, WeightedMeanPool
from ._scales import BooleanScale, CategoricalScale, ContinuousScale, LikertScale, finite_number
from ._template import MAX_FORMAT_WIDTH

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_FORMAT_WIDTH",
    "MAX_REPEAT",
    "MAX_RETRIES",
    "MAX_UNITS",
    "UNIT_TYPES",
    "from_config",
]

#: The most units (LLM units and pools, counting repeats and replicated verifiers) a config may build.
MAX_UNITS = 1_000
#: The largest YAML config file read, in bytes.
MAX_CONFIG_BYTES = 1_000_000

_LLM_KEYS = ("type", "name", "prompt", "explanation", "adapter", "retries", "temperature", "seed", "max_tokens")
_JUDGE_KEYS = (*_LLM_KEYS, "scoring", "top_logprobs")
_POOL_KEYS = ("type", "name", "min_valid")

UNIT_TYPES: dict[str, tuple[str, ...]] = {
    "categorical-judge": (*_JUDGE_KEYS, "categories", "values"),
    "boolean-judge": (*_JUDGE_KEYS, "values"),
    "likert-judge": (*_JUDGE_KEYS, "min", "max"),
    "continuous-judge": (*_LLM_KEYS, "low", "high"),
    "pairwise-judge": (*_JUDGE_KEYS, "order", "allow_tie"),
    "verify": _LLM_KEYS,
    "majority-pool": (*_POOL_KEYS, "tie_break"),
    "max-pool": (*_POOL_KEYS, "tie_break"),  # alias of majority-pool, Verdict's name for majority vote
    "mean-pool": _POOL_KEYS,
    "median-pool": _POOL_KEYS,
    "weighted-mean-pool": (*_POOL_KEYS, "weights"),
}
_REQUIRED = {
    "categorical-judge": ("prompt", "categories"),
    "boolean-judge": ("prompt",),
    "likert-judge": ("prompt",),
    "continuous-judge": ("prompt",),
    "weighted-mean-pool": ("weights",),
}
_TOP_KEYS = ("pipeline", "threshold", "name")
_LAYER_KEYS = ("unit", "units", "repeat", "inner", "connect")


def _fail(path: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {message}")


def _key(key: Any) -> str:
    """A config key as shown in a path (bounded)."""
    text = key if isinstance(key, str) else brief_repr(key)
    return text if len(text) <= 60 else text[:59] + "…"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return finite_number(v)


def _int_at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if _is_int(v) and v >= low else f"must be an integer >= {low}, got {brief_repr(v)}"


def _int_between(low: int, high: int, why: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if _is_int(v) and low <= v <= high:
            return None
        return f"must be an integer from {low} to {high} ({why}), got {brief_repr(v)}"

    return check


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: (
        None if isinstance(v, str) and v in options else f"expected one of {list(options)}, got {brief_repr(v)}"
    )


def _check_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {brief_repr(v)}"


def _check_text(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else f"must be a non-empty string, got {brief_repr(v)}"


def _check_name(v: Any) -> str | None:
    if isinstance(v, str) and v.isidentifier():
        return None
    return f"must be an identifier (letters, digits, _), got {brief_repr(v)}"


def _check_temperature(v: Any) -> str | None:
    return None if _is_num(v) and v >= 0 else f"must be a number >= 0, got {brief_repr(v)}"


def _check_number(v: Any) -> str | None:
    return None if _is_num(v) else f"must be a number, got {brief_repr(v)}"


def _check_int(v: Any) -> str | None:
    return None if _is_int(v) else f"must be an integer, got {brief_repr(v)}"


def _check_list(v: Any) -> str | None:
    return None if isinstance(v, list) else f"must be a list, got {type(v).__name__}"


def _check_mapping(v: Any) -> str | None:
    return None if isinstance(v, Mapping) else f"must be a mapping, got {type(v).__name__}"


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "name": _check_name,
    "prompt": _check_text,
    "explanation": _check_bool,
    "retries": _int_between(0, MAX_RETRIES, "MAX_RETRIES: each retry is a paid call"),
    "temperature": _check_temperature,
    "seed": _int_at_least(0),
    "max_tokens": _int_at_least(1),
    "scoring": _one_of(("verdict", "logprob")),
    "top_logprobs": _int_at_least(1),
    "categories": _check_list,
    "values": _check_mapping,
    "min": _check_int,
    "max": _check_int,
    "low": _check_number,
    "high": _check_number,
    "order": _one_of(PairwiseUnit.ORDERS),
    "allow_tie": _check_bool,
    "tie_break": _one_of(MajorityPool.TIE_BREAKS),
    "min_valid": _int_at_least(1),
    "weights": _check_mapping,
}


def _check_keys(node: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in node:
        if key not in allowed:
            raise _fail(f"{path}.{_key(key)}", f"unknown key {brief_repr(key)}; expected one of {list(allowed)}")


def _resolve_adapter(value: Any, adapters: Mapping[str, Any] | None, path: str) -> Any:
    """A unit's ``adapter:``: a name given in ``adapters=``, else an adapter spec of the registry
    (``openai:MODEL``, ``anthropic:MODEL``, a plugin's name), built once per config (kept in ``adapters``)."""
    if isinstance(value, str):
        if adapters is None or value not in adapters:
            from .. import plugins

            try:
                built = plugins.adapter(value)
            except ConfigError as exc:
                known = sorted(adapters) if adapters else []
                shown = brief_repr(value)
                raise _fail(path, f"unknown adapter {shown}: not in adapters= (pass it in from_config(..., "
                            f"adapters={{{shown}: ...}})" + (f"; known: {known}" if known else "") + "), nor an "
                            f"adapter spec: {exc}") from None
            except LLMConnectError as exc:  # a missing extra or API key: still a ConfigError naming the key
                raise _fail(path, f"adapter {brief_repr(value)} cannot be built: {type(exc).__name__}: {exc}") \
                    from None
            if isinstance(adapters, dict):  # the next unit that names it shares it
                adapters[value] = built
            return built
        return adapters[value]
    if callable(getattr(value, "complete", None)):
        return value
    raise _fail(path, f"must name an adapter given in adapters= or an adapter spec, got {brief_repr(value)}")


class _Count:
    """The units a config builds so far, against :data:`MAX_UNITS` (checked before any is built)."""

    def __init__(self) -> None:
        self.total = 0
        self.last = 0  # how many outputs the previous stage has

    def take(self, n: int, path: str) -> None:
        self.total += n
        self.last = n
        if self.total > MAX_UNITS:
            raise _fail(
                path, f"the pipeline would hold more than MAX_UNITS = {MAX_UNITS} units ({self.total} so far, "
                "counting repeats and the verifiers a verify stage is replicated into)"
            )


def _unit(node: Any, path: str, adapters: Mapping[str, Any] | None) -> Unit:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a unit must be a mapping with a 'type', got {type(node).__name__}")
    if "type" not in node:
        raise _fail(f"{path}.type", f"missing; expected one of {list(UNIT_TYPES)}")
    kind = node["type"]
    if not isinstance(kind, str) or kind not in UNIT_TYPES:
        raise _fail(f"{path}.type", f"unknown unit type {brief_repr(kind)}; expected one of {list(UNIT_TYPES)}")
    _check_keys(node, UNIT_TYPES[kind], path)
    for key in _REQUIRED.get(kind, ()):
        if key not in node:
            raise _fail(f"{path}.{key}", f"missing; a {kind} unit needs {key!r}")
    opts: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            continue
        if key == "adapter":
            opts["adapter"] = _resolve_adapter(value, adapters, f"{path}.adapter")
            continue
        problem = _CHECKS[key](value) if key in _CHECKS else None
        if problem:
            raise _fail(f"{path}.{key}", problem)
        opts[key] = value
    opts["origin"] = path
    try:
        return _make(kind, opts)
    except ConfigError as exc:
        raise _fail(path, str(exc)) from None


def _make(kind: str, o: dict[str, Any]) -> Unit:
    if kind.endswith("-pool"):
        if kind in ("majority-pool", "max-pool"):  # max-pool: alias of majority-pool (Verdict's name)
            return MajorityPool(**o)
        if kind == "mean-pool":
            return MeanPool(**o)
        if kind == "median-pool":
            return MedianPool(**o)
        weights = o.pop("weights")
        return WeightedMeanPool(weights, **o)
    if kind == "verify":
        return VerifyUnit(**o)
    if kind == "pairwise-judge":
        return PairwiseUnit(**o)
    prompt = o.pop("prompt")
    if kind == "categorical-judge":
        scale: Any = CategoricalScale(o.pop("categories"), o.pop("values", None))
    elif kind == "boolean-judge":
        scale = BooleanScale(values=o.pop("values", None))
    elif kind == "likert-judge":
        scale = LikertScale(o.pop("min", 1), o.pop("max", 5))
    else:
        scale = ContinuousScale(o.pop("low", 0.0), o.pop("high", 1.0))
    return JudgeUnit(prompt, scale, **o)


def _is_verify(node: Any) -> bool:
    return isinstance(node, Mapping) and node.get("type") == "verify"


def _stage(node: Any, path: str, adapters: Mapping[str, Any] | None, count: _Count) -> Layer:
    if not isinstance(node, Mapping):
        raise _fail(
            path, f"a stage must be a mapping ('layer:', 'unit:' or a unit with 'type:'), got {brief_repr(node)}"
        )
    if "layer" in node:
        if len(node) != 1:
            extra = next(k for k in node if k != "layer")
            raise _fail(
                f"{path}.{_key(extra)}", f"unknown key {brief_repr(extra)} beside 'layer'; put it inside the layer"
            )
        return _layer(node["layer"], f"{path}.layer", adapters, count)
    if "unit" in node:
        if len(node) != 1:
            extra = next(k for k in node if k != "unit")
            raise _fail(
                f"{path}.{_key(extra)}", f"unknown key {brief_repr(extra)} beside 'unit'; put it inside the unit"
            )
        unit, unit_path = node["unit"], f"{path}.unit"
    elif "type" in node:
        unit, unit_path = node, path
    else:
        raise _fail(path, f"a stage needs 'layer', 'unit' or 'type'; got keys {brief_repr(list(node))}")
    # a single verify unit after n outputs is replicated n times (see _pipeline)
    count.take(max(count.last, 1) if _is_verify(unit) else 1, unit_path)
    return Layer(_unit(unit, unit_path, adapters), origin=path)


def _layer(node: Any, path: str, adapters: Mapping[str, Any] | None, count: _Count) -> Layer:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a layer must be a mapping with 'unit' or 'units', got {type(node).__name__}")
    _check_keys(node, _LAYER_KEYS, path)
    if ("unit" in node) == ("units" in node):
        raise _fail(path, "a layer needs exactly one of 'unit' or 'units'")
    repeat = node.get("repeat")
    if repeat is not None and (problem := _int_between(1, MAX_REPEAT, "MAX_REPEAT")(repeat)):
        raise _fail(f"{path}.repeat", problem)
    raw = [node["unit"]] if "unit" in node else node["units"]
    if "units" in node and (not isinstance(raw, list) or not raw):
        raise _fail(f"{path}.units", "must be a non-empty list of units")
    if repeat is None and len(raw) == 1 and _is_verify(raw[0]):
        count.take(max(count.last, 1), path)  # replicated into one verifier per incoming output
    else:
        count.take(len(raw) * (repeat or 1), path)
    if "unit" in node:
        units: list[Unit] = [_unit(node["unit"], f"{path}.unit", adapters)]
    else:
        units = [_unit(u, f"{path}.units[{i}]", adapters) for i, u in enumerate(raw)]
    inner = node.get("inner", "independent")
    if problem := _one_of(INNER)(inner):
        raise _fail(f"{path}.inner", problem)
    connect = node.get("connect")
    if connect is not None and (problem := _one_of(CONNECTIONS)(connect)):
        raise _fail(f"{path}.connect", problem)
    return Layer(units if len(units) > 1 else units[0], repeat, inner=inner, connect=connect, origin=path)


def _load(config: Any) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    if isinstance(config, (str, os.PathLike)):
        try:
            path = Path(config)
            shown = brief_repr(str(path))
            if not path.is_file():
                raise ConfigError(f"config file {shown} does not exist; pass a dict or a path to a YAML file")
            with path.open("rb") as f:
                raw = f.read(MAX_CONFIG_BYTES + 1)
        except ConfigError:
            raise
        except (OSError, ValueError, TypeError) as exc:  # unreadable, a name too long, a NUL in the name...
            raise ConfigError(f"config file {brief_repr(str(config))} cannot be read: {type(exc).__name__}: {exc}") \
                from None
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{shown}: the file is over MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{shown}: not UTF-8 text (byte {exc.start}); save the YAML as UTF-8") from None
        import yaml  # a core dependency

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{shown}: not valid YAML: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{shown}: not valid YAML: nested too deeply") from None
        except Exception as exc:  # a value the YAML loader cannot build (a date out of range, an int too long...)
            raise ConfigError(f"{shown}: not valid YAML: {type(exc).__name__}: {exc}") from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"{shown}: the YAML must be a mapping with a 'pipeline' key, got {type(data).__name__}")
        return data
    raise ConfigError(f"config must be a dict or a path to a YAML file, got {type(config).__name__}")


def from_config(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    adapter: LLMAdapter | None = None,
    adapters: Mapping[str, LLMAdapter] | None = None,
) -> Pipeline:
    """A validated :class:`Pipeline` from a dict or a YAML file path.

    ``adapter`` serves every unit that names none; ``adapters`` maps the names
    units give in ``adapter:`` to adapters. A name not in ``adapters`` is an
    adapter spec of the registry (:func:`llm_connect.plugins.adapter`:
    ``openai:MODEL``, ``anthropic:MODEL``, ``local``, a plugin's name), built
    once per config and shared by the units that name it.

    Errors: whatever is wrong with the config, ``from_config`` raises a
    :class:`ConfigError` (a ``ValueError``) naming the key, and nothing else:
    a missing or unreadable file, a file that is not UTF-8 or not YAML, YAML
    nested too deeply to load, an unknown key or type, a bad value, and any
    limit passed. The limits (module constants, checked at load time):

    - ``repeat`` <= :data:`MAX_REPEAT` (100);
    - ``retries`` <= :data:`MAX_RETRIES` (10; each retry is a paid call);
    - at most :data:`MAX_UNITS` (1,000) units in the pipeline, counting
      repeats and replicated verifiers;
    - a YAML file of at most :data:`MAX_CONFIG_BYTES` (1,000,000) bytes;
    - a template's format spec: the standard mini-language, no nested field,
      width and precision <= :data:`MAX_FORMAT_WIDTH` (10,000); an item field
      takes no attribute or index (``{candidate.__class__}``,
      ``{candidate[0]}`` are refused), and a conversion is ``!s`` or ``!r``.

    Parameters
    ----------
    config : mapping or str or os.PathLike
        The config as a dict, or the path of a YAML file.
    adapter : LLMAdapter, optional
        Serves every unit that names none.
    adapters : mapping of str to LLMAdapter, optional
        The adapters units name in ``adapter:``.

    Returns
    -------
    Pipeline
        The pipeline, validated.

    Raises
    ------
    ConfigError
        Anything wrong with the config (above).

    See Also
    --------
    Pipeline : Build one in code.

    Examples
    --------
    >>> from llm_connect.testing import ScriptedAdapter
    >>> config = {"name": "vote", "pipeline": [
    ...     {"layer": {"unit": {"type": "boolean-judge", "prompt": "Is {candidate} right?", "temperature": 0.7},
    ...                "repeat": 3}},
    ...     {"type": "majority-pool"}]}
    >>> from_config(config, adapter=ScriptedAdapter(["yes"], cycle=True)).llm_units
    3
    """
    try:
        return _from_config(config, adapter, adapters)
    except RecursionError:
        raise ConfigError("config: nested too deeply to read") from None


def _from_config(config: Any, adapter: Any, adapters: Mapping[str, Any] | None) -> Pipeline:
    data = _load(config)
    _check_keys(data, _TOP_KEYS, "config")
    if "pipeline" not in data:
        raise ConfigError("config.pipeline: missing; list the stages under 'pipeline:'")
    stages = data["pipeline"]
    if not isinstance(stages, list) or not stages:
        raise ConfigError("pipeline: must be a non-empty list of stages")
    if len(stages) > MAX_UNITS:
        raise ConfigError(f"pipeline: {len(stages)} stages; a pipeline holds at most MAX_UNITS = {MAX_UNITS} units")
    threshold = data.get("threshold")
    if threshold is not None and not (_is_num(threshold) and 0.0 <= threshold <= 1.0):
        raise ConfigError(f"threshold: must be a number in 0.0..1.0, got {brief_repr(threshold)}")
    name = data.get("name", "pipeline")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"name: must be a non-empty string, got {brief_repr(name)}")
    if adapter is not None and not callable(getattr(adapter, "complete", None)):
        raise ConfigError("adapter must have a complete(prompt, run_config) method")
    count = _Count()
    adapters = dict(adapters or {})  # the named adapters, and those built from specs (once per config)
    layers = [_stage(s, f"pipeline[{i}]", adapters, count) for i, s in enumerate(stages)]
    return Pipeline(layers, threshold=threshold, adapter=adapter, name=name).validate()
