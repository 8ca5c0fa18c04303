"""TrajectoryMatchJudge: the four modes x four tool_args against a brute-force reading of their definitions,
the maximum matching (the greedy counterexample), arguments as parsed JSON, unscored non-JSON arguments,
overrides, details, and the judge through judge_many and the command line."""

from __future__ import annotations

import copy
import itertools
import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_connect import JudgeReplyError, LLMResponse, RunConfig, TrajectoryMatchJudge, ValidationError, judge_many
from llm_connect.cli import main
from llm_connect.conversations import as_response
from llm_connect.grading import TOOL_ARGS_MODES, TRAJECTORY_MODES
from llm_connect.grading._trajectory import maximum_matching

RC = RunConfig()


def call(name, arguments, call_id="c"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*calls, content=""):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(call_id="c", content="result"):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def run(judge, reference, output):
    return judge.judge(as_response(reference, adapter_id="baseline"), as_response(output), prompt="p", run_config=RC)


# -- an independent reading of the definitions: every assignment tried -------------------------------------


def ref_args_ok(mode, out, ref):
    """The four tool_args modes on parsed arguments, written from their definitions (canonical JSON text)."""
    text = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
    if mode == "ignore":
        return True
    if mode == "exact":
        return text(out) == text(ref)
    small, large = (out, ref) if mode == "subset" else (ref, out)
    return all(k in large and text(v) == text(large[k]) for k, v in small.items())


def flat_calls(messages):
    """(name, parsed args) of every call, in order."""
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            args = c["function"]["arguments"]
            out.append((c["function"]["name"], json.loads(args) if isinstance(args, str) else args))
    return out


def ok(mode, o, r):
    return o[0] == r[0] and ref_args_ok(mode, o[1], r[1])


def injects(small, large, good):
    """Some one-to-one map of every element of ``small`` to an element of ``large`` with good(s, l)."""
    return any(all(good(small[i], large[p[i]]) for i in range(len(small)))
               for p in itertools.permutations(range(len(large)), len(small)))


def brute_force(mode, tool_args, reference, output):
    if mode == "strict":
        if len(reference) != len(output):
            return False
        for r, o in zip(reference, output, strict=True):
            if r["role"] != o["role"]:
                return False
            rc, oc = flat_calls([r]), flat_calls([o])
            if len(rc) != len(oc) or not injects(oc, rc, lambda x, y: ok(tool_args, x, y)):
                return False
        return True
    rc, oc = flat_calls(reference), flat_calls(output)
    if mode == "unordered":
        return len(rc) == len(oc) and injects(oc, rc, lambda x, y: ok(tool_args, x, y))
    if mode == "subset":  # every output call is in the reference
        return injects(oc, rc, lambda x, y: ok(tool_args, x, y))
    return injects(rc, oc, lambda x, y: ok(tool_args, y, x))  # superset: every reference call in the output


def brute_max_pairs(tool_args, reference, output):
    """The largest number of (output, reference) pairs of compatible calls, over every assignment."""
    rc, oc = flat_calls(reference), flat_calls(output)
    size = max(len(rc), len(oc))
    best = 0
    for p in itertools.permutations(range(size)):
        best = max(best, sum(1 for i in range(len(oc)) if p[i] < len(rc) and ok(tool_args, oc[i], rc[p[i]])))
    return best


# -- small trajectories -------------------------------------------------------------------------------

NAMES = st.sampled_from(["search", "fetch"])
ARGS = st.dictionaries(st.sampled_from(["q", "n", "lang"]), st.sampled_from([0, 1, "x", True]), max_size=3)


@st.composite
def arguments(draw, args):
    """``args`` as a JSON string with its keys in a drawn order and drawn spacing, or as an object."""
    if draw(st.booleans()):
        return copy.deepcopy(args)
    keys = draw(st.permutations(list(args)))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    return json.dumps({k: args[k] for k in keys}, separators=sep)


@st.composite
def trajectories(draw, max_calls=4):
    messages, budget, n = [], max_calls, 0
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, min(2, budget)))
        budget -= k
        calls = []
        for _ in range(k):
            calls.append(call(draw(NAMES), draw(arguments(draw(ARGS))), f"c{n}"))
            n += 1
        messages.append(assistant(*calls))
        for c in calls:
            messages.append(tool(c["id"]))
    if draw(st.booleans()):
        messages.append(assistant(content="done"))
    return messages


