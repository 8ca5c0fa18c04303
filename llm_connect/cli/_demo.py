"""``llm-connect demo``: the bundled QA set graded by local judges, calibrated against two annotators."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._calibrate import _check_items, _write_csvs
from ._common import CALIBRATE_OUTPUTS, UsageError, _prepare_out
from ._estimate import ESTIMATE_OUTPUTS
from ._judges import JudgeSpec, _build_judges, _check_judges, _limit, add_model_options
from ._summary import _no_row_scored, _print_summary, _print_verdicts

# -- demo ---------------------------------------------------------------------------------------------

_DEMO_HELP = """\
The main job, offline: grade the bundled QA set (data/qa_calibration.jsonl:
questions, reference answers, candidate answers with human labels) with exact
match, the embedded MiniLM embedding judge and the embedded SmolLM2-135M LLM
judge; append every observation to OUT/ledger.jsonl; measure how far the
judges agree with each other and with the human labels (the second annotator
is the ceiling); probe the judges for length, format and injection bias; and
write OUT/scores.csv, agreement.csv, bias.csv, report.html and judgments.jsonl
(every judgment, for llm-connect view OUT).

A 135M-parameter judge is weak and slow on a CPU (its time per item is measured
on the first items and printed before it starts): --rows grades a seeded sample (default 80) and --probe-limit probes
fewer (default 20) so the demo ends in minutes; 'all' grades every row.
"""


def _data_file(name: str) -> Path:
    """A bundled sample data file: inside the installed package, or in the source tree's data/."""
    from importlib.resources import files

    packaged = files("llm_connect").joinpath("_data", name)
    if packaged.is_file():
        return Path(str(packaged))
    source = Path(__file__).resolve().parents[2] / "data" / name
    if source.is_file():
        return source
    raise UsageError(f"the sample data file {name} is not installed; reinstall llm-connect or run from a checkout")


