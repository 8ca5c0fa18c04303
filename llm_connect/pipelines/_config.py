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
      - type: max-pool              # a single unit is a stage too (or `unit: {...}`)

Unit types: ``categorical-judge`` (``categories``, ``values``), ``boolean-judge``
(``values``), ``likert-judge`` (``min``, ``max``), ``continuous-judge`` (``low``,
``high``), ``pairwise-judge`` (``order``, ``allow_tie``), ``verify``; judges and
verify take ``prompt``, ``name``, ``explanation``, ``adapter`` (a name from
``adapters=``), ``retries``, ``temperature``, ``seed``, ``max_tokens``; judges
also ``scoring`` and ``top_logprobs``. Pools: ``max-pool`` (alias
``majority-pool``; ``tie_break``), ``mean-pool``, ``median-pool``,
``weighted-mean-pool`` (``weights``); all take ``name`` and ``min_valid``.

A verify layer without ``repeat`` after a layer of n units verifies each of
them (see :mod:`llm_connect.pipelines._pipeline`). In YAML, quote ``"yes"`` and
``"no"``: unquoted they are booleans.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._pipeline import CONNECTIONS, INNER, Layer, Pipeline
from ._scales import BooleanScale, CategoricalScale, ContinuousScale, LikertScale
from ._units import (
    JudgeUnit,
    MajorityPool,
    MeanPool,
    MedianPool,
    PairwiseUnit,
    Unit,
    VerifyUnit,
    WeightedMeanPool,
)

__all__ = ["UNIT_TYPES", "from_config"]

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
    "max-pool": (*_POOL_KEYS, "tie_break"),
    "majority-pool": (*_POOL_KEYS, "tie_break"),
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


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int_at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if _is_int(v) and v >= low else f"must be an integer >= {low}, got {v!r}"


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"expected one of {list(options)}, got {v!r}"


def _check_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


def _check_text(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else f"must be a non-empty string, got {v!r}"


def _check_name(v: Any) -> str | None:
    return None if isinstance(v, str) and v.isidentifier() else f"must be an identifier (letters, digits, _), got {v!r}"


def _check_temperature(v: Any) -> str | None:
    return None if _is_num(v) and v >= 0 else f"must be a number >= 0, got {v!r}"


def _check_number(v: Any) -> str | None:
    return None if _is_num(v) else f"must be a number, got {v!r}"


def _check_int(v: Any) -> str | None:
    return None if _is_int(v) else f"must be an integer, got {v!r}"


def _check_list(v: Any) -> str | None:
    return None if isinstance(v, list) else f"must be a list, got {type(v).__name__}"


def _check_mapping(v: Any) -> str | None:
    return None if isinstance(v, Mapping) else f"must be a mapping, got {type(v).__name__}"


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "name": _check_name,
    "prompt": _check_text,
    "explanation": _check_bool,
    "retries": _int_at_least(0),
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
            raise _fail(f"{path}.{key}", f"unknown key {key!r}; expected one of {list(allowed)}")


def _resolve_adapter(value: Any, adapters: Mapping[str, Any] | None, path: str) -> Any:
    if isinstance(value, str):
        if not adapters or value not in adapters:
            known = sorted(adapters) if adapters else []
            raise _fail(path, f"unknown adapter {value!r}; pass it in from_config(..., adapters={{{value!r}: ...}})"
                        + (f" (known: {known})" if known else ""))
        return adapters[value]
    if callable(getattr(value, "complete", None)):
        return value
    raise _fail(path, f"must name an adapter given in adapters=, got {value!r}")


def _unit(node: Any, path: str, adapters: Mapping[str, Any] | None) -> Unit:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a unit must be a mapping with a 'type', got {type(node).__name__}")
    if "type" not in node:
        raise _fail(f"{path}.type", f"missing; expected one of {list(UNIT_TYPES)}")
    kind = node["type"]
    if kind not in UNIT_TYPES:
        raise _fail(f"{path}.type", f"unknown unit type {kind!r}; expected one of {list(UNIT_TYPES)}")
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
        if kind in ("max-pool", "majority-pool"):
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


def _stage(node: Any, path: str, adapters: Mapping[str, Any] | None) -> Layer:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a stage must be a mapping ('layer:', 'unit:' or a unit with 'type:'), got {node!r}")
    if "layer" in node:
        if len(node) != 1:
            extra = next(k for k in node if k != "layer")
            raise _fail(f"{path}.{extra}", f"unknown key {extra!r} beside 'layer'; put it inside the layer")
        return _layer(node["layer"], f"{path}.layer", adapters)
    if "unit" in node:
        if len(node) != 1:
            extra = next(k for k in node if k != "unit")
            raise _fail(f"{path}.{extra}", f"unknown key {extra!r} beside 'unit'; put it inside the unit")
        return Layer(_unit(node["unit"], f"{path}.unit", adapters), origin=path)
    if "type" in node:
        return Layer(_unit(node, path, adapters), origin=path)
    raise _fail(path, f"a stage needs 'layer', 'unit' or 'type'; got keys {list(node)}")


def _layer(node: Any, path: str, adapters: Mapping[str, Any] | None) -> Layer:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a layer must be a mapping with 'unit' or 'units', got {type(node).__name__}")
    _check_keys(node, _LAYER_KEYS, path)
    if ("unit" in node) == ("units" in node):
        raise _fail(path, "a layer needs exactly one of 'unit' or 'units'")
    if "unit" in node:
        units: list[Unit] = [_unit(node["unit"], f"{path}.unit", adapters)]
    else:
        raw = node["units"]
        if not isinstance(raw, list) or not raw:
            raise _fail(f"{path}.units", "must be a non-empty list of units")
        units = [_unit(u, f"{path}.units[{i}]", adapters) for i, u in enumerate(raw)]
    repeat = node.get("repeat")
    if repeat is not None and (problem := _int_at_least(1)(repeat)):
        raise _fail(f"{path}.repeat", problem)
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
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist; pass a dict or a path to a YAML file")
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: the YAML must be a mapping with a 'pipeline' key, got {type(data).__name__}")
        return data
    raise ConfigError(f"config must be a dict or a path to a YAML file, got {type(config).__name__}")


def from_config(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    adapter: Any = None,
    adapters: Mapping[str, Any] | None = None,
) -> Pipeline:
    """A validated :class:`Pipeline` from a dict or a YAML file path.

    ``adapter`` serves every unit that names none; ``adapters`` maps the names
    units give in ``adapter:`` to adapters. Any mistake is a :class:`ConfigError`
    naming the key.
    """
    data = _load(config)
    _check_keys(data, _TOP_KEYS, "config")
    if "pipeline" not in data:
        raise ConfigError("config.pipeline: missing; list the stages under 'pipeline:'")
    stages = data["pipeline"]
    if not isinstance(stages, list) or not stages:
        raise ConfigError("pipeline: must be a non-empty list of stages")
    threshold = data.get("threshold")
    if threshold is not None and not (_is_num(threshold) and 0.0 <= threshold <= 1.0):
        raise ConfigError(f"threshold: must be a number in 0.0..1.0, got {threshold!r}")
    name = data.get("name", "pipeline")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"name: must be a non-empty string, got {name!r}")
    if adapter is not None and not callable(getattr(adapter, "complete", None)):
        raise ConfigError("adapter must have a complete(prompt, run_config) method")
    layers = [_stage(s, f"pipeline[{i}]", adapters) for i, s in enumerate(stages)]
    return Pipeline(layers, threshold=threshold, adapter=adapter, name=name).validate()