@st.composite
def trajectory_pairs(draw):
    reference = draw(trajectories())
    if draw(st.integers(0, 3)) == 0:
        return reference, draw(trajectories())
    output = copy.deepcopy(reference)
    for _ in range(draw(st.integers(0, 2))):
        with_calls = [m for m in output if m.get("tool_calls")]
        kind = draw(st.sampled_from(["shuffle", "drop", "add", "args", "key", "swap"]))
        if kind == "add" or not with_calls:
            output.insert(draw(st.integers(0, len(output))),
                          assistant(call(draw(NAMES), draw(arguments(draw(ARGS))), "new")))
            continue
        message = draw(st.sampled_from(with_calls))
        calls = message["tool_calls"]
        if kind == "shuffle":
            message["tool_calls"] = draw(st.permutations(calls))
        elif kind == "drop":
            calls.pop(draw(st.integers(0, len(calls) - 1)))
            if not calls:
                del message["tool_calls"]
        elif kind in ("args", "key"):
            c = draw(st.sampled_from(calls))
            args = c["function"]["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            if kind == "args" or not args:
                args = draw(ARGS)
            else:
                del args[draw(st.sampled_from(sorted(args)))]
            c["function"]["arguments"] = draw(arguments(args))
        else:  # swap two messages
            i, j = draw(st.integers(0, len(output) - 1)), draw(st.integers(0, len(output) - 1))
            output[i], output[j] = output[j], output[i]
    return reference, output


@settings(max_examples=300, deadline=None, derandomize=True)
@given(trajectory_pairs())
def test_every_mode_and_tool_args_agree_with_brute_force(pair):
    reference, output = pair
    most = {t: brute_max_pairs(t, reference, output) for t in TOOL_ARGS_MODES}
    for mode, tool_args in itertools.product(TRAJECTORY_MODES, TOOL_ARGS_MODES):
        result = run(TrajectoryMatchJudge(mode, tool_args=tool_args), reference, output)
        expected = brute_force(mode, tool_args, reference, output)
        assert result.quality_score == (1.0 if expected else 0.0), (mode, tool_args, result.notes)
        details = result.details
        assert len(details["matched"]) + len(details["missing"]) == len(flat_calls(reference))
        assert len(details["matched"]) + len(details["extra"]) == len(flat_calls(output))
        if mode != "strict":  # the pairs are a maximum matching
            assert len(details["matched"]) == most[tool_args]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 5), st.integers(0, 5), st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4))))
def test_maximum_matching_is_maximum_and_valid(n_left, n_right, edges):
    pairs = maximum_matching(n_left, n_right, lambda i, j: (i, j) in edges)
    used = [j for j in pairs if j is not None]
    assert len(used) == len(set(used))
    assert all((i, j) in edges for i, j in enumerate(pairs) if j is not None)
    best = 0
    size = max(n_left, n_right)
    for p in itertools.permutations(range(size)):
        best = max(best, sum(1 for i in range(n_left) if p[i] < n_right and (i, p[i]) in edges))
    assert len(used) == best


# -- the two corrections to agentevals ----------------------------------------------------------------


def test_the_greedy_counterexample_is_a_match():
    """Reference search(q=1), search(q=1, n=2); candidate search(n=2, q=1), search(q=1); tool_args="superset": the
    candidate's first call must go with the reference's second. Pairing greedily gives it the first and fails."""
    reference = [assistant(call("search", '{"q": 1}', "r1"), call("search", '{"q": 1, "n": 2}', "r2"))]
    output = [assistant(call("search", '{"n": 2, "q": 1}', "o1"), call("search", '{"q": 1}', "o2"))]
    for mode in TRAJECTORY_MODES:
        result = run(TrajectoryMatchJudge(mode, tool_args="superset"), reference, output)
        assert result.quality_score == 1.0, (mode, result.notes)
        pairs = {(p["candidate"]["id"], p["reference"]["id"]) for p in result.details["matched"]}
        assert pairs == {("o1", "r2"), ("o2", "r1")}
    # split over messages, the unordered modes still find it
    reference = [assistant(call("search", '{"q": 1}', "r1")), assistant(call("search", '{"q": 1, "n": 2}', "r2"))]
    output = [assistant(call("search", '{"n": 2, "q": 1}', "o1")), assistant(call("search", '{"q": 1}', "o2"))]
    for mode in ("unordered", "subset", "superset"):
        assert run(TrajectoryMatchJudge(mode, tool_args="superset"), reference, output).quality_score == 1.0
    assert run(TrajectoryMatchJudge("strict", tool_args="superset"), reference, output).quality_score == 0.0


