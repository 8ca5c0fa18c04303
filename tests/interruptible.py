"""Python child processes that a test stops with Ctrl-C (SIGINT), whatever the runner ignores.

Import with ``from interruptible import python_argv`` (``tests/`` is on ``sys.path``, as for
``strategies``).

A process started with SIGINT ignored -- a runner under ``nohup`` or a background job of a
non-interactive shell (``pytest &`` in a script) -- hands ``SIG_IGN`` on to every child it starts,
through ``exec``; Python installs its ``KeyboardInterrupt`` handler only when SIGINT is at its
default when it starts, so such a child never sees the SIGINT a test sends and the test times out.
:func:`python_argv` builds a command line whose first statement restores the handler Python
installs in a terminal (``signal.default_int_handler``) and then runs the module or code it was
given, so the child behaves as it does when a user presses Ctrl-C. No ``preexec_fn``: it is not
safe in a process that runs threads (the loopback servers do).
"""

from __future__ import annotations

import sys

__all__ = ["python_argv"]

_RESTORE = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def python_argv(*args: str) -> list[str]:
    """``[sys.executable, *args]`` for ``args`` starting ``-m MODULE`` or ``-c CODE``, Ctrl-C restored in the child.

    ``-m MODULE`` runs through :func:`runpy.run_module` with ``alter_sys=True`` (what ``-m`` does:
    ``__name__ == "__main__"``, ``sys.argv[0]`` the module's file, a package runs its ``__main__``);
    ``-c CODE`` runs ``CODE`` after the restoring line. The arguments after them reach ``sys.argv[1:]``.
    """
    if len(args) < 2 or args[0] not in ("-m", "-c"):
        raise ValueError(f"python_argv takes '-m MODULE ...' or '-c CODE ...', not {list(args)!r}")
    flag, target, rest = args[0], args[1], list(args[2:])
    if flag == "-c":
        return [sys.executable, "-c", _RESTORE + target, *rest]
    run = f"import runpy; runpy.run_module({target!r}, run_name='__main__', alter_sys=True)\n"
    return [sys.executable, "-c", _RESTORE + run, *rest]
