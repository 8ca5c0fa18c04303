"""Compatibility shim: the loopback server lives in :mod:`llm_connect.testing.loopback`.

The test doubles are one package, :mod:`llm_connect.testing`; this module
re-exports the loopback server's public names so that
``from llm_connect.loopback import LoopbackServer`` and
``python -m llm_connect.loopback --port 8000`` keep working. New code should
use ``from llm_connect.testing import LoopbackServer`` (or
``python -m llm_connect.testing.loopback``). The names here are the same
objects as there.
"""

from __future__ import annotations

from .testing.loopback import FAULT_KINDS, LoopbackServer, RecordedRequest, default_reply, main

__all__ = ["FAULT_KINDS", "LoopbackServer", "RecordedRequest", "default_reply", "main"]

if __name__ == "__main__":
    main(prog="python -m llm_connect.loopback")