@pytest.mark.parametrize("mode", TRAJECTORY_MODES)
def test_tool_args_direction_is_the_same_in_every_mode(mode):
    """tool_args="subset" means the candidate's arguments are among its reference call's, in every mode (agentevals
    compares the other way round in its subset and unordered modes)."""
    reference = [assistant(call("search", {"q": 1, "n": 2}))]
    fewer = [assistant(call("search", {"q": 1}))]
    assert run(TrajectoryMatchJudge(mode, tool_args="subset"), reference, fewer).quality_score == 1.0
    assert run(TrajectoryMatchJudge(mode, tool_args="superset"), reference, fewer).quality_score == 0.0
    more = [assistant(call("search", {"q": 1, "n": 2, "lang": "en"}))]
    assert run(TrajectoryMatchJudge(mode, tool_args="superset"), reference, more).quality_score == 1.0
    assert run(TrajectoryMatchJudge(mode, tool_args="subset"), reference, more).quality_score == 0.0


# -- arguments ----------------------------------------------------------------------------------------------


def test_arguments_are_compared_as_parsed_json():
    reference = [assistant(call("search", '{"q": "paris", "n": 2, "f": {"a": 1, "b": [1, 2]}}'))]
    same = [assistant(call("search", '{"f":{"b":[1,2],"a":1},"n":2.0,"q":"paris"}'))]
    as_object = [assistant(call("search", {"n": 2, "f": {"b": [1, 2], "a": 1}, "q": "paris"}))]
    judge = TrajectoryMatchJudge("strict")
    assert run(judge, reference, same).quality_score == 1.0
    assert run(judge, reference, as_object).quality_score == 1.0
    # JSON's true is not its 1, and list order counts
    assert run(judge, [assistant(call("f", '{"x": true}'))], [assistant(call("f", '{"x": 1}'))]).quality_score == 0.0
    assert run(judge, [assistant(call("f", '{"x": [1, 2]}'))], [assistant(call("f", '{"x": [2, 1]}'))]).quality_score \
        == 0.0


@pytest.mark.parametrize("side", ["candidate", "reference"])
@pytest.mark.parametrize("tool_args", TOOL_ARGS_MODES)
def test_arguments_that_are_not_json_make_the_row_unscored(side, tool_args):
    good = [assistant(call("search", '{"q": 1}'))]
    bad = [assistant(call("search", '{"q": 1'))]
    reference, output = (good, bad) if side == "candidate" else (bad, good)
    with pytest.raises(JudgeReplyError, match=rf"the {side}'s call search .* not JSON"):
        run(TrajectoryMatchJudge("unordered", tool_args=tool_args), reference, output)
    frame = judge_many(TrajectoryMatchJudge("unordered", tool_args=tool_args),
                       [{"prompt": "p", "baseline": reference, "candidate": output},
                        {"prompt": "p", "baseline": good, "candidate": good}], progress=False)
    assert frame["status"].tolist() == ["unscored", "scored"]
    assert "not JSON" in frame["error"][0] and pd.isna(frame["quality_score"][0])
    assert frame["quality_score"][1] == 1.0


# -- overrides ----------------------------------------------------------------------------------------------


def test_overrides_a_mode_per_tool_name():
    reference = [assistant(call("search", {"q": "a", "n": 1}, "1"), call("log", {"msg": "x"}, "2"))]
    output = [assistant(call("search", {"q": "b"}, "1"), call("log", {"msg": "x"}, "2"))]
    assert run(TrajectoryMatchJudge("unordered"), reference, output).quality_score == 0.0
    judge = TrajectoryMatchJudge("unordered", tool_args_overrides={"search": "ignore"})
    assert run(judge, reference, output).quality_score == 1.0
    # the override is for its tool only: log's arguments are still compared exactly
    changed = [assistant(call("search", {"q": "b"}, "1"), call("log", {"msg": "y"}, "2"))]
    assert run(judge, reference, changed).quality_score == 0.0


def test_overrides_a_list_of_dotted_keys():
    reference = [assistant(call("book", {"trip": {"date": "2025-01-02", "seat": "12A"}, "note": "hi"}))]
    output = [assistant(call("book", {"trip": {"date": "2025-01-02", "seat": "3C"}, "note": "hello"}))]
    judge = TrajectoryMatchJudge("strict", tool_args_overrides={"book": ["trip.date"]})
    assert run(judge, reference, output).quality_score == 1.0
    other_date = [assistant(call("book", {"trip": {"date": "2025-01-03"}}))]
    assert run(judge, reference, other_date).quality_score == 0.0
    no_date = [assistant(call("book", {"trip": {}}))]  # a key one side lacks is not equal to a value
    assert run(judge, reference, no_date).quality_score == 0.0
    indexed = TrajectoryMatchJudge("strict", tool_args_overrides={"book": ["legs.0"]})
    assert run(indexed, [assistant(call("book", {"legs": ["LHR", "JFK"]}))],
               [assistant(call("book", {"legs": ["LHR", "SFO"]}))]).quality_score == 1.0


