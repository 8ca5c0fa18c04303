"""The tests' one set of builders and Hypothesis strategies for quality observations and ledger lines.

Import with ``from strategies import ...``: ``tests/`` has no ``__init__.py``,
so pytest's default ("prepend") import mode puts this directory on
``sys.path`` before it imports ``conftest.py`` and the test modules. Never
``from conftest import ...``: ``conftest.py`` holds fixtures only.

Builders
--------
- :data:`T0`: the fixed instant the builders' observations are recorded at.
- :func:`make_observation`: one valid observation with fixed defaults.
- :func:`nth_observation`: the ``i``-th of a series whose numbers, time and
  tags all change with ``i`` (to see that columns line up).
- :func:`line_of`: an observation's ledger line (``json.dumps`` of ``to_dict()``).
- :func:`reference_parse` / :func:`reference_read`: what the contract says a
  line (a file) holds, line by line through ``from_dict(json.loads(line))``;
  every reader of a ledger is checked against them.

Strategies
----------
Two families, named for their purpose:

- *valid* values, for round trips: :data:`ids`, :data:`json_values` (and the
  :data:`json_scalars` they are built of), :data:`nested_tags`,
  :func:`flat_tags` (one scalar per key, as a ``tag.<key>`` column holds) and
  :func:`observations` (any valid :class:`QualityObservation`, wide numbers,
  any time zone);
- *fuzzing* values, for "never raises, and every reader agrees":
  :data:`near_valid_records` (a valid record with fields replaced by anything
  or dropped) and :data:`ledger_lines` (anything one line of a ledger file may
  hold: valid, near-valid, torn, blank or garbage bytes; never a newline).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from llm_connect.quality import MAX_LINE_BYTES, QualityObservation

__all__ = [
    "FIELDS",
    "T0",
    "flat_tags",
    "ids",
    "json_scalars",
    "json_values",
    "ledger_lines",
    "line_of",
    "lone_surrogates",
    "make_observation",
    "near_valid_records",
    "nested_tags",
    "nth_observation",
    "observations",
    "reference_parse",
    "reference_read",
]

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

# -- builders ------------------------------------------------------------------------------------


def make_observation(**overrides: Any) -> QualityObservation:
    """A valid QualityObservation with fixed defaults (recorded at :data:`T0`); ``overrides`` replace fields."""
    fields: dict[str, Any] = {
        "task_type": "qa",
        "adapter_id": "openai:gpt-4o-mini",
        "model_id": "gpt-4o-mini",
        "cost_usd": 0.001,
        "quality_score": 0.75,
        "latency_ms": 120.0,
        "tokens_in": 100,
        "tokens_out": 20,
        "recorded_at": T0,
    }
    fields.update(overrides)
    return QualityObservation(**fields)


def nth_observation(i: int = 0, **overrides: Any) -> QualityObservation:
    """The ``i``-th of a series: cost, score, latency, tokens, time and tags (``run``, ``item_id``) vary with ``i``."""
    fields: dict[str, Any] = {
        "cost_usd": 0.001 * i,
        "quality_score": (i % 11) / 10,
        "latency_ms": 12.5 + i,
        "tokens_in": 10 + i,
        "tokens_out": 3 * i,
        "recorded_at": T0 + timedelta(seconds=i, microseconds=7 * i),
        "tags": {"run": f"r{i % 3}", "item_id": i},
    }
    fields.update(overrides)
    return make_observation(**fields)


#: The keys of a ledger line, in the order ``to_dict()`` writes them.
FIELDS = tuple(make_observation().to_dict())


def line_of(o: QualityObservation, *, compact: bool = True, ensure_ascii: bool = False, **changes: Any) -> bytes:
    """``o``'s ledger line: ``json.dumps(o.to_dict())`` with ``changes`` applied to the dict, UTF-8.

    ``compact`` (the default) writes as the ledger does (``","`` and ``":"``,
    no spaces); ``compact=False`` as ``json.dumps`` does by default.
    """
    data = o.to_dict()
    data.update(changes)
    separators = (",", ":") if compact else None
    return json.dumps(data, separators=separators, ensure_ascii=ensure_ascii).encode("utf-8")


def reference_parse(line: bytes) -> QualityObservation | None:
    """What the contract says a line holds: ``from_dict(json.loads(line))``, or ``None`` (malformed)."""
    try:
        return QualityObservation.from_dict(json.loads(line))
    except (ValueError, TypeError, RecursionError, OverflowError):
        return None


def reference_read(data: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> tuple[list[QualityObservation], int]:
    """What the contract says a file holds, split on ``b"\\n"``: its observations, and how many lines are
    malformed (blank lines are neither; a line over ``max_line_bytes``, newline not counted, is malformed)."""
    found: list[QualityObservation] = []
    bad = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        o = reference_parse(line) if len(line) <= max_line_bytes else None
        if o is None:
            bad += 1
        else:
            found.append(o)
    return found, bad


# -- valid values, for round trips --------------------------------------------------------------

#: Non-blank text (Hypothesis' default alphabet has no lone surrogates).
ids = st.text(min_size=1, max_size=20).filter(str.strip)
#: Any JSON scalar: null, booleans, integers beyond 64 bits, finite floats, text.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
#: Any JSON value: scalars, lists and objects nested a few levels.
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
#: Tags as an observation may hold them: any JSON values under any keys.
nested_tags = st.dictionaries(st.text(max_size=8), json_values, max_size=4)


def flat_tags(*, nulls: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Tags of one scalar per non-empty key (what a ``tag.<key>`` column holds); ``nulls``: values may be null."""
    values = json_scalars if nulls else json_scalars.filter(lambda v: v is not None)
    return st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=4)


