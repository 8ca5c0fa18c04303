"""Neutralising untrusted text (``llm_connect._textsafe``): for terminals, CSV cells, and URLs with credentials."""

from __future__ import annotations

from llm_connect._textsafe import csv_cell, redact_urls, safe_text


def test_textsafe_helpers():
    assert safe_text("a\x1b[31mb\nc\td\x00\ud800") == "a\\x1b[31mb\\nc\\td\\x00\\ud800"
    assert safe_text("x" * 10, limit=5) == "xxxx…"
    assert redact_urls("see https://u:p@ss@host:8/v1?x=1 and http://h/p") == "see https://host:8/v1?x=1 and http://h/p"
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("-1.5e3") == "-1.5e3" and csv_cell(-3) == -3
    assert csv_cell("\tx") == "'\tx" and csv_cell("- item") == "'- item" and csv_cell("ok") == "ok"
