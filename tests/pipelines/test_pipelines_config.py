"""``from_config`` on arbitrary configs and YAML files raises only ``ConfigError`` (Hypothesis-generated: hostile
values, templates that reach attributes, recursion, huge numbers, undecodable bytes).
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# -- pipeline configs ----------------------------------------------------------------------------------


def _from_config():
    try:
        pipelines = importlib.import_module("llm_connect.pipelines")
    except ImportError:
        return None
    return getattr(pipelines, "from_config", None)


def _unit_types() -> dict[str, tuple[str, ...]]:
    try:
        return dict(importlib.import_module("llm_connect.pipelines").UNIT_TYPES)
    except (ImportError, AttributeError):
        return {"boolean-judge": ("type", "prompt")}


UNIT_TYPES = _unit_types()


def _deep(n: int) -> list:
    top: list = []
    node = top
    for _ in range(n):
        node.append([])
        node = node[0]
    return top


def _self_holding() -> list:
    top: list = []
    top.append(top)
    return top


# built on demand (st.builds), so Hypothesis never has to describe them while drawing
HOSTILE_LEAVES = st.one_of(
    st.builds(_deep, st.just(5_000)),  # deeper than the recursion limit
    st.builds(_self_holding),  # a list that holds itself
    st.builds(lambda: 10**400),  # an integer too large for a float (and past str()'s digit limit)
    st.sampled_from([10**7, 10**9, "x" * 100_000, b"bytes", ("a", "tuple"), frozenset({"a"})]),
)
TEMPLATES = st.sampled_from([
    "{candidate}",
    "Rate {candidate} against {baseline}",
    "{candidate:>100000000}",
    "{candidate:.100000000}",
    "{candidate:" + "9" * 5000 + "}",
    "{candidate:{baseline}}",
    "{candidate:%Y}",
    "{candidate.__class__}",
    "{candidate.__class__.__mro__}",
    "{candidate[0]}",
    "{candidate!a}",
    "{previous.__class__}",
    "{previous.judge[99999999999999999999]}",
    "{previous.score:.2f}",
    "{candidate:>20} {candidate:.5}",
    "{0}",
    "{",
    "}",
])
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 5)
    | st.integers(-(10**30), 10**30)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["yes", "no", "{candidate}", "Rate {candidate} against {baseline}", "chain", "dense", "x"])
    | TEMPLATES
    | HOSTILE_LEAVES,
    lambda c: (
        st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6) | st.sampled_from(["yes", "no"]), c, max_size=4)
    ),
    max_leaves=12,
)


names = st.sampled_from(["j1", "j2", "verify", "pool"]) | st.text(max_size=4)
small_int = st.integers(-1, 5) | st.sampled_from([10, 11, 100, 101, 10**7, 10**9, 10**30])
PLAUSIBLE = {
    "prompt": st.sampled_from(
        ["Is {candidate} right?", "Rate {candidate} vs {baseline}", "Check {previous.explanation}"]
    ) | TEMPLATES,
    "categories": st.sampled_from([["yes", "no"], ["good", "bad", "ugly"], ["a"], []]) | st.lists(st.text(max_size=3)),
    "values": st.sampled_from([{"yes": 1.0, "no": 0.0}, {"good": 1, "bad": 0.5}, {}])
    | st.dictionaries(st.text(max_size=3), st.floats() | st.integers(-2, 2) | st.text(max_size=2), max_size=3),
    "min": small_int,
    "max": small_int,
    "low": st.floats(),
    "high": st.floats(),
    "name": names,
    "explanation": st.booleans(),
    "allow_tie": st.booleans(),
    "retries": small_int,
    "temperature": st.floats(-1, 2),
    "seed": small_int,
    "max_tokens": small_int,
    "top_logprobs": small_int,
    "min_valid": small_int,
    "scoring": st.sampled_from(["verdict", "logprob", "json"]),
    "order": st.sampled_from(["baseline-first", "candidate-first", "both", "random"]),
    "tie_break": st.sampled_from(["lowest", "highest", "first", "coin"]),
    "weights": st.dictionaries(names, st.floats() | st.integers(-1, 3), max_size=3),
    "adapter": st.sampled_from(["x", "y", ""]),
    "repeat": small_int,
    "inner": st.sampled_from(["independent", "chain", "parallel"]),
    "connect": st.sampled_from(["dense", "broadcast", "cumulative", "last", "sparse"]),
}


def value_for(key: str):
    plausible = PLAUSIBLE.get(key)
    return anything if plausible is None else st.one_of(plausible, plausible, plausible, plausible, anything)


@st.composite
def unit_configs(draw):
    kind = draw(st.sampled_from(sorted(UNIT_TYPES))) if draw(st.integers(0, 9)) < 9 else draw(st.text(max_size=9))
    allowed = UNIT_TYPES.get(kind, ("type", "prompt"))[1:]
    keys = draw(st.lists(st.sampled_from(allowed), max_size=6, unique=True))
    if draw(st.integers(0, 3)) < 3:  # usually carry what the type needs
        keys = sorted({*keys, *(k for k in ("prompt", "categories", "weights") if k in allowed)})
    unit = {"type": kind, **{k: draw(value_for(k)) for k in keys}}
    if draw(st.integers(0, 9)) == 9:  # rarely
        unit[draw(st.text(max_size=5))] = draw(anything)  # an unknown key
    return unit


@st.composite
def layer_configs(draw):
    units = draw(st.lists(unit_configs(), min_size=1, max_size=3))
    layer: dict = {"units": units} if len(units) > 1 or draw(st.booleans()) else {"unit": units[0]}
    for key in draw(st.lists(st.sampled_from(["repeat", "inner", "connect"]), max_size=3, unique=True)):
        layer[key] = draw(value_for(key))
    if draw(st.integers(0, 9)) == 9:  # rarely
        layer[draw(st.sampled_from(["unit", "units", "extra"]))] = draw(anything)
    return layer


stage_configs = st.one_of(
    layer_configs().map(lambda layer: {"layer": layer}),
    unit_configs(),
    unit_configs().map(lambda u: {"unit": u}),
    layer_configs().map(lambda layer: {"layer": layer}),
    anything,
)


@st.composite
def pipeline_configs(draw):
    if draw(st.integers(0, 9)) == 9:  # rarely
        return draw(anything)
    config: dict = {"pipeline": draw(st.lists(stage_configs, min_size=1, max_size=4))}
    if draw(st.booleans()):
        config["threshold"] = draw(st.floats(0, 1) | anything)
    if draw(st.booleans()):
        config["name"] = draw(names | anything)
    if draw(st.integers(0, 9)) == 9:  # rarely
        config[draw(st.sampled_from(["version", "pipeline"]))] = draw(anything)
    return config


@pytest.mark.skipif(
    _from_config() is None, reason="llm_connect.pipelines.from_config does not exist yet (pipelines are being written)"
)
@pytest.mark.slow  # 16 s measured on 2 busy cores: out of the fast loop
@given(pipeline_configs())
@settings(max_examples=400, deadline=None)
def test_hypothesis_from_config_on_arbitrary_configs_raises_only_config_errors(config):
    from llm_connect.errors import ConfigError
    from llm_connect.testing import ScriptedAdapter as Scripted

    from_config = _from_config()
    message = "built"
    t = time.perf_counter()
    try:
        pipeline = from_config(config, adapter=Scripted(["yes"]), adapters={"x": Scripted(["no"])})
    except ConfigError as exc:  # the documented error, and nothing else (no TypeError, RecursionError...)
        message = str(exc)
        assert len(message) < 2000  # whatever the config holds, the message stays short
    else:
        assert pipeline.llm_units <= 1000  # MAX_UNITS holds for what was built
    assert message
    assert time.perf_counter() - t < 5  # no config makes loading hang (repeat: 10**7 is refused, not built)


yaml_bytes = st.one_of(
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),  # lone surrogates: not UTF-8
    st.binary(max_size=100).map(lambda b: b.decode("latin-1").encode("utf-8")),
    st.binary(max_size=100),  # raw bytes, mostly not UTF-8
    st.builds(  # a plausible config with a hostile value spliced in
        lambda key, value: f"pipeline:\n  - type: boolean-judge\n    prompt: '{{candidate}}'\n    {key}: {value}\n"
        .encode("utf-8", "surrogatepass"),
        st.sampled_from(["retries", "prompt", "temperature", "seed", "name", "values"]),
        st.sampled_from(["1" * 5000, "10000000000", "2001-13-45", ".inf", "[" * 50 + "]" * 50, "*undefined", "&a [*a]",
                         "!!python/object:os.system x", "'{candidate.__class__}'", "'{candidate:>100000000}'"])
        | st.text(max_size=20),
    ),
)


@pytest.mark.skipif(_from_config() is None, reason="llm_connect.pipelines.from_config does not exist yet")
@given(yaml_bytes)
@settings(max_examples=200, deadline=None)
def test_hypothesis_from_config_on_arbitrary_yaml_files_raises_only_config_errors(content):
    import tempfile

    from llm_connect.errors import ConfigError

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pipeline.yaml"
        path.write_bytes(content)
        message = "built"
        try:
            _from_config()(path)
        except ConfigError as exc:  # not UnicodeDecodeError, RecursionError or a YAML constructor's ValueError
            message = str(exc)
        assert message
