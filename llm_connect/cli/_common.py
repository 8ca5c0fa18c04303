"""Shared pieces of the ``llm-connect`` subcommands: exit-status helpers, ``--require`` gates and the
output directory check."""

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

from .._textsafe import one_line, safe_text
from ..errors import ConfigError, LLMConnectError, ValidationError
from ..stats._validate import check_confidence

# --judges selects judges by their names in the registry (llm_connect.plugins: exact, embedding, llm, ... and any
# plugin's); everywhere else (tables, files, verdicts, cards, the ledger, --require) a judge is named by its
# grader_id. The names are accepted in --require as aliases.
DEFAULT_JUDGES = "exact,embedding,llm"
N_BOOT_MAX = 100_000  # bootstrap resamples: more only costs memory and time (n_boot x items floats per statistic)
MAX_AGE_DAYS_MAX = 100_000  # about 270 years; 0 means any age
CALIBRATE_OUTPUTS = {"scores": "scores.csv", "scores_parquet": "scores.parquet", "agreement": "agreement.csv",
                     "bias": "bias.csv", "report": "report.html", "judgments": "judgments.jsonl",
                     "agreement_by_group": "agreement_by_group.csv", "bias_by_group": "bias_by_group.csv",
                     "cards": "cards.csv"}
#: The outputs written only with ``--by COLUMN`` (removed, as a previous run's, without it).
CALIBRATE_GROUP_OUTPUTS = ("agreement_by_group", "bias_by_group")


class UsageError(ConfigError):
    """A problem with the command line or its inputs: reported in one line, exit status 2."""


def read_labels(values: Iterable[Any], column: str, *, scale: Any = None, scale_option: bool = True) -> Any:
    """A label column through :func:`~llm_connect.stats.labels.parse_labels`, its error said in the command's
    own words: with ``scale_option`` (the command has ``--scale``) the scale to declare as ``--scale LOW-HIGH``;
    without it, that this command reads 0-1 labels (a :class:`UsageError` either way)."""
    from ..stats.labels import parse_labels

    try:
        return parse_labels(values, column=column, scale=scale)
    except ValidationError as exc:
        suggested = getattr(exc, "scale", None)
        text = str(exc)
        if scale is not None:
            raise UsageError(text) from None
        if scale_option:
            low, high = suggested if suggested is not None else (1, 5)
            raise UsageError(re.sub(r"scale=\(\d+, \d+\)", f"--scale {low}-{high}", text)) from None
        text = re.sub(r"; declare their scale: scale=\(\d+, \d+\)$", "", text)
        text = re.sub(r", or ratings on a declared scale \(scale=\(\d+, \d+\)\)$", "", text)
        raise UsageError(f"{text}; this command reads 0-1 labels: rescale the column to 0..1 (e.g. (rating - 1) / 4 "
                         "for 1-5 ratings)") from None


def confidence_option(value: float) -> float:
    """``--confidence`` through the package's one check of a confidence level (a :class:`UsageError`)."""
    try:
        return check_confidence(value, name="--confidence")
    except ValidationError as exc:
        raise UsageError(str(exc)) from None


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
    """One ``--require`` clause, ``NAME:STAT OP VALUE`` (``'llm-judge:kappa_low>=0.4'``), as a :class:`Requirement`.

    Parameters
    ----------
    text : str
        The clause; ``OP`` is one of ``>=``, ``<=``, ``>``, ``<``, ``==``.
    stats : sequence of str
        The statistics the command can check (``STAT`` must be one of them).

    Returns
    -------
    Requirement
        The name, statistic, operator, value and the clause's text.

    Raises
    ------
    UsageError
        A clause not of that form, an unknown statistic, or a value that is not a finite number (the message
        says which).

    Examples
    --------
    >>> parse_requirement("llm-judge:kappa_low>=0.4", ["kappa", "kappa_low"])
    Requirement(name='llm-judge', stat='kappa_low', op='>=', value=0.4, text='llm-judge:kappa_low>=0.4')
    """
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
    """``llm:kappa>=0.4`` -> ``llm-judge:kappa>=0.4`` (the judges' registry names are aliases of their grader
    ids)."""
    from .. import plugins

    name, sep, rest = text.strip().partition(":")
    if not sep or not name.strip():
        return text
    try:
        return f"{plugins.find_judge(name.strip()).grader_id}:{rest}"
    except ConfigError:
        return text


def _requirements(texts: Sequence[str], stats: Sequence[str], names: Sequence[str], what: str) -> list[Requirement]:
    reqs = [parse_requirement(t, stats) for t in texts]
    for r in reqs:
        if r.name != "*" and r.name not in names:
            raise UsageError(
                f"--require {r.text!r}: no {what} named {r.name!r}; choose from {', '.join(names) or 'none'} (or *)"
            )
    return reqs


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

def _table(rows: list[tuple[Any, ...]], out: Any, title: str) -> None:
    cells = [tuple(safe_text("" if c is None else c, limit=120) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    print(f"\n{title}:", file=out)
    for r in cells:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)