def test_overrides_a_callable_on_the_parsed_arguments():
    seen = []

    def same_query(out, ref):
        seen.append((out, ref))
        return out["q"].lower() == ref["q"].lower()

    judge = TrajectoryMatchJudge("superset", tool_args_overrides={"search": same_query})
    reference = [assistant(call("search", '{"q": "Paris"}'))]
    assert run(judge, reference, [assistant(call("search", '{"q": "PARIS", "n": 3}'))]).quality_score == 1.0
    assert seen == [({"q": "PARIS", "n": 3}, {"q": "Paris"})]  # (candidate, reference), parsed
    assert run(judge, reference, [assistant(call("search", '{"q": "Lyon"}'))]).quality_score == 0.0


def test_bad_modes_and_overrides_are_refused():
    with pytest.raises(ValidationError, match="unknown trajectory mode 'loose'"):
        TrajectoryMatchJudge("loose")
    with pytest.raises(ValidationError, match="unknown tool_args 'fuzzy'"):
        TrajectoryMatchJudge("strict", tool_args="fuzzy")
    with pytest.raises(ValidationError, match=r"for a single key give a list: \['q'\]"):
        TrajectoryMatchJudge("strict", tool_args_overrides={"search": "q"})
    with pytest.raises(ValidationError, match="a tool_args mode, a list of argument keys or a callable"):
        TrajectoryMatchJudge("strict", tool_args_overrides={"search": 3})


# -- details, ids, responses ---------------------------------------------------------------------------


def test_details_list_matched_missing_and_extra_calls():
    reference = [assistant(call("search", {"q": 1}, "r1"), call("fetch", {"url": "u"}, "r2")), tool("r1"), tool("r2"),
                 assistant(content="answer")]
    output = [assistant(call("search", {"q": 1}, "o1"), call("delete", {"all": True}, "o2")), tool("o1"), tool("o2"),
              assistant(content="answer")]
    result = run(TrajectoryMatchJudge("superset"), reference, output)
    assert result.quality_score == 0.0
    details = result.details
    assert [(p["candidate"]["name"], p["reference"]["name"]) for p in details["matched"]] == [("search", "search")]
    assert details["missing"] == [{"name": "fetch", "arguments": {"url": "u"}, "id": "r2", "message": 0}]
    assert details["extra"] == [{"name": "delete", "arguments": {"all": True}, "id": "o2", "message": 0}]
    assert "missing: fetch" in result.notes and "extra: delete" in result.notes
    assert details["mode"] == "superset" and details["tool_args"] == "exact"
    subset = run(TrajectoryMatchJudge("subset"), reference, output)
    assert subset.quality_score == 0.0 and "calls that are not in the reference" in subset.notes


def test_strict_compares_roles_in_order_and_calls_per_message():
    reference = [assistant(call("a", {}, "1")), tool("1"), assistant(call("b", {}, "2")), tool("2"),
                 assistant(content="x")]
    judge = TrajectoryMatchJudge("strict")
    assert run(judge, reference, copy.deepcopy(reference)).quality_score == 1.0
    # the same calls in another order of messages: unordered says yes, strict no
    swapped = [reference[2], reference[3], reference[0], reference[1], reference[4]]
    assert run(TrajectoryMatchJudge("unordered"), reference, swapped).quality_score == 1.0
    result = run(judge, reference, swapped)
    assert result.quality_score == 0.0 and "message 0" in result.notes
    # contents are not compared; a missing final answer is a missing message
    assert run(judge, reference, [*reference[:-1], assistant(content="other")]).quality_score == 1.0
    shorter = run(judge, reference, reference[:-1])
    assert shorter.quality_score == 0.0 and "the candidate has 4 messages, the reference 5" in shorter.notes