_amounts = st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False) | st.integers(0, 10**20)


def observations(*, tags: st.SearchStrategy[dict[str, Any]] = nested_tags) -> st.SearchStrategy[QualityObservation]:
    """Any valid observation: amounts up to 1e300 (floats or ints), token counts up to 10**30, a score in 0..1
    (or the ints 0 and 1), naive or aware ``recorded_at`` in any time zone, and ``tags`` (default: nested)."""
    return st.builds(
        QualityObservation,
        task_type=ids,
        adapter_id=ids,
        model_id=ids,
        cost_usd=_amounts,
        quality_score=st.floats(min_value=0, max_value=1) | st.sampled_from([0, 1]),
        latency_ms=_amounts,
        tokens_in=st.integers(0, 10**30),
        tokens_out=st.integers(0, 10**30),
        baseline_adapter_id=st.none() | ids,
        recorded_at=st.datetimes(
            min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.none() | st.timezones()
        ),
        tags=tags,
    )


# -- fuzzing values: anything a ledger line may hold ---------------------------------------------

#: One lone surrogate (U+D800..U+DFFF): not valid Unicode, refused in any text of an observation.
lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)

_odd_stamps = st.sampled_from(
    [
        "",
        " ",
        "yesterday",
        "2025-01-01",
        "2025-01-01T00:00:00Z",
        "20250101T000000",
        "2025-13-01T00:00:00+00:00",
        "2025-01-01T25:00:00+00:00",
        "0001-01-01T00:00:00+01:00",  # no UTC datetime
        "9999-12-31T23:59:59-01:00",  # no UTC datetime
    ]
)
_iso_stamps = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59), timezones=st.none() | st.timezones()
).map(datetime.isoformat)
_field_values = json_values | st.integers(-(10**400), 10**400) | st.floats() | _iso_stamps | _odd_stamps

#: A valid observation's dict with up to 4 fields (or a new key) replaced by anything and up to 2 dropped.
near_valid_records = st.builds(
    lambda record, changes, drops: {**{k: v for k, v in record.items() if k not in drops}, **changes},
    observations(tags=flat_tags(nulls=True)).map(QualityObservation.to_dict),
    st.dictionaries(st.sampled_from([*FIELDS, "future_field"]), _field_values, max_size=4),
    st.sets(st.sampled_from([*FIELDS, "future_field"]), max_size=2),
)


@st.composite
def _torn_lines(draw: st.DrawFn) -> bytes:
    """A valid line cut anywhere (a writer killed mid-line), maybe followed by a few stray bytes."""
    raw = line_of(draw(observations()), ensure_ascii=True)
    return raw[: draw(st.integers(0, len(raw)))] + draw(st.binary(max_size=4))


#: One line of a ledger file (never a newline): valid, near-valid, torn mid-way, blank, or garbage.
ledger_lines = st.one_of(
    observations(tags=flat_tags(nulls=True)).map(line_of),
    near_valid_records.map(lambda d: json.dumps(d).encode()),
    _torn_lines(),
    st.sampled_from([b"", b"  ", b"\t", b"\r"]),
    st.binary(max_size=60),
    st.text(max_size=60).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"\xff\xfe{", b'{"task_type": "qa"', b"[" * 5000, b"NaN", b"\xef\xbb\xbf{}", b"1e999"]),
).map(lambda line: line.replace(b"\n", b" "))


# -- a scripted LLM judge for CLI tests (served by llm_connect.testing.LoopbackServer) ----------------


def paris_judge(refusal: str = "Sorry, I cannot grade that.") -> Callable[[str], str]:
    """A judge's replies for ``LoopbackServer(reply=...)``: a verdict of 1.0 when the candidate (the
    rubric's text after "Candidate answer:") says 'Paris', else 0.0; ``refusal`` for items about 'refuse'."""

    def reply(prompt: str) -> str:
        if "refuse" in prompt:
            return refusal
        candidate = prompt.split("Candidate answer:", 1)[1]
        return json.dumps({"notes": "ok", "quality_score": 1.0 if "Paris" in candidate else 0.0})

    return reply