def _add_demo(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="grade the bundled QA set with three judges on the local models, calibrate and probe them",
        description=_DEMO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", metavar="DIR", default="demo-out", help="output directory (default: demo-out)")
    p.add_argument(
        "--rows",
        type=_limit,
        default=80,
        metavar="N",
        help="grade a seeded sample of N items of the QA set, or 'all' (default: 80)",
    )
    p.add_argument(
        "--probe-limit",
        type=_limit,
        default=20,
        metavar="N",
        help="probe at most N items per probe, or 'all' (default: 20)",
    )
    add_model_options(p, rubric=False)  # --llm, --embedder, --base-url
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the LLM judge and the bootstrap")
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.set_defaults(func=_run_demo, _parser=p)


def _record_demo_labels(ledger: Any, items: Any) -> int:
    """The two annotators' labels, recorded beside the judgments (grader_id "human", one annotator each)."""
    import pandas as pd

    from ..frames import record_labels
    from ..stats.labels import parse_labels

    written = 0
    for column in ("human", "human_2"):
        frame = pd.DataFrame({
            "item_id": items["id"].astype(str),
            "adapter_id": items["candidate_model"].astype(str),
            "label": parse_labels(items[column].tolist(), column=column),
            "annotator": column,
        })
        written += record_labels(ledger, frame, task_type="qa", label="label", annotator="annotator")
    return written


DEMO_LABELLED_SHARE = 0.4  # the demo pretends people labelled this share of the items, to show what PPI++ buys


def _demo_label_design(n: int, *, seed: int, share: float) -> Any:
    """The seeded sample of rows the demo pretends people labelled (a boolean mask)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    labelled = np.zeros(n, dtype=bool)
    labelled[rng.choice(n, size=max(2, round(share * n)), replace=False)] = True
    return labelled


def _demo_estimates(report: Any) -> Any:
    """Each judge's estimate of the answers' mean quality, alone and corrected by the report's labelled
    sample (``report.label_design``, the same one its HTML page uses)."""
    import pandas as pd

    from ..calibration._cards import report_estimates

    parts = [report_estimates(report, judge=j, by=None, labelled=report.label_design) for j in report.judges]
    parts = [p for p in parts if p is not None]
    return pd.concat(parts, ignore_index=True) if parts else None


def _print_demo_estimates(table: Any, share: float, out: Any) -> None:
    """In words: what each judge alone would claim, and the estimate corrected with a few human labels."""
    print(f"\nestimates of the answers' mean quality (people labelled a random {share:.0%} of the items):", file=out)
    for judge, rows in table.groupby("judge", sort=False):
        by = rows.set_index("method")
        naive, ppi, human = by.loc["judge"], by.loc["ppi++"], by.loc["human"]
        print(
            f"  {safe_text(judge)} alone would claim {naive['estimate']:.2f} "
            f"({naive['ci_low']:.2f}..{naive['ci_high']:.2f}, an interval that trusts it); "
            f"corrected with {int(ppi['n_labelled'])} human labels (PPI++) it is "
            f"{ppi['estimate']:.2f} ({ppi['ci_low']:.2f}..{ppi['ci_high']:.2f}); the labels alone say "
            f"{human['estimate']:.2f} ({human['ci_low']:.2f}..{human['ci_high']:.2f})",
            file=out,
        )


#: How many of the run's first items are judged to measure the LLM judge's throughput (after one warm-up).
TIMED_ITEMS = 4


def _announce_llm_phase(judge: Any, items: Any, args: argparse.Namespace) -> float | None:
    """Say up front how long the LLM judge will take: the longest phase, measured on this machine.

    Loads the model with one judgment of the first item (the fixed instructions are decoded then and
    reused after), then times the next :data:`TIMED_ITEMS` items of the run, and multiplies their mean
    by the judgments to come: every item, and each pointwise probe's perturbed items. Measured, not a
    constant: the same judge takes 0.2 s an item on an idle machine and several times that on a busy
    one. Returns the estimate in seconds (``None`` when nothing was measured).
    """
    import time

    from ..calibration import PROBES
    from ..core import LLMResponse, RunConfig
    from ..errors import LLMConnectError

    if judge is None or not len(items):
        return None
    rc = RunConfig()

    def judge_row(i: int) -> None:
        row = items.iloc[i]
        judge.judge(LLMResponse(str(row["baseline"]), "baseline", "reference"),
                    LLMResponse(str(row["candidate"]), "candidate", "candidate"),
                    prompt=str(row["prompt"]), run_config=rc)

    timed = list(range(1, min(len(items), TIMED_ITEMS + 1))) or [0]
    try:
        judge_row(0)  # loads the model, decodes the instructions once
        start = time.perf_counter()
        for i in timed:
            judge_row(i)
        per_item = (time.perf_counter() - start) / len(timed)
    except LLMConnectError:
        return None  # the run itself reports what is wrong with the judge
    probes = [p for p in PROBES if p != "position"]  # position applies to pairwise judges only
    probed = min(len(items), args.probe_limit or len(items))
    calls = len(items) + len(probes) * probed
    estimate = max(1.0, per_item * calls)
    adapter = getattr(judge, "adapter", None)
    runtime = {"LlamaCppAdapter": " (SmolLM2-135M on llama.cpp)",
               "TransformersAdapter": " (SmolLM2-135M on onnxruntime; pip install -e '.[llama]' runs it on "
                                      "llama.cpp)"}.get(type(adapter).__name__, "")
    print(
        f"the LLM judge{runtime} takes about {per_item:.2f} s per item on this machine (measured on {len(timed)} "
        f"item(s)): grading {len(items)} items and probing {probed} items x {len(probes)} probes "
        f"({calls} judgments) will take about {_duration(estimate)}",
        flush=True,
    )
    return estimate


def _duration(seconds: float) -> str:
    """``42 s``, or ``185 s (3 min)`` from a minute on."""
    s = max(0, round(seconds))
    return f"{s} s" if s < 60 else f"{s} s ({s / 60:.0f} min)"


#: The command that points the demo's LLM judge at a real model (an OpenAI-compatible server).
NEXT_STEP_COMMAND = "llm-connect demo --llm openai:MODEL --base-url http://HOST:PORT/v1"


def _print_next_step(cards: Any, llm: str, out: Any) -> None:
    """When the LLM judge came out weak: why (the embedded model is tiny), and the one command to run next."""
    from ._judges import _model_spec

    card = next((c for c in cards if c.grader_id == "llm-judge"), None)
    if card is None:
        return
    from ..cards import MIN_LABELLED

    unsure = card.n_labelled < MIN_LABELLED or not math.isfinite(card.kappa)  # the verdict: not enough evidence
    weak = unsure or bool(card.weak) or not (math.isfinite(card.kappa_low) and card.kappa_low > 0)
    kind, path = _model_spec(llm, "llm")
    if not weak or kind != "local":
        return
    if unsure:
        print("\ntoo few labelled items to tell how good the LLM judge is: --rows all grades every item",
              file=out)
    if path is None:
        why = ("the LLM judge here is SmolLM2-135M, a 135M-parameter model small enough to ship in a pip "
               "package and run on any CPU: it shows the machinery, but is far too small to judge answers")
    else:
        why = f"the LLM judge here is the local model {safe_text(Path(path).name)}, too weak for this task"
    print(f"\nwhy the LLM judge is weak: {why}.", file=out)
    print("next: point it at a real model on any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp's "
          "server; the key from $OPENAI_API_KEY):", file=out)
    print(f"  {NEXT_STEP_COMMAND}", file=out)
    print("(on your own data: llm-connect calibrate DATA --llm openai:MODEL --base-url URL; a bigger GGUF "
          "here: --llm local:PATH.gguf)", file=out)


def _run_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import time

    import numpy as np

    from ..calibration import calibrate
    from ..items import load_items
    from ..quality import QualityLedger
    from ..views.judgments import write_judgments

    start = time.perf_counter()
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    spec = JudgeSpec(llm=args.llm, embedder=args.embedder, base_url=args.base_url, normalize="squad",
                     reference_sep="|", seed=args.seed)
    _check_judges(spec)
    data = _data_file("qa_calibration.jsonl")
    items = load_items(data)
    total = len(items)
    if args.rows is not None and args.rows < total:
        rng = np.random.default_rng(args.seed)
        items = items.iloc[np.sort(rng.choice(total, size=args.rows, replace=False))].reset_index(drop=True)
    lacking = _check_items(parser, items)
    paths = _prepare_out(
        Path(args.out),
        {"ledger": "ledger.jsonl", "ledger_lock": "ledger.jsonl.lock", **CALIBRATE_OUTPUTS, **ESTIMATE_OUTPUTS},
        inputs=[data],
    )
    judges = _build_judges(spec)
    print(
        f"llm-connect demo: {len(items)} of the {total} items in {safe_text(data.name)}; judges: exact match (SQuAD, "
        f"any reference), embeddings ({safe_text(args.embedder)}), LLM judge ({safe_text(args.llm)}); "
        "labels: human, human_2",
        flush=True,
    )
    estimate = _announce_llm_phase(judges.get("llm-judge"), items, args)
    ledger = QualityLedger(paths["ledger"])
    before = sum(1 for _ in ledger.iter_observations()) if ledger.path.exists() else 0
    report = calibrate(
        judges,
        items,
        human=None,
        annotators=["human", "human_2"],
        reference_sep="|",
        probes="auto",
        probe_limit=args.probe_limit,
        seed=args.seed,
        progress=not args.no_progress,
        ledger=ledger,  # every scored judgment, recorded as judge_many(..., ledger=) records it
        task_type="qa",
    )
    labels = _record_demo_labels(ledger, items)
    from ..calibration import CalibrationReport
    from ..cards import JudgeCardRegistry

    assert isinstance(report, CalibrationReport)  # the demo's items are graded answers, not pairs
    from ..calibration._cards import cards_from_report

    cards = cards_from_report(report)
    JudgeCardRegistry.for_ledger(ledger).save(cards)
    recorded = sum(1 for _ in ledger.iter_observations()) - before
    # one label design for the printed estimates, estimates.csv and the report's estimates section
    report.label_design = _demo_label_design(len(report.scores), seed=args.seed, share=DEMO_LABELLED_SHARE)
    written = _write_csvs(report, paths)
    written["report"] = report.to_html(paths["report"])
    written["judgments"] = write_judgments(report, paths["judgments"])  # what llm-connect view shows
    estimates = _demo_estimates(report)
    if estimates is not None:
        csv_safe_frame(estimates).to_csv(paths["estimates"], index=False)
        written["estimates"] = paths["estimates"]
    written = {"ledger": ledger.path, **written}
    _print_verdicts(cards, sys.stdout)
    _print_summary(report, written, sys.stdout, lacking=lacking)
    if estimates is not None:
        _print_demo_estimates(estimates, DEMO_LABELLED_SHARE, sys.stdout)
    print(
        f"appended {recorded} observations to {safe_text(ledger.path)} ({recorded - labels} judgments, {labels} "
        f"human labels; judge cards in {safe_text(JudgeCardRegistry.for_ledger(ledger).path)}; "
        f"see: llm-connect ledger stats {safe_text(ledger.path)} --grader-id llm-judge)",
        file=sys.stdout,
    )
    took = f" (estimated {_duration(estimate)} for the LLM judge)" if estimate is not None else ""
    print(
        f"open {safe_text(written['report'])} for the full report; done in "
        f"{_duration(time.perf_counter() - start)}{took}",
        file=sys.stdout,
    )
    _print_next_step(cards, args.llm, sys.stdout)
    return _no_row_scored(parser, report)
