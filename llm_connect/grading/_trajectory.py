"""Trajectory match: did an agent call the tools a reference run called?

:class:`TrajectoryMatchJudge` compares the tool calls of a candidate trajectory (the agent's
messages: assistant messages with tool calls, tool results, the final answer, held in
``LLMResponse.messages``; see :mod:`llm_connect.conversations`) with those of a reference
trajectory (the baseline), in one of four modes, as agentevals' ``create_trajectory_match_evaluator``
does:

- ``strict``: the same messages by role in the same order, each with the same tool calls;
- ``unordered``: the same calls, in any order (equal multisets);
- ``subset``: every call of the candidate is in the reference (it called nothing else);
- ``superset``: every call of the reference is in the candidate (it called at least those).

Two corrections to agentevals:

- Calls are paired by a **maximum bipartite matching** (augmenting paths), not greedily. A greedy
  pairing takes the first compatible reference call and can miss a pairing that exists: with
  ``tool_args="superset"``, the reference ``search(q=1)``, ``search(q=1, n=2)`` against the
  candidate ``search(n=2, q=1)``, ``search(q=1)`` is a match (the candidate's first call must go
  with the reference's second), which a greedy pass that gives it the reference's first call misses.
- ``tool_args`` always compares a candidate call's arguments with those of the reference call it is
  paired with, in every mode: ``exact`` (equal), ``ignore`` (names only), ``subset`` (the
  candidate's arguments are among the reference's: every key it gives has the reference's value),
  ``superset`` (the candidate's arguments include the reference's). agentevals flips the direction
  in its subset and unordered modes.

Arguments are compared as parsed JSON, so key order and whitespace do not matter (``true`` is not
``1``; ``1`` is ``1.0``). Arguments that are not valid JSON make the row *unscored*
(:class:`~llm_connect.errors.JudgeReplyError`) with the reason: such a call cannot be compared. A
plain text reply (``messages=None``) is a trajectory of one assistant message without calls.

Reference: agentevals (LangChain), ``agentevals/trajectory/match.py`` and ``utils.py``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._docstrings import JUDGE_TEXTS, share_parameters
from ..conversations import normalize_messages
from ..core import LLMResponse, RunConfig
from ..errors import JudgeReplyError, ValidationError
from ._base import GradingResult, InlineJudge, validate_grader_id

__all__ = [
    "TOOL_ARGS_MODES",
    "TRAJECTORY_MODES",
    "TrajectoryMatchJudge",
    "arguments_match",
    "maximum_matching",
]

#: The trajectory modes, as agentevals names them.
TRAJECTORY_MODES = ("strict", "unordered", "subset", "superset")
#: How a candidate call's arguments are compared with its paired reference call's.
TOOL_ARGS_MODES = ("exact", "ignore", "subset", "superset")

ArgsMatcher = Callable[[Any, Any], bool]
Override = str | Sequence[str] | ArgsMatcher


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of two parsed JSON values: ``true`` is not ``1`` (as Python would say), ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _within(small: Any, large: Any) -> bool:
    """Every key of ``small`` is in ``large`` with an equal value (two non-objects: equal)."""
    if isinstance(small, Mapping) and isinstance(large, Mapping):
        return all(k in large and _json_equal(v, large[k]) for k, v in small.items())
    return _json_equal(small, large)


_MISSING = object()


def _lookup(value: Any, path: str) -> Any:
    """The value at a dotted path (``"filter.date"``; a number indexes a list), or ``_MISSING``."""
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def arguments_match(mode: str, output: Any, reference: Any) -> bool:
    """Whether a candidate call's parsed arguments match its reference call's under ``mode``.

    Parameters
    ----------
    mode : {"exact", "ignore", "subset", "superset"}
        ``exact``: equal JSON; ``ignore``: always; ``subset``: every key of ``output`` is in
        ``reference`` with the same value; ``superset``: every key of ``reference`` is in ``output``
        with the same value (top-level keys; two arguments that are not objects must be equal).
    output, reference : Any
        Parsed JSON arguments.

    Returns
    -------
    bool
    """
    if mode == "ignore":
        return True
    if mode == "exact":
        return _json_equal(output, reference)
    if mode == "subset":
        return _within(output, reference)
    if mode == "superset":
        return _within(reference, output)
    raise ValidationError(f"unknown tool_args mode {mode!r}; choose from {', '.join(TOOL_ARGS_MODES)}")


def maximum_matching(n_left: int, n_right: int, edges: Callable[[int, int], bool]) -> list[int | None]:
    """A maximum matching of a bipartite graph, by augmenting paths (Kuhn's algorithm, breadth first).

    Parameters
    ----------
    n_left, n_right : int
        The sizes of the two sides.
    edges : callable
        ``edges(i, j)``: whether left ``i`` may be paired with right ``j``.

    Returns
    -------
    list
        For each left vertex, the right vertex it is paired with, or None. The number of pairs is
        the largest possible; among maximum matchings the result is deterministic.
    """
    adjacent = [[j for j in range(n_right) if edges(i, j)] for i in range(n_left)]
    left: list[int | None] = [None] * n_left
    right: list[int | None] = [None] * n_right
    for start in range(n_left):
        reached_from: dict[int, int] = {}  # right vertex -> the left vertex whose edge reached it
        queue, visited = deque([start]), {start}
        free: int | None = None
        while queue and free is None:
            i = queue.popleft()
            for j in adjacent[i]:
                if j in reached_from:
                    continue
                reached_from[j] = i
                owner = right[j]
                if owner is None:
                    free = j
                    break
                if owner not in visited:
                    visited.add(owner)
                    queue.append(owner)
        step = free
        while step is not None:  # flip the alternating path back to ``start``
            i = reached_from[step]
            previous = left[i]
            left[i], right[step] = step, i
            step = None if i == start else previous
    return left


@dataclass(frozen=True)
class _Call:
    message: int  # index of its message in the trajectory
    index: int  # index of the call in its message
    id: str | None
    name: str
    arguments: Any  # parsed JSON

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id, "message": self.message}


def _calls(messages: Sequence[Mapping[str, Any]], side: str) -> list[list[_Call]]:
    """Each message's tool calls with parsed arguments; arguments that are not JSON -> JudgeReplyError."""
    out = []
    for m, message in enumerate(messages):
        calls = []
        for c, call in enumerate(message.get("tool_calls") or ()):
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError as exc:
                    shown = arguments if len(arguments) <= 80 else arguments[:77] + "..."
                    raise JudgeReplyError(
                        f"the {side}'s call {name} (message {m}, call {c}) has arguments that are not JSON "
                        f"({exc.msg}): {shown!r}; its calls cannot be compared", reply=arguments) from None
            calls.append(_Call(m, c, call.get("id"), name, arguments))
        out.append(calls)
    return out


def _trajectory(response: LLMResponse, side: str) -> list[dict[str, Any]]:
    if response.messages is None:
        return [{"role": "assistant", "content": response.content}]
    return normalize_messages(list(response.messages), where=f"the {side}'s trajectory")


class TrajectoryMatchJudge(InlineJudge):
    """1.0 when the candidate's tool calls match the reference's under ``mode``, else 0.0.

    Parameters
    ----------
    mode : {"strict", "unordered", "subset", "superset"}
        ``strict``: the same messages by role in the same order, each with the same tool calls
        (paired within the message); ``unordered``: the same calls in any order; ``subset``: every
        candidate call is in the reference; ``superset``: every reference call is in the candidate.
        Message contents are not compared (judge the final answer with another judge).
    tool_args : {"exact", "ignore", "subset", "superset"}
        How a candidate call's arguments are compared with its paired reference call's (the same
        direction in every mode): equal, not compared, the candidate's ⊆ the reference's, the
        candidate's ⊇ the reference's.
    tool_args_overrides : mapping, optional
        Per tool name: a ``tool_args`` mode; a list of argument keys (dotted paths such as
        ``"filter.date"``) that must be equal, the others ignored; or a callable
        ``f(candidate_args, reference_args) -> bool`` on the parsed arguments.
    grader_id : str, optional
        Default ``"trajectory-<mode>"``.

    Raises
    ------
    ValidationError
        An unknown mode or ``tool_args``, or a malformed override.

    Notes
    -----
    Calls are paired by a maximum bipartite matching, so a valid pairing is never missed. The
    result's ``details`` hold ``matched`` (``{"candidate": call, "reference": call}`` pairs),
    ``missing`` (reference calls without a partner), ``extra`` (candidate calls without one), each
    call as ``{"name", "arguments", "id", "message"}``, and ``reason`` when it is no match.
    Arguments that are not JSON raise :class:`~llm_connect.errors.JudgeReplyError` (an *unscored*
    row in a batch). A reply without ``messages`` is one assistant message without calls.

    Examples
    --------
    >>> from llm_connect import RunConfig, TrajectoryMatchJudge
    >>> from llm_connect.conversations import as_response
    >>> call = {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
    ...         "function": {"name": "search", "arguments": '{"q": "paris", "n": 2}'}}]}
    >>> ref = as_response([call, {"role": "tool", "tool_call_id": "1", "content": "..."},
    ...                    {"role": "assistant", "content": "Rain."}])
    >>> out = as_response([{"role": "assistant", "tool_calls": [{"id": "9", "type": "function",
    ...         "function": {"name": "search", "arguments": {"q": "paris"}}}]}])
    >>> judge = TrajectoryMatchJudge("subset", tool_args="subset")
    >>> judge.judge(ref, out, prompt="", run_config=RunConfig()).quality_score
    1.0
    """

    def __init__(self, mode: str = "strict", *, tool_args: str = "exact",
                 tool_args_overrides: Mapping[str, Override] | None = None, grader_id: str | None = None) -> None:
        if mode not in TRAJECTORY_MODES:
            raise ValidationError(f"unknown trajectory mode {mode!r}; choose from {', '.join(TRAJECTORY_MODES)}")
        if tool_args not in TOOL_ARGS_MODES:
            raise ValidationError(f"unknown tool_args {tool_args!r}; choose from {', '.join(TOOL_ARGS_MODES)}")
        self.mode = mode
        self.tool_args = tool_args
        self.tool_args_overrides = dict(tool_args_overrides or {})
        self._matchers = {name: self._matcher(name, o) for name, o in self.tool_args_overrides.items()}
        self.grader_id = validate_grader_id(grader_id if grader_id is not None else f"trajectory-{mode}")

    @staticmethod
    def _matcher(name: str, override: Override) -> ArgsMatcher:
        if isinstance(override, str):
            if override not in TOOL_ARGS_MODES:
                raise ValidationError(f"tool_args_overrides[{name!r}] = {override!r} is not a tool_args mode "
                                      f"({', '.join(TOOL_ARGS_MODES)}); for a single key give a list: [{override!r}]")
            return lambda out, ref: arguments_match(override, out, ref)
        if callable(override):
            return lambda out, ref: bool(override(out, ref))
        if isinstance(override, Sequence) and all(isinstance(k, str) and k for k in override):
            keys = tuple(override)

            def on_keys(out: Any, ref: Any) -> bool:
                for key in keys:
                    a, b = _lookup(out, key), _lookup(ref, key)
                    if (a is _MISSING) != (b is _MISSING) or (a is not _MISSING and not _json_equal(a, b)):
                        return False
                return True

            return on_keys
        raise ValidationError(f"tool_args_overrides[{name!r}] must be a tool_args mode, a list of argument keys or a "
                              f"callable(candidate_args, reference_args) -> bool; got {type(override).__name__}")

    def __repr__(self) -> str:
        extra = f", tool_args_overrides={self.tool_args_overrides!r}" if self.tool_args_overrides else ""
        return f"TrajectoryMatchJudge({self.mode!r}, tool_args={self.tool_args!r}{extra})"

    def _compatible(self, out: _Call, ref: _Call) -> bool:
        if out.name != ref.name:
            return False
        matcher = self._matchers.get(out.name)
        if matcher is None:
            return arguments_match(self.tool_args, out.arguments, ref.arguments)
        return matcher(out.arguments, ref.arguments)

    def _pair(self, outs: list[_Call], refs: list[_Call]) -> tuple[list[tuple[_Call, _Call]], list[_Call], list[_Call]]:
        """(matched pairs, missing reference calls, extra candidate calls) of a maximum matching."""
        pairs = maximum_matching(len(outs), len(refs), lambda i, j: self._compatible(outs[i], refs[j]))
        matched = [(outs[i], refs[j]) for i, j in enumerate(pairs) if j is not None]
        used = {j for j in pairs if j is not None}
        missing = [r for j, r in enumerate(refs) if j not in used]
        extra = [o for i, o in enumerate(outs) if pairs[i] is None]
        return matched, missing, extra

    def compare(self, reference: Sequence[Mapping[str, Any]], output: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The comparison of two normalized trajectories.

        Parameters
        ----------
        reference : sequence of mapping
            The reference's messages (normalized OpenAI chat messages).
        output : sequence of mapping
            The candidate's.

        Returns
        -------
        dict
            ``match`` (bool), ``matched``, ``missing``, ``extra``, ``reason`` (None on a match).

        Raises
        ------
        JudgeReplyError
            A call's arguments are not JSON.
        """
        ref_calls, out_calls = _calls(reference, "reference"), _calls(output, "candidate")
        matched: list[tuple[_Call, _Call]] = []
        missing: list[_Call] = []
        extra: list[_Call] = []
        reason: str | None = None
        if self.mode == "strict":
            for k in range(max(len(reference), len(output))):
                outs = out_calls[k] if k < len(output) else []
                refs = ref_calls[k] if k < len(reference) else []
                m, mi, ex = self._pair(outs, refs)
                matched += m
                missing += mi
                extra += ex
                if reason is None and k < len(reference) and k < len(output) \
                        and output[k]["role"] != reference[k]["role"]:
                    reason = (f"message {k} is the candidate's {output[k]['role']} message where the reference has "
                              f"a {reference[k]['role']} message")
                elif reason is None and (mi or ex) and k < min(len(reference), len(output)):
                    reason = f"message {k} does not have the reference's tool calls"
            if reason is None and len(reference) != len(output):
                reason = f"the candidate has {len(output)} messages, the reference {len(reference)}"
        else:
            every_out, every_ref = [c for cs in out_calls for c in cs], [c for cs in ref_calls for c in cs]
            matched, missing, extra = self._pair(every_out, every_ref)
            if self.mode == "unordered" and (missing or extra):
                reason = "the candidate's calls are not the reference's"
            elif self.mode == "subset" and extra:
                reason = "the candidate made calls that are not in the reference"
            elif self.mode == "superset" and missing:
                reason = "the candidate missed calls of the reference"
        return {
            "match": reason is None,
            "matched": [{"candidate": o.describe(), "reference": r.describe()} for o, r in matched],
            "missing": [c.describe() for c in missing],
            "extra": [c.describe() for c in extra],
            "reason": reason,
        }

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """Compare ``candidate``'s trajectory with ``baseline``'s (the reference); see the class.

        Parameters
        ----------
        baseline : LLMResponse
            The reference trajectory (a list of messages, or a text holding them).
        candidate : LLMResponse
            The candidate's trajectory.
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            1.0 on a match, else 0.0, with ``details`` (see the class).

        Raises
        ------
        JudgeReplyError
            A call's arguments are not JSON (an ``unscored`` row in a batch).
        """
        result = self.compare(_trajectory(baseline, "reference"), _trajectory(candidate, "candidate"))

        def names(calls: list[dict[str, Any]]) -> str:
            return ", ".join(c["name"] for c in calls)

        if result["match"]:
            notes = f"match ({self.mode}): {len(result['matched'])} call(s) paired"
        else:
            notes = f"no match ({self.mode}): {result['reason']}"
            if result["missing"]:
                notes += f"; missing: {names(result['missing'])}"
            if result["extra"]:
                notes += f"; extra: {names(result['extra'])}"
        return GradingResult(
            quality_score=1.0 if result["match"] else 0.0,
            notes=notes,
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
            details={"mode": self.mode, "tool_args": self.tool_args, **result},
        )