def test_grader_ids_scores_and_both_responses_are_kept():
    for mode in TRAJECTORY_MODES:
        assert TrajectoryMatchJudge(mode).grader_id == f"trajectory-{mode}"
    assert TrajectoryMatchJudge("subset", grader_id="tools").grader_id == "tools"
    baseline = as_response([assistant(call("a", {}))], adapter_id="baseline")
    candidate = as_response([assistant(call("a", {})), tool(), assistant(content="Paris")], model_id="m")
    result = TrajectoryMatchJudge("superset").judge(baseline, candidate, prompt="p", run_config=RC)
    assert result.baseline_response is baseline and result.candidate_response is candidate
    assert candidate.content == "Paris" and candidate.messages[0]["tool_calls"][0]["function"]["name"] == "a"
    assert 0.0 <= result.quality_score <= 1.0
    # a plain text reply is one assistant message without calls
    text = LLMResponse(content="no tools needed", adapter_id="x", model_id="y")
    assert TrajectoryMatchJudge("strict").judge(text, text, prompt="p", run_config=RC).quality_score == 1.0
    assert TrajectoryMatchJudge("superset").judge(baseline, text, prompt="p", run_config=RC).quality_score == 0.0


def test_llm_response_holds_a_trajectory():
    messages = [assistant(call("a", {})), tool(), assistant(content="done")]
    response = LLMResponse(content="done", adapter_id="a", model_id="m", messages=messages)
    assert isinstance(response.messages, tuple) and len(response.messages) == 3
    assert hash(response) == hash(LLMResponse(content="done", adapter_id="a", model_id="m", messages=messages))
    assert response != LLMResponse(content="done", adapter_id="a", model_id="m")
    with pytest.raises(ValidationError, match=r"messages\[1\] must be a chat message"):
        LLMResponse(content="", adapter_id="a", model_id="m", messages=[{"role": "user"}, "hi"])
    with pytest.raises(ValidationError, match="must be a sequence of chat messages"):
        LLMResponse(content="", adapter_id="a", model_id="m", messages="hi")


def test_a_malformed_trajectory_is_an_error_naming_the_message():
    judge = TrajectoryMatchJudge("strict")
    bad = LLMResponse(content="", adapter_id="a", model_id="m", messages=[{"role": "robot", "content": "x"}])
    ok_response = as_response([assistant(content="x")])
    with pytest.raises(ValidationError, match="the candidate's trajectory: message 0: has the unknown role 'robot'"):
        judge.judge(ok_response, bad, prompt="p", run_config=RC)


# -- through judge_many and the command line ----------------------------------------------------------------


def agent_items():
    reference = [assistant(call("weather", '{"city": "Paris"}', "r")), tool("r", "rain"), assistant(content="Rain.")]
    good = [assistant(call("weather", '{"city":"Paris"}', "o")), tool("o", "rain"), assistant(content="It rains.")]
    wrong = [assistant(call("weather", '{"city": "Lyon"}', "o")), tool("o", "sun"), assistant(content="Sun.")]
    return [
        {"id": "a", "prompt": "Weather in Paris?", "baseline": reference, "candidate": good, "candidate_model": "m1"},
        {"id": "b", "prompt": "Weather in Paris?", "baseline": reference, "candidate": wrong, "candidate_model": "m2"},
        {"id": "c", "prompt": "Weather in Paris?", "baseline": reference, "candidate": "Rain, I think."},
    ]


def test_judge_many_takes_trajectories_from_item_columns():
    frame = judge_many(TrajectoryMatchJudge("strict"), agent_items(), progress=False)
    assert frame["status"].tolist() == ["scored"] * 3
    assert frame["quality_score"].tolist() == [1.0, 0.0, 0.0]


def test_the_cli_takes_the_trajectory_grader_ids(tmp_path, capsys):
    data = tmp_path / "runs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in agent_items()))
    ledger = tmp_path / "ledger.jsonl"
    for grader_id in ("trajectory-strict", "trajectory-unordered", "trajectory-subset", "trajectory-superset"):
        assert main(["grade", str(data), "--judge", grader_id, "--ledger", str(ledger), "--task-type", "agent",
                     "--no-progress"]) == 0
        assert f"{grader_id}: 3 rows, 3 scored" in capsys.readouterr().out
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    strict = [r for r in records if r["tags"]["grader_id"] == "trajectory-strict"]
    assert [(r["tags"]["item_id"], r["quality_score"]) for r in strict] == [("a", 1.0), ("b", 0.0), ("c", 0.0)]
    from llm_connect.cli._judges import judges_option

    assert judges_option("trajectory-subset,exact") == "trajectory-subset,exact"
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(data), "--judge", "trajectory-strikt", "--ledger", str(ledger), "--task-type", "agent"])
    assert exc.value.code == 2 and "did you mean trajectory-strict?" in capsys.readouterr().err
