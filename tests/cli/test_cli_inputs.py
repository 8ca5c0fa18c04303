"""``llm-connect calibrate`` on files as they come, and big runs that restart; the ``contains`` and
``token-f1`` judges.

- The lexical judges are checked against the official SQuAD v1.1 evaluation script's
  ``normalize_answer`` / ``f1_score`` / ``metric_max_over_ground_truths``, re-typed here from
  Rajpurkar et al. (2016) (https://rajpurkar.github.io/SQuAD-explorer/, evaluate-v1.1.py).
- Wide files, ``--columns``, ``--where``, ``--limit`` and ``--sample`` run on small files written here.
- The response cache and ``--resume`` are checked by counting the requests that reach a real
  OpenAI-compatible server on 127.0.0.1 (:class:`~llm_connect.testing.LoopbackServer`); the
  interrupted run is a real ``llm-connect`` process stopped with SIGINT in the middle.
"""

from __future__ import annotations

import json
import os
import re
import signal
import string
import subprocess
import time
from collections import Counter

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from interruptible import python_argv
from strategies import paris_judge

from llm_connect import ContainsJudge, TokenF1Judge
from llm_connect.adapters import ResponseCache
from llm_connect.cli import main
from llm_connect.core import LLMResponse, RunConfig
from llm_connect.testing import LoopbackServer

CHAT = "/v1/chat/completions"

# -- the official SQuAD v1.1 evaluation script's metric, as published ---------------------------------


def squad_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction, ground_truth):
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def _judge(judge, baseline, candidate):
    return judge.judge(LLMResponse(baseline, "a", "m"), LLMResponse(candidate, "a", "m"), prompt="q",
                       run_config=RunConfig())


F1_CASES = [
    ("Paris", "Paris"),
    ("It is Paris, France.", "Paris"),
    ("The Eiffel Tower", "eiffel tower in paris"),
    ("the the cat cat cat", "a cat sat on the cat"),  # repeated tokens count as a multiset
    ("Denver Broncos", "Carolina Panthers"),  # nothing shared
    ("", "Paris"),  # an empty answer
    ("The", "an"),  # both normalise to nothing: 0 in v1.1
    ("1,000 people!", "1000 people"),  # punctuation inside a number is dropped
    ("Saint-Étienne (France)", "saintétienne"),
]


@pytest.mark.parametrize(("prediction", "truth"), F1_CASES)
def test_token_f1_is_squad_v1_1_f1(prediction, truth):
    result = _judge(TokenF1Judge(), truth, prediction)
    assert result.quality_score == pytest.approx(squad_f1_score(prediction, truth), abs=1e-12)
    assert result.grader_id == "token-f1" and result.notes.startswith("token F1 ")


def test_token_f1_takes_the_best_reference_as_squad_does():
    truths = ["Denver Broncos", "the Broncos", "Broncos of Denver, Colorado"]
    judge = TokenF1Judge(reference_sep="|")
    for prediction in ["Broncos", "The Denver Broncos won", "Colorado", "Carolina"]:
        expected = squad_metric_max_over_ground_truths(squad_f1_score, prediction, truths)
        assert _judge(judge, "|".join(truths), prediction).quality_score == pytest.approx(expected, abs=1e-12)
    assert expected == 0  # "Carolina": no reference shares a token


def test_token_f1_other_normalizers():
    assert _judge(TokenF1Judge(normalizer=None), "Paris", "paris").quality_score == 0.0  # as is: case counts
    assert _judge(TokenF1Judge(normalizer="lower"), "Paris", "paris").quality_score == 1.0
    assert _judge(TokenF1Judge(normalizer=str.upper), "a b", "A c").quality_score == pytest.approx(0.5)


def test_contains_any_reference_whole_words():
    judge = ContainsJudge(reference_sep="|")
    assert judge.grader_id == "contains" and judge.normalizer == "squad"
    assert _judge(judge, "Paris|paris, france", "I am sure: it is PARIS.").quality_score == 1.0
    assert _judge(judge, "Rome", "The capital is Milan").quality_score == 0.0
    assert _judge(judge, "William Shakespeare|Shakespeare", "shakespeare, of course").quality_score == 1.0
    assert _judge(judge, "1", "In 1990").quality_score == 0.0  # "1" is part of a longer word
    assert _judge(ContainsJudge(whole_words=False), "1", "In 1990").quality_score == 1.0  # plain substring
    assert _judge(judge, "no", "not at all").quality_score == 0.0
    assert _judge(judge, "The Beatles", "the beatles!").quality_score == 1.0  # articles and punctuation dropped
    assert _judge(judge, "The", "Paris").quality_score == 0.0  # a reference that normalises to nothing
    assert _judge(judge, "The", "a").quality_score == 1.0  # ... matches only an answer that does too
    assert _judge(ContainsJudge(normalizer=None), "Paris", "paris").quality_score == 0.0
    assert _judge(judge, "Paris", "Paris").notes == "contains a reference"


