"""Adapters, embedders and judges by name (``llm_connect.plugins``): the built-ins, plugins through real entry
points (a dist-info on ``sys.path``), the command line and ``from_config`` reading the same registry, clashes
and unknown names, and the laziness of listing and resolving."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from llm_connect import plugins
from llm_connect.cli import main
from llm_connect.errors import ConfigError
from llm_connect.pipelines import from_config
from llm_connect.testing import DeterministicEmbedder, LoopbackServer, ScriptedAdapter

REPO = Path(__file__).resolve().parents[2]
ROWS = [{"id": f"q{k}", "prompt": f"question {k}", "baseline": "Paris", "candidate": "Paris" if k % 3 else "Lyon",
         "human": "yes" if k % 3 else "no"} for k in range(12)]
BUILTIN_JUDGES = {"exact": "exact-match", "contains": "contains", "token-f1": "token-f1",
                  "embedding": "embedding-similarity", "llm": "llm-judge", "trajectory-strict": "trajectory-strict",
                  "trajectory-unordered": "trajectory-unordered", "trajectory-subset": "trajectory-subset",
                  "trajectory-superset": "trajectory-superset"}


def write_rows(path: Path) -> Path:
    pd.DataFrame(ROWS).to_csv(path, index=False)
    return path


def install_plugin(root: Path, dist: str, entry_points: dict[str, dict[str, str]], module: str = "",
                   module_name: str = "") -> Path:
    """A real installed distribution: ``root/<dist>-1.0.dist-info`` (METADATA, entry_points.txt) beside its
    module, for a directory put on ``sys.path``."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                for group, eps in entry_points.items()), encoding="utf-8")
    if module:
        (root / f"{module_name}.py").write_text(textwrap.dedent(module), encoding="utf-8")
    return root


PLUGIN_MODULE = """
    import json

    from llm_connect.grading import LLMJudge
    from llm_connect.testing import ScriptedAdapter


    def echo_adapter(score=None, *, cache=None):
        '''echo[:SCORE]: a scripted model that gives every answer SCORE (default 1).'''
        value = float(score) if score else 1.0
        return ScriptedAdapter(lambda prompt, rc: json.dumps({"quality_score": value, "notes": "echo"}),
                               adapter_id="echo", model_id=f"echo-{value:g}")


    def verdict_judge(*, llm, seed=None):
        '''verdict-judge: the LLM judge, under its own grader id, on the --llm model.'''
        return LLMJudge(llm, grader_id="verdict-judge", seed=seed)
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A plugin package installed on sys.path: the adapter ``echo`` and the judge ``verdict-judge``."""
    name = f"plug_{tmp_path.name.replace('-', '_')}"
    root = install_plugin(tmp_path / "site", "llm-connect-echo", {
        "llm_connect.adapters": {"echo": f"{name}:echo_adapter"},
        "llm_connect.judges": {"verdict-judge": f"{name}:verdict_judge"},
    }, PLUGIN_MODULE, name)
    monkeypatch.syspath_prepend(str(root))
    yield name
    sys.modules.pop(name, None)


# -- the built-ins ------------------------------------------------------------------------------------------


def test_the_builtins_resolve_by_name_and_grader_id():
    assert plugins.available_adapters() == ("local", "openai", "anthropic")
    assert plugins.available_adapters(usage=True) == ("local[:PATH]", "openai:MODEL", "anthropic:MODEL")
    assert plugins.available_embedders(usage=True) == ("local[:PATH]", "openai:MODEL")
    assert plugins.available_judges() == tuple(BUILTIN_JUDGES)
    for name, grader_id in BUILTIN_JUDGES.items():
        assert plugins.find_judge(name).grader_id == grader_id
        assert plugins.find_judge(grader_id).name == name  # the grader id names it too
    assert plugins.find_judge("Exact_Match").name == "exact"
    scripted = ScriptedAdapter(['{"quality_score": 1}'])
    shared = {"llm": scripted, "embedder": DeterministicEmbedder(), "seed": 3}  # each factory takes what it names
    built = {name: plugins.judge(name, **shared) for name in BUILTIN_JUDGES}
    assert {j.grader_id for j in built.values()} == set(BUILTIN_JUDGES.values())
    assert built["llm"].adapter is scripted and built["llm"].seed == 3
    assert built["contains"].normalizer == "squad" and built["exact"].normalizer is None  # each its default
    assert plugins.judge("trajectory-subset", tool_args="ignore").tool_args == "ignore"  # a judge's own option