# -- scripted LLM judges whose token probabilities are known (selective judging) -----------------------------

SCRIPTED_ITEM = re.compile(r"item-(\d+)")


def selective_items(n, seed=0):
    """Items ``item-i`` with a known P(yes) per item and a human label drawn from it (a calibrated judge)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    p_yes = rng.uniform(size=n)
    human = rng.uniform(size=n) < p_yes
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "prompt": [f"question {i}?" for i in range(n)],
                         "baseline": ["the reference"] * n, "candidate": [f"answer item-{i}" for i in range(n)],
                         "human": np.where(human, "yes", "no"), "p_yes": p_yes})


def calibrated_p_yes(labels, *, low, seed, sure=0.0):
    """P(yes) of a calibrated judge of ``labels``: sure to a degree u ~ U(low, 1) (a share ``sure`` of the items
    at u ~ U(0.995, 1)), and right with probability u."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=bool)
    u = np.where(rng.uniform(size=y.size) < sure, rng.uniform(0.995, 1.0, size=y.size),
                 rng.uniform(low, 1.0, size=y.size))
    verdict = np.where(rng.uniform(size=y.size) < u, y, ~y)
    return np.where(verdict, u, 1 - u)


def yes_no_adapter(p_yes, cost=0.001):
    """A scripted adapter answering "yes"/"no" for ``item-i`` with P(yes) = ``p_yes[i]`` in its logprobs."""
    import math

    from llm_connect import LLMResponse, TokenLogprob
    from llm_connect.testing import ScriptedAdapter

    def reply(prompt, run_config):
        p = float(p_yes[int(SCRIPTED_ITEM.search(prompt).group(1))])
        p = min(max(p, 1e-6), 1 - 1e-6)
        token = "yes" if p >= 0.5 else "no"
        top = (("yes", math.log(p)), ("no", math.log(1 - p)))
        return LLMResponse(content=token, adapter_id="s", model_id="m",
                           logprobs=(TokenLogprob(token, dict(top)[token], top),))

    return ScriptedAdapter(reply, adapter_id="scripted:judge", model_id="judge-model", cost_per_call=cost)


def yes_no_judge(p_yes, grader_id="llm-judge", cost=0.001):
    """An ``LLMJudge(scoring="yes-no")`` on :func:`yes_no_adapter`."""
    from llm_connect import LLMJudge

    return LLMJudge(yes_no_adapter(p_yes, cost), grader_id=grader_id, scoring="yes-no")


def support_conversations(count: int, turns: int) -> list[dict]:
    """``count`` short support conversations (``conversation_id`` ``c0``, ``c1``, ...) of ``turns`` user/assistant
    turns each after a policy, seeded, with text of several bytes a character (``café``, ``日本``, ``🙂``)."""
    import random

    rng = random.Random(5)
    words = ["the", "parcel", "ships", "in", "two", "days", "refunds", "reach", "the", "card", "within", "a", "week",
             "returns", "need", "the", "receipt", "café", "naïve", "日本", "🙂"]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)) + "."

    chats = []
    for c in range(count):
        messages = [{"role": "system", "content": "Policy: " + text(40)}]
        for t in range(turns):
            messages += [{"role": "user", "content": f"Question {t}: " + text(12)},
                         {"role": "assistant", "content": text(30)}]
        chats.append({"conversation_id": f"c{c}", "messages": messages})
    return chats


def judge_calls_per_turn(count: int, turns: int) -> dict[tuple[str, int], tuple[str, Any]]:
    """The calls (prompt, run config) the local judge makes judging every turn of
    :func:`support_conversations`, by ``(conversation_id, turn)``, recorded by a scripted in-process adapter: each
    prompt marks its stable part, the judge's instructions and the transcript so far, with
    ``RunConfig.stable_prefix_chars``."""
    from llm_connect import LLMJudge, LLMResponse, RunConfig, TokenLogprob
    from llm_connect.conversations import per_turn
    from llm_connect.testing import ScriptedAdapter

    verdict = LLMResponse("yes", "s", "s", logprobs=(TokenLogprob("yes", -0.1, (("yes", -0.1), ("no", -2.4))),))
    recorder = ScriptedAdapter(lambda prompt, config: verdict, is_local=True)
    judge = LLMJudge(recorder, seed=0)
    items = per_turn(support_conversations(count, turns)).to_dict("records")
    for item in items:
        judge.with_item(messages=item["messages"]).judge(
            LLMResponse("A short reply that follows the policy.", "b", "ref"), LLMResponse(item["candidate"], "c", "c"),
            prompt=item["prompt"], run_config=RunConfig())
    calls = {(item["conversation_id"], item["turn"]): (call.prompt, call.run_config)
             for item, call in zip(items, recorder.calls, strict=True)}
    assert all(config.stable_breaks for _, config in calls.values())
    return calls
