"""The ``llm-connect`` command.

Subcommands live one per module (``_calibrate``, ``_estimate``, ``_leaderboard``, ``_demo``, ``_ledger``, ``_view``,
``_align``, ``_grade``, ``_route``; ``calibrate``'s options in ``_calibrate_options``, what it and ``demo`` print
in ``_summary``; the options that name judges and models -- ``--judges``, ``--judge``, ``--llm``, ``--embedder``
-- in ``_judges``, which reads the registry :mod:`llm_connect.plugins`; exit-status helpers and ``--require``
gates in ``_common``),
each added by its ``_add_<name>(subparsers)`` function listed in :func:`build_parser`; each sets
the defaults ``func`` (called with the parsed arguments and its own parser, returning the exit
code) and ``_parser`` (itself).

Exit status: 0 done; 1 a judge scored no item at all (nothing is measured or
written: stderr names the judge and its first error, :class:`~llm_connect.errors.JudgeFailedError`),
or a ``--require`` gate failed (one line per failed requirement); 2 a user error -- a bad
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
import os
import sys
from collections.abc import Sequence

from .._textsafe import one_line
from ..errors import JudgeFailedError, LLMConnectError
from ._align import _add_align
from ._calibrate import _add_calibrate
from ._common import (
    CALIBRATE_STATS,
    ESTIMATE_STATS,
    MAX_AGE_DAYS_MAX,
    N_BOOT_MAX,
    UsageError,
    _describe_error,
    _fail,
    parse_requirement,
)
from ._demo import _add_demo
from ._estimate import _add_estimate
from ._grade import _add_grade
from ._leaderboard import _add_leaderboard
from ._ledger import _add_ledger
from ._route import _add_route
from ._view import _add_view

__all__ = [
    "CALIBRATE_STATS", "ESTIMATE_STATS", "MAX_AGE_DAYS_MAX", "N_BOOT_MAX", "UsageError", "build_parser", "main",
    "parse_requirement",
]

# -- entry point ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``llm-connect`` command's parser, with every subcommand.

    ``demo``, ``grade``, ``calibrate``, ``estimate``, ``leaderboard``, ``ledger``, ``route``, ``view`` and
    ``align``; the documentation site's command-line reference is walked from it.

    Returns
    -------
    argparse.ArgumentParser
        The parser (:func:`main` runs what it parses).

    See Also
    --------
    main : Parse and run.

    Examples
    --------
    >>> args = build_parser().parse_args(["route", "ledger.jsonl", "qa", "--threshold", "0.8"])
    >>> args.command, args.threshold
    ('route', 0.8)
    """
    parser = argparse.ArgumentParser(
        prog="llm-connect",
        description="Grade with LLM judges you can trust: calibrate them against people and other judges.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo(subparsers)
    _add_grade(subparsers)
    _add_calibrate(subparsers)
    _add_estimate(subparsers)
    _add_leaderboard(subparsers)
    _add_ledger(subparsers)
    _add_route(subparsers)
    _add_view(subparsers)
    _add_align(subparsers)
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

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``llm-connect``; ``None``: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0, or 1 when a judge scored nothing or a ``--require`` gate failed.

    Raises
    ------
    SystemExit
        A user error (status 2), Ctrl-C (130) or a closed pipe (141).
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
    except JudgeFailedError as exc:  # the run itself failed (exit 1), not the user's invocation (exit 2)
        if os.environ.get("LLM_CONNECT_DEBUG"):
            raise
        print(f"{command.prog}: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except (LLMConnectError, OSError, ValueError) as exc:
        if os.environ.get("LLM_CONNECT_DEBUG"):
            raise
        _fail(command, _describe_error(exc))

