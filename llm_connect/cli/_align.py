"""``llm-connect align``: improve an LLM judge's rubric from people's labels, proven on held-out labels."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._common import UsageError, _prepare_out
from ._judges import BASE_URL_HELP, _build_llm, _model_spec, _shown_url, models_help

_ALIGN_HELP = """\
Improve an LLM judge from the labels people gave, and keep the change only if it
holds on labels it never saw. DATA (.jsonl/.csv/.tsv) has one row per labelled
item: prompt, candidate, baseline (blank or absent for a rubric with
"reference: false"), the --human column (booleans, yes/no, 0..1 or ratings on the
rubric's scale; blank = unlabelled), optionally id and notes (people's reasons).

A held-out share of the items (--heldout, stratified by label) is set aside; on
the rest, candidate rubrics (worked examples, the threshold, and with --optimizer
criteria rewritten by that model) are ranked by cross-validation; the best and
the original are then measured once on the held-out items, and the candidate is
accepted only when the paired bootstrap interval of the kappa difference lies
above 0.

Writes into --out: rubric.yaml (the rubric to use: the aligned one when accepted,
else the original), alignment.csv (held-out figures and every candidate in every
fold), alignment.html (before/after with intervals, the candidates, the
disagreements that remain) and, with --ledger, the aligned judge's card in the
card registry beside the ledger (the parent rubric's card stays). Prints first one
line saying whether the candidate was accepted. Exit status 0 when it ran, whether
or not the candidate was accepted.
"""
ALIGN_OUTPUTS = {"rubric": "rubric.yaml", "alignment": "alignment.csv", "html": "alignment.html"}


def _add_align(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "align",
        help="improve an LLM judge's rubric from human labels, accepted only if it holds on held-out labels",
        description=_ALIGN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file, one row per labelled item")
    p.add_argument("--judge", metavar="SPEC", default="local",
                   help=f"the judge's model: {models_help('llm')} (default: local)")
    p.add_argument("--human", metavar="COLUMN", required=True, help="column of people's labels")
    p.add_argument("--rubric", metavar="FILE", help="the judge's rubric, a YAML file (default: the built-in "
                   "correctness rubric)")
    p.add_argument("--optimizer", metavar="SPEC", help=f"a model that rewrites the criteria: {models_help('llm')} "
                   "(default: none, only worked examples and the threshold are tried)")
    p.add_argument("--base-url", metavar="URL", help=BASE_URL_HELP)
    p.add_argument("--scoring", choices=("json", "logprob", "yes-no"),
                   help="how the judge replies (default: yes-no for a local model, json otherwise)")
    p.add_argument("--grader-id", default="llm-judge", help="the judge's grader id (default: llm-judge)")
    p.add_argument("--out", metavar="DIR", required=True, help="directory for rubric.yaml, alignment.csv/.html")
    p.add_argument("--ledger", metavar="PATH", help="save the aligned judge's card beside this ledger")
    p.add_argument("--heldout", type=float, default=0.3, help="share of items held out (default: 0.3)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default: 5)")
    p.add_argument("--metric", choices=("kappa", "agreement"), default="kappa",
                   help="what candidates are ranked and proven on (default: kappa)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, folds and example draws (default: 0)")
    p.add_argument("--budget", type=float, metavar="USD", help="stop once this much is spent")
    p.add_argument("--concurrency", type=int, default=16, help="judge calls in flight (default: 16)")
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                   help="keep the judge's replies in OUT/cache, so a rerun pays for none twice (default: on)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="progress bars on stderr (default: on)")
    p.set_defaults(func=_run_align, _parser=p)


def _check_model(spec: str, what: str) -> None:
    from ..errors import MissingDependencyError

    kind, value = _model_spec(spec, what)
    if kind == "local":
        from ..adapters._transformers import missing_for_local_llm

        missing = missing_for_local_llm()
        if missing is not None:
            raise MissingDependencyError(missing, "local", f"the --{what} model (local)")
        if value is None:
            from ..adapters import default_gguf_path

            default_gguf_path()
        elif not Path(value).is_file():
            raise UsageError(f"--{what} local:{value}: no such file; give a .gguf model file")


def _run_align(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import pandas as pd

    from ..alignment import align
    from ..grading import LLMJudge, Rubric
    from ..items import load_items

    data = Path(args.data)
    _check_model(args.judge, "judge")
    if args.optimizer:
        _check_model(args.optimizer, "optimizer")
    if args.base_url:
        from urllib.parse import urlsplit

        parts = urlsplit(args.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--base-url {_shown_url(args.base_url)!r} is not an http:// or https:// URL")
    if not 0.0 < args.heldout < 1.0:
        raise UsageError(f"--heldout must be between 0 and 1, got {args.heldout}")
    if args.folds < 2:
        raise UsageError(f"--folds must be at least 2, got {args.folds}")
    rubric = Rubric.from_yaml(Path(args.rubric)) if args.rubric else None
    items = load_items(data, items=False)
    for column in ("prompt", "candidate", args.human):
        if column not in items.columns:
            raise UsageError(f"{data.name} has no {column!r} column; it has {', '.join(map(str, items.columns))}")
    out = Path(args.out)
    paths = _prepare_out(out, ALIGN_OUTPUTS, [data, *([Path(args.rubric)] if args.rubric else [])])
    cache = None
    hits = misses = 0
    if args.cache:
        from ..adapters import ResponseCache

        directory = out / "cache"
        try:
            cache = ResponseCache(directory)
        except (OSError, ValueError, sqlite3.Error) as exc:
            raise UsageError(f"cannot open the response cache {str(directory)!r}: {exc}; pass --no-cache") from None
    if _model_spec(args.judge, "judge")[0] == "local" and not any(
            n in os.environ for n in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # see _build_judges: llama.cpp's OpenMP threads otherwise spin
    try:
        adapter = _build_llm(args.judge, args.base_url, cache)
        judge = LLMJudge(adapter, grader_id=args.grader_id, scoring=args.scoring, rubric=rubric, seed=args.seed)
        optimizer = _build_llm(args.optimizer, args.base_url, cache) if args.optimizer else None
        result = align(judge, items, human=args.human, optimizer=optimizer, folds=args.folds, heldout=args.heldout,
                       metric=args.metric, seed=args.seed, budget=args.budget, concurrency=args.concurrency,
                       progress=args.progress)
    finally:
        if cache is not None:
            hits, misses = cache.hits, cache.misses
            cache.close()
    print(safe_text(result.summary(), limit=2000))
    result.rubric.to_yaml(paths["rubric"])
    held = result.heldout.assign(stage="heldout", fold="heldout")
    cv = result.candidates.assign(stage="cross-validation")
    table = pd.concat([held, cv], ignore_index=True)
    first = ["stage", "rubric", "candidate", "fold", "n", "kappa", "kappa_low", "kappa_high", "agreement"]
    table = table[[c for c in first if c in table.columns] + [c for c in table.columns if c not in first]]
    csv_safe_frame(table).to_csv(paths["alignment"], index=False)
    result.to_html(paths["html"])
    kappa, n = result.heldout["kappa"], result.heldout["n"]
    print(f"held-out: original kappa {kappa.iloc[0]:.3f}, aligned {kappa.iloc[1]:.3f} (n={int(n.iloc[1])}); "
          f"spent ${result.cost_usd:.4f}")
    if args.ledger:
        card = result.save_card(args.ledger)
        if card is not None:
            print(f"card saved: {safe_text(card.grader_id)} rubric {card.rubric_hash} (parent "
                  f"{result.provenance.get('parent_rubric_hash')}) beside {safe_text(args.ledger)}")
        else:
            print("no card saved: the original was kept")
    if cache is not None and (hits or misses):
        print(f"response cache: {hits} repl{'y' if hits == 1 else 'ies'} reused, {misses} requested", file=sys.stderr)
    print(f"wrote {', '.join(p.name for p in paths.values())} into {safe_text(str(out))}")
    return 0