def test_adapter_specs_build_the_http_adapters_without_a_network():
    openai = plugins.adapter("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    anthropic = plugins.adapter("Anthropic:claude-test", base_url="http://127.0.0.1:9", max_retries=0)
    assert (type(openai).__name__, openai.model_id) == ("OpenAICompatibleAdapter", "gpt-4o-mini")
    assert (type(anthropic).__name__, anthropic.model_id) == ("AnthropicAdapter", "claude-test")
    judge = plugins.judge("llm", llm="anthropic:claude-test", base_url="http://127.0.0.1:9")  # a spec, built
    assert type(judge.adapter).__name__ == "AnthropicAdapter"
    embedder = plugins.embedder("openai:text-embedding-3-small", base_url="http://127.0.0.1:9/v1")
    assert type(embedder).__name__ == "OpenAICompatibleEmbedder"


def test_pyproject_declares_the_builtins_the_code_registers():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    for kind, group in plugins.ENTRY_POINT_GROUPS.items():
        assert declared[group] == dict(plugins.BUILTINS[kind]), group


def test_options_reach_a_factory_only_by_name():
    with pytest.raises(ConfigError, match=r"missing a required argument: 'llm'.*it takes llm, seed, rubric"):
        plugins.judge("llm")
    with pytest.raises(ConfigError, match=r"unexpected keyword argument 'normalise'.*it takes grader_id, normalizer"):
        plugins.judge("exact", normalise="squad")
    with pytest.raises(ConfigError, match=r"'openai' needs model: use openai:MODEL"):
        plugins.adapter("openai")
    # shared options a factory does not name are left out: exact takes no llm, contains no seed
    assert plugins.judge("exact", llm="no such adapter", seed=1).grader_id == "exact-match"


# -- unknown names and clashes ------------------------------------------------------------------------------


def test_unknown_names_list_the_names_there_are(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"unknown LLM adapter 'opneai'; did you mean openai\? choose from "
                       r"local\[:PATH\], openai:MODEL, anthropic:MODEL"):
        plugins.adapter("opneai:gpt-4o")
    with pytest.raises(ConfigError, match=r"unknown judge 'exactt'; did you mean exact\? choose from exact "
                       r"\(exact-match\), contains"):
        plugins.judge("exactt")
    data = write_rows(tmp_path / "qa.csv")
    for argv, words in (
        (["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact,llm", "--llm", "gemini:pro"],
         ["--llm 'gemini:pro' is not a model spec", "local[:PATH], openai:MODEL, anthropic:MODEL"]),
        (["grade", str(data), "--judge", "nope", "--ledger", str(tmp_path / "l.jsonl"), "--task-type", "qa"],
         ["--judge: unknown judge 'nope'", "llm (llm-judge)", "trajectory-superset"]),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "Traceback" not in err, err
        assert all(w in err for w in words), err
    assert not (tmp_path / "o").exists()


def test_a_plugin_named_as_a_builtin_is_an_error_naming_both(tmp_path, monkeypatch, capsys):
    root = install_plugin(tmp_path / "site", "rogue-plugin", {
        "llm_connect.adapters": {"openai": "rogue:adapter"},
        "llm_connect.judges": {"exact-match": "rogue:judge"},  # a built-in judge's grader id is a name too
    })
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(ConfigError) as exc:
        plugins.available_adapters()
    message = str(exc.value)
    assert "two LLM adapters are named 'openai'" in message
    assert "rogue:adapter" in message and "rogue-plugin 1.0" in message  # the plugin, and where it comes from
    assert "llm_connect.plugins._builtins:openai_adapter (built-in)" in message  # the built-in
    with pytest.raises(ConfigError, match=r"two judges are named 'exact-match': rogue:judge .*exact_judge"):
        plugins.find_judge("llm")
    data = write_rows(tmp_path / "qa.csv")
    with pytest.raises(SystemExit) as exit_:
        main(["grade", str(data), "--judge", "exact", "--ledger", str(tmp_path / "l.jsonl"), "--task-type", "qa"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "two judges are named 'exact-match'" in err and "Traceback" not in err


def test_registering_a_taken_name_is_an_error_and_the_same_registration_is_not():
    with pytest.raises(ConfigError, match=r"two LLM adapters are named 'anthropic'.*\(built-in\)"):
        plugins.register_adapter("anthropic", lambda model: ScriptedAdapter(["x"]))
    with pytest.raises(ConfigError, match=r"no ':'"):
        plugins.register_adapter("my:model", lambda model: ScriptedAdapter(["x"]))

    def factory(**options):
        return plugins.judge("exact", grader_id="strict-exact-test")

    first = plugins.register_judge("strict-exact-test", factory)
    assert plugins.register_judge("strict-exact-test", factory) is first  # a cell run twice
    with pytest.raises(ConfigError, match="two judges are named 'strict-exact-test'"):
        plugins.register_judge("strict-exact-test", lambda **o: None)
    assert plugins.available_judges()[-1] == "strict-exact-test"
    assert plugins.judge("strict-exact-test").grader_id == "strict-exact-test"


def test_a_factory_that_builds_no_judge_is_refused():
    plugins.register_judge("not-a-judge-test", lambda **options: "a string")
    with pytest.raises(ConfigError, match=r"built str, which is not a judge"):
        plugins.judge("not-a-judge-test")


# -- the command line and from_config ------------------------------------------------------------------------


def test_anthropic_models_judge_from_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    data = write_rows(tmp_path / "qa.csv")
    ledger = tmp_path / "ledger.jsonl"
    with LoopbackServer() as server:
        code = main(["grade", str(data), "--judge", "llm", "--llm", "anthropic:claude-test", "--base-url",
                     server.anthropic_base_url, "--ledger", str(ledger), "--task-type", "qa", "--no-progress"])
        paths = [r.path for r in server.requests]
        bodies = [r.body for r in server.requests]
    assert code == 0, capsys.readouterr().err
    assert "llm-judge: 12 rows, 12 scored" in capsys.readouterr().out
    assert len(paths) == 12 and set(paths) == {"/v1/messages"}  # Anthropic's Messages API, over real HTTP
    assert {b["model"] for b in bodies} == {"claude-test"}
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert sum(r["tags"]["grader_id"] == "llm-judge" for r in records) == 12


def test_a_plugin_installed_by_entry_point_works_in_the_cli_and_from_config(plugin, tmp_path, capsys):
    assert plugins.available_adapters()[-1] == "echo" and plugins.available_judges()[-1] == "verdict-judge"
    assert plugins.find_adapter("echo").usage == "echo[:SCORE]"
    assert plugins.find_adapter("echo").origin.endswith("of llm-connect-echo 1.0")
    data = write_rows(tmp_path / "qa.csv")
    ledger = tmp_path / "ledger.jsonl"
    # the plugin's judge on the plugin's model, named by --judge and --llm
    assert main(["grade", str(data), "--judge", "verdict-judge", "--llm", "echo:0.25", "--ledger", str(ledger),
                 "--task-type", "qa", "--no-progress"]) == 0
    assert "verdict-judge: 12 rows, 12 scored" in capsys.readouterr().out
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert {r["quality_score"] for r in records if r["tags"]["grader_id"] == "verdict-judge"} == {0.25}
    # beside a built-in in calibrate, its grader id in --require (the one --llm model shared by the judges)
    out = tmp_path / "out"
    assert main(["calibrate", str(data), "--out", str(out), "--judges", "exact,verdict-judge,llm", "--llm", "echo",
                 "--probes", "none", "--no-progress", "--no-cache", "--n-boot", "50",
                 "--require", "verdict-judge:agreement>=0.5"]) == 0
    scores = pd.read_csv(out / "scores.csv")
    assert scores["score_verdict-judge"].eq(1.0).all() and scores["score_llm-judge"].eq(1.0).all()
    # from_config: a unit's adapter names the plugin's spec; one adapter per spec, shared by its units
    pipeline = from_config({"pipeline": [
        {"layer": {"units": [{"type": "continuous-judge", "prompt": "Rate {candidate}", "adapter": "echo:0.5"},
                             {"type": "continuous-judge", "prompt": "Again {candidate}", "adapter": "echo:0.5"}]}},
        {"type": "mean-pool"}]})
    first, second = pipeline.stages[0].base
    assert type(first.adapter).__name__ == "ScriptedAdapter" and first.adapter is second.adapter
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.adapter: unknown adapter 'ech'.*did you mean echo\?"):
        from_config({"pipeline": [{"type": "boolean-judge", "prompt": "{candidate}?", "adapter": "ech"}]})


def test_from_config_builds_an_anthropic_adapter_from_its_spec(monkeypatch):
    with LoopbackServer(reply="Explanation: it holds.\nVerdict: yes") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        pipeline = from_config({"pipeline": [
            {"type": "boolean-judge", "prompt": "Is {candidate} right?", "adapter": "anthropic:claude-test"}]})
        frame = pipeline.run_many([{"id": 1, "candidate": "Paris"}], progress=False)
        paths = [r.path for r in server.requests]
    assert paths == ["/v1/messages"] and frame["quality_score"].tolist() == [1.0]


def test_the_help_lists_the_names(plugin, capsys):
    for command, words in (("calibrate", ["anthropic:MODEL", "llm (llm-judge)", "trajectory-superset",
                                          "verdict-judge", "echo[:SCORE]", "ANTHROPIC_API_KEY"]),
                           ("grade", ["exact (exact-match)", "verdict-judge", "echo[:SCORE]"]),
                           ("align", ["anthropic:MODEL", "echo[:SCORE]"]),
                           ("demo", ["anthropic:MODEL", "echo[:SCORE]"])):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))  # argparse's wrapping undone
        assert all(w in text for w in words), (command, [w for w in words if w not in text])


def test_listing_and_resolving_import_no_client_model_or_plot():
    code = (
        "import sys, json\n"
        "from llm_connect import plugins\n"
        "plugins.available_adapters(usage=True); plugins.available_embedders(usage=True); plugins.available_judges()\n"
        "plugins.find_adapter('anthropic:claude'); plugins.find_adapter('local'); plugins.find_embedder('local')\n"
        "[plugins.find_judge(n).grader_id for n in plugins.available_judges()]\n"
        "heavy = ('torch', 'httpx', 'aiohttp', 'matplotlib', 'transformers', 'sentence_transformers', 'llama_cpp',"
        " 'onnxruntime')\n"
        "resolved = [m for m in (*heavy, 'llm_connect.adapters', 'llm_connect.grading') if m in sys.modules]\n"
        "from llm_connect.cli import build_parser; build_parser()  # every help text lists the names\n"
        "print(json.dumps([resolved, [m for m in heavy if m in sys.modules]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], []]