def test_lexical_judges_are_exported_and_validate_their_arguments():
    import llm_connect
    import llm_connect.grading as grading

    assert {"ContainsJudge", "TokenF1Judge"} <= set(llm_connect.__all__) & set(grading.__all__)
    with pytest.raises(ValueError):
        ContainsJudge(normalizer="fancy")
    with pytest.raises(ValueError):
        TokenF1Judge(grader_id=" ")


# -- the judges in the command line -----------------------------------------------------------------

ROWS = [
    {"id": "a", "prompt": "Capital of France?", "baseline": "Paris|paris, france", "candidate": "It is Paris.",
     "human": "yes"},
    {"id": "b", "prompt": "Capital of France?", "baseline": "Paris|paris, france", "candidate": "Lyon", "human": "no"},
    {"id": "c", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Rome, Italy", "human": "yes"},
    {"id": "d", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Milan", "human": "no"},
    {"id": "e", "prompt": "Capital of Spain?", "baseline": "Madrid", "candidate": "madrid", "human": "yes"},
    {"id": "f", "prompt": "Capital of Spain?", "baseline": "Madrid", "candidate": "Barcelona, not Madrid",
     "human": "no"},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(argv):
    return main([*argv, "--n-boot", "0", "--no-progress"])


@pytest.mark.slow  # 7 s measured on 2 busy cores: out of the fast loop
def test_contains_and_token_f1_in_calibrate(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ROWS)
    out = tmp_path / "o"
    assert run(["calibrate", str(data), "--out", str(out), "--judges", "exact,contains,token-f1",
                "--reference-sep", "|", "--probes", "none", "--require", "contains:kappa>=0.3"]) == 0
    scores = pd.read_csv(out / "scores.csv")
    assert scores["score_contains"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    truths = [r["baseline"].split("|") for r in ROWS]
    expected = [squad_metric_max_over_ground_truths(squad_f1_score, r["candidate"], t) for r, t in zip(ROWS, truths,
                                                                                                        strict=True)]
    assert scores["score_token-f1"].tolist() == pytest.approx(expected, abs=1e-12)
    assert scores["score_exact-match"].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # no normalisation by default
    pairs = pd.read_csv(out / "agreement.csv")[["judge_a", "judge_b"]].values.tolist()
    assert ["contains", "human"] in pairs and ["token-f1", "human"] in pairs
    assert "all 1 requirement(s) hold" in capsys.readouterr().out
    # --normalize applies to the lexical judges too when given: none compares as is
    assert run(["calibrate", str(data), "--out", str(tmp_path / "n"), "--judges", "contains", "--normalize", "none",
                "--reference-sep", "|", "--probes", "none"]) == 0
    assert pd.read_csv(tmp_path / "n" / "scores.csv")["score_contains"].tolist() == [1.0, 0, 1, 0, 0, 1]


def test_help_documents_the_new_options(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = capsys.readouterr().out
    for word in ("contains", "token-f1", "--columns", "--wide", "{model}", "--where", "--limit", "--sample",
                 "--no-cache", "--resume", "OUT/cache"):
        assert word in text, word


# -- wide files, --columns, --where, --limit, --sample ----------------------------------------------

WIDE_CSV = """\
qid,question,golden_answer,answer_gpt4,answer_llama,label_gpt4,label_llama,improper,topic
q1,Capital of France?,Paris,It is Paris.,Lyon,True,False,False,geo
q2,Capital of Italy?,Rome|Roma,Rome,The capital is Roma,True,True,False,geo
q3,Largest planet?,Jupiter,Saturn,Jupiter,False,True,True,space
q4,Author of Hamlet?,Shakespeare,William Shakespeare,Marlowe,True,False,False,books
"""
WIDE_ARGS = ["--columns", "prompt=question,baseline=golden_answer,id=qid",
             "--wide", "candidate=answer_{model},human=label_{model}", "--reference-sep", "|"]


def test_a_wide_file_becomes_one_row_per_model(tmp_path, capsys):
    data = tmp_path / "wide.csv"
    data.write_text(WIDE_CSV, encoding="utf-8")
    out = tmp_path / "o"
    assert run(["calibrate", str(data), "--out", str(out), "--judges", "contains", *WIDE_ARGS,
                "--probes", "none"]) == 0
    scores = pd.read_csv(out / "scores.csv", keep_default_na=False)
    assert scores["id"].tolist() == ["q1:gpt4", "q1:llama", "q2:gpt4", "q2:llama", "q3:gpt4", "q3:llama",
                                     "q4:gpt4", "q4:llama"]
    assert scores["candidate_model"].tolist() == ["gpt4", "llama"] * 4
    assert scores["candidate"].tolist()[:4] == ["It is Paris.", "Lyon", "Rome", "The capital is Roma"]
    assert scores["prompt"].tolist()[6] == "Author of Hamlet?" and scores["baseline"].tolist()[2] == "Rome|Roma"
    assert scores["score_human"].tolist() == [1, 0, 1, 1, 0, 1, 1, 0]  # each model's own label
    assert scores["source_id"].tolist() == ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"]
    assert scores["topic"].tolist()[:3] == ["geo", "geo", "geo"]  # other columns travel with each model's row
    assert not any(c.startswith(("answer_", "label_")) for c in scores.columns)
    assert scores["score_contains"].tolist() == [1, 0, 1, 1, 0, 1, 1, 0]
    printed = capsys.readouterr().out
    assert "rows: used 8 of 8 (--wide: the file's 4 rows x 2 models)" in printed


@pytest.mark.slow  # 22 s measured on 2 busy cores: out of the fast loop
def test_where_limit_and_sample_pick_rows_in_input_order(tmp_path, capsys):
    data = tmp_path / "wide.csv"
    data.write_text(WIDE_CSV, encoding="utf-8")

    def ids(*extra):
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        assert run(["calibrate", str(data), "--out", str(out), "--judges", "exact", *WIDE_ARGS, "--probes", "none",
                    *extra]) == 0
        return pd.read_csv(out / "scores.csv")["id"].tolist()

    # CSV cells that all read true/false are compared as booleans
    assert ids("--where", "improper == False") == ["q1:gpt4", "q1:llama", "q2:gpt4", "q2:llama", "q4:gpt4",
                                                   "q4:llama"]
    assert "rows: used 6 of 8 (--wide: the file's 4 rows x 2 models; --where: 6 rows match)" in capsys.readouterr().out
    assert ids("--where", "candidate_model == 'llama' and topic != `topic`.str.upper()") == [
        "q1:llama", "q2:llama", "q3:llama", "q4:llama"]
    assert ids("--where", "improper == False", "--limit", "3") == ["q1:gpt4", "q1:llama", "q2:gpt4"]
    assert "--limit 3: the first 3" in capsys.readouterr().out
    sampled = ids("--sample", "5", "--seed", "7")
    order = ["q1:gpt4", "q1:llama", "q2:gpt4", "q2:llama", "q3:gpt4", "q3:llama", "q4:gpt4", "q4:llama"]
    assert len(sampled) == 5 == len(set(sampled)) and sampled == [i for i in order if i in sampled]
    assert "rows: used 5 of 8" in capsys.readouterr().out
    assert ids("--sample", "5", "--seed", "7") == sampled  # seeded
    others = {tuple(ids("--sample", "5", "--seed", str(s))) for s in (1, 2, 3)}
    assert others - {tuple(sampled)}  # another seed, another sample
    assert ids("--sample", "50") == order  # more than there are: all of them
    # a plain (long) JSONL file: --limit alone, the numeric column of JSON compared as it is
    rows = [{**r, "n": k} for k, r in enumerate(ROWS)]
    jsonl = write_jsonl(tmp_path / "items.jsonl", rows)
    assert run(["calibrate", str(jsonl), "--out", str(tmp_path / "j"), "--judges", "exact", "--probes", "none",
                "--where", "n >= 2", "--limit", "2"]) == 0
    assert pd.read_csv(tmp_path / "j" / "scores.csv")["id"].tolist() == ["c", "d"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--columns", "prompt=query"], "no column 'query' in the file; it has qid, question"),
        (["--columns", "prompt"], "is not NAME=VALUE"),
        (["--columns", "prompt=question,prompt=golden_answer"], "more than once"),
        (["--columns", "topic=improper"], "already has a column 'topic'"),
        (["--wide", "candidate=answer_"], "must hold {model} once"),
        (["--wide", "human=label_{model}"], "needs a candidate pattern"),
        (["--wide", "candidate=reply_{model}"], "no column matches"),
        (["--wide", "candidate=answer_{model},human=rating_{model}"], "no column 'rating_gpt4', 'rating_llama'"),
        (["--wide", "candidate=answer_{model},topic=label_{model}"], "which the file already has"),
        (["--where", "nosuch == 1"], "could not be evaluated"),
        (["--where", "topic.__class__"], "'@' and '__' are not allowed"),
        (["--where", "@x == 1"], "'@' and '__' are not allowed"),
        (["--where", "topic"], "is not a true/false condition"),
        (["--where", "improper == 'maybe'"], "matches no row"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--limit", "ten"], "--limit must be a whole number"),
        (["--limit", "2", "--sample", "2"], "not both"),
    ],
)
def test_input_mistakes_exit_2_with_one_line(tmp_path, capsys, extra, message):
    data = tmp_path / "wide.csv"
    data.write_text(WIDE_CSV, encoding="utf-8")
    base = [] if any(e in ("--columns", "--wide") for e in extra) else WIDE_ARGS
    if "--wide" in extra and "--columns" not in extra:
        base = ["--columns", "prompt=question,baseline=golden_answer,id=qid"]
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", *base, *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llm-connect calibrate: error:") and message in err[0], err
    assert not (tmp_path / "o").exists()  # refused before --out is made


def test_where_error_names_the_columns(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ROWS)
    with pytest.raises(SystemExit):
        main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--where", "score > 1"])
    assert "the columns are id, prompt, baseline, candidate, human" in capsys.readouterr().err


# -- the response cache and --resume ---------------------------------------------------------------


@pytest.fixture
def judge_server():
    with LoopbackServer(reply=paris_judge()) as server:
        yield server


def chats(server):
    return server.stats()["by_path"].get(CHAT, 0)


PARIS_ROWS = [
    {"id": f"r{k}", "prompt": f"Capital of France? ({k})", "baseline": "Paris",
     "candidate": "Paris" if k % 3 else f"Lyon {k}", "human": "yes" if k % 3 else "no"}
    for k in range(8)
]


def llm_args(server, data, out, *extra):
    return ["calibrate", str(data), "--out", str(out), "--judges", "exact,llm", "--llm", "openai:judge-1",
            "--base-url", server.base_url, *extra]


@pytest.mark.slow  # 8 s measured on 2 busy cores: out of the fast loop
def test_a_repeated_run_makes_no_request(tmp_path, judge_server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789")
    data = write_jsonl(tmp_path / "items.jsonl", PARIS_ROWS)
    out = tmp_path / "o"
    assert run(llm_args(judge_server, data, out, "--probes", "length")) == 0
    first = chats(judge_server)
    assert first > len(PARIS_ROWS)  # every row, and the length probe's padded answers
    assert f"response cache: 0 replies reused, {first} requested" in capsys.readouterr().out
    scores = pd.read_csv(out / "scores.csv")
    assert run(llm_args(judge_server, data, out, "--probes", "length")) == 0
    assert chats(judge_server) == first  # the second run paid for nothing
    assert f"response cache: {first} replies reused, 0 requested" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(out / "scores.csv"), scores)
    assert len(ResponseCache(out / "cache")) == first
    for path in out.rglob("*"):  # replies only: the key never reaches a file
        assert not path.is_file() or b"sk-test-secret" not in path.read_bytes(), path
    # --no-cache: every reply asked for again, and no cache made
    assert run(llm_args(judge_server, data, tmp_path / "n", "--probes", "none", "--no-cache")) == 0
    assert chats(judge_server) == first + len(PARIS_ROWS)
    assert not (tmp_path / "n" / "cache").exists() and (tmp_path / "n" / "run.json").is_file()


@pytest.mark.slow  # 5 s measured on 2 busy cores: out of the fast loop
def test_resume_after_limit_requests_only_the_remaining_rows(tmp_path, judge_server, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", PARIS_ROWS)
    out = tmp_path / "o"
    assert run(llm_args(judge_server, data, out, "--probes", "none", "--limit", "3")) == 0
    assert chats(judge_server) == 3 and len(pd.read_csv(out / "scores.csv")) == 3
    assert json.loads((out / "run.json").read_text())["rows_used"] == 3
    capsys.readouterr()
    assert run(llm_args(judge_server, data, out, "--probes", "none", "--resume")) == 0
    assert chats(judge_server) == len(PARIS_ROWS)  # only the five rows not judged before
    assert "response cache: 3 replies reused, 5 requested" in capsys.readouterr().out
    scores = pd.read_csv(out / "scores.csv")
    assert scores["id"].tolist() == [r["id"] for r in PARIS_ROWS]
    assert scores["status_llm-judge"].eq("scored").all()
    assert scores["score_llm-judge"].tolist() == [0.0 if k % 3 == 0 else 1.0 for k in range(8)]


def test_resume_refuses_what_it_cannot_continue(tmp_path, judge_server, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", PARIS_ROWS)
    other = write_jsonl(tmp_path / "other.jsonl", PARIS_ROWS[:4])
    out = tmp_path / "o"
    for argv, message in [
        (llm_args(judge_server, data, out, "--resume"), "holds no calibrate run to continue"),
        (llm_args(judge_server, data, out, "--resume", "--no-cache"), "drop --no-cache"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert run(llm_args(judge_server, data, out, "--probes", "none", "--limit", "2")) == 0
    with pytest.raises(SystemExit) as exc:
        main(llm_args(judge_server, other, out, "--resume"))
    assert exc.value.code == 2 and "is not the file the run" in capsys.readouterr().err
    assert chats(judge_server) == 2


@pytest.mark.slow  # 15 s measured on 2 busy cores: out of the fast loop
def test_an_interrupted_run_resumes_without_paying_twice(tmp_path):
    """A real ``llm-connect calibrate`` process, stopped with SIGINT after a few replies, then resumed."""
    rows = PARIS_ROWS * 2
    rows = [{**r, "id": f"{r['id']}-{k}", "prompt": f"{r['prompt']} #{k}"} for k, r in enumerate(rows)]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    out = tmp_path / "o"
    with LoopbackServer(reply=paris_judge(), latency_s=0.2) as server:
        argv = [*llm_args(server, data, out, "--probes", "none", "--concurrency", "1"), "--n-boot", "0",
                "--no-progress"]
        env = {**os.environ, "LLM_CONNECT_DEBUG": ""}
        # python_argv: the child takes Ctrl-C even when this runner ignores SIGINT (nohup)
        proc = subprocess.Popen(python_argv("-m", "llm_connect.cli", *argv), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while chats(server) < 4 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:  # not stopped by the signal: stop it harder, same outcome
                proc.kill()
                proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        before = chats(server)
        cache = ResponseCache(out / "cache")
        kept = len(cache)
        cache.close()
        assert 4 <= before < len(rows) and 3 <= kept <= before  # stopped midway; what came back was kept
        # the stopped run wrote what it had: the rows it did not finish are error rows, never dropped
        partial = pd.read_csv(out / "scores.csv")
        assert len(partial) == len(rows) and partial["status_llm-judge"].eq("error").sum() >= len(rows) - before
        assert partial["notes_llm-judge"].str.startswith("interrupted").any()
        assert main([*argv, "--resume"]) == 0
        assert chats(server) - before == len(rows) - kept  # only what the cache did not hold
    scores = pd.read_csv(out / "scores.csv")
    assert scores["id"].tolist() == [r["id"] for r in rows] and scores["status_llm-judge"].eq("scored").all()


@pytest.mark.slow  # 13 s measured on 2 busy cores: out of the fast loop
def test_an_endpoints_embeddings_are_cached_text_by_text(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789")
    data = write_jsonl(tmp_path / "items.jsonl", PARIS_ROWS)
    out = tmp_path / "o"
    texts = {r["baseline"] for r in PARIS_ROWS} | {r["candidate"] for r in PARIS_ROWS}
    with LoopbackServer() as server:
        argv = ["calibrate", str(data), "--out", str(out), "--judges", "exact,embedding", "--embedder",
                "openai:emb-1", "--base-url", server.base_url, "--probes", "none", "--n-boot", "0", "--no-progress"]

        def embedded() -> list[str]:
            return [t for r in server.requests if r.path.endswith("/embeddings") for t in r.body["input"]]

        assert run([*argv, "--limit", "4"]) == 0
        first = embedded()
        assert set(first) == {r["baseline"] for r in PARIS_ROWS[:4]} | {r["candidate"] for r in PARIS_ROWS[:4]}
        scores4 = pd.read_csv(out / "scores.csv")
        assert run(argv) == 0  # all eight rows: only the texts not embedded before are requested
        second = embedded()[len(first):]
        assert sorted(second) == sorted(texts - set(first))
        assert run(argv) == 0
        assert embedded()[len(first) + len(second):] == []  # a repeated run pays nothing
        assert run([*argv, "--no-cache"]) == 0
        assert sorted(embedded()[len(first) + len(second):]) == sorted(texts)  # --no-cache asks again
    scores = pd.read_csv(out / "scores.csv")
    assert scores["status_embedding-similarity"].eq("scored").all()
    pd.testing.assert_series_equal(scores["score_embedding-similarity"].iloc[:4],
                                   scores4["score_embedding-similarity"])
    for path in out.rglob("*"):
        assert not path.is_file() or b"sk-test-secret" not in path.read_bytes(), path


# -- mistakes get the command line's own fix ----------------------------------------------------------

LABELLED = [{"prompt": f"Capital of France? ({k})", "baseline": "Paris", "candidate": "Paris" if k % 2 else "Lyon",
             "label": bool(k % 2)} for k in range(6)]


def calibrate_exact(data, out, *extra):
    return run(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--probes", "none", *extra])


def test_a_label_column_is_named_not_ignored(tmp_path, capsys):
    data = tmp_path / "labelled.csv"
    pd.DataFrame(LABELLED).to_csv(data, index=False)
    assert calibrate_exact(data, tmp_path / "o") == 0
    err = capsys.readouterr().err
    assert "no human label column found" in err and "--human label" in err
    assert calibrate_exact(data, tmp_path / "o2", "--human", "label") == 0
    assert "no human label column" not in capsys.readouterr().err


def test_wrong_column_names_suggest_columns(tmp_path, capsys):
    data = tmp_path / "q.csv"
    pd.DataFrame([{"question": "q", "golden_answer": "a", "response": "a"}]).to_csv(data, index=False)
    with pytest.raises(SystemExit) as exc:
        calibrate_exact(data, tmp_path / "o")
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--columns prompt=question,baseline=golden_answer,candidate=response" in err and "df.rename" not in err


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_semicolon_or_tab_separated_csv_is_sniffed(tmp_path, capsys, sep):
    data = tmp_path / "items.csv"
    pd.DataFrame(LABELLED).to_csv(data, index=False, sep=sep)
    assert calibrate_exact(data, tmp_path / "o", "--human", "label") == 0
    assert pd.read_csv(tmp_path / "o" / "scores.csv")["score_exact-match"].tolist() == [0, 1, 0, 1, 0, 1]


def test_an_unsniffable_separator_names_sep(tmp_path, capsys):
    data = tmp_path / "items.csv"
    data.write_text("prompt;baseline;candidate\n\"a, b\";\"c, d\";\"e, f\"\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        calibrate_exact(data, tmp_path / "o", "--sep", ",")
    assert "--sep ';'" in capsys.readouterr().err
    assert calibrate_exact(data, tmp_path / "o", "--sep", ";") == 0


def test_judges_take_grader_ids_and_say_did_you_mean(tmp_path, capsys):
    data = tmp_path / "items.csv"
    pd.DataFrame(LABELLED).to_csv(data, index=False)
    assert run(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact-match,token-f1",
                "--probes", "none", "--human", "label"]) == 0
    assert "score_exact-match" in pd.read_csv(tmp_path / "o" / "scores.csv").columns
    with pytest.raises(SystemExit) as exc:
        run(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact,tokenf1"])
    assert exc.value.code == 2
    assert "did you mean token-f1?" in capsys.readouterr().err


def test_a_full_chat_completions_url_is_normalised_before_the_first_request(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = write_jsonl(tmp_path / "items.jsonl", PARIS_ROWS[:3])
    with LoopbackServer(reply=paris_judge()) as server:
        base = server.base_url.rstrip("/")
        url = base + "/chat/completions"
        assert main(["grade", str(data), "--judge", "llm-judge", "--llm", "openai:judge-1", "--base-url", url,
                     "--ledger", str(tmp_path / "l.jsonl"), "--task-type", "qa", "--no-progress"]) == 0
        stats = server.stats()
    assert stats["by_path"] == {CHAT: 3}  # one request a row, each to the right path
    err = capsys.readouterr().err
    assert "names an endpoint" in err and f"using {base} " in err
