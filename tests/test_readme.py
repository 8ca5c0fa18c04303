"""The README's Python examples run as written, in order, as a reader would (offline; one embedded-LLM call).

The grading snippet's embedded LLM judge must score its own example (not leave it unscored)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.local_models
def test_readme_examples_run_in_order(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    # the grading snippet scores its own example with the embedded judge, as written (no extra arguments)
    scored = (
        "\nassert df.loc[0, 'status'] == 'scored', df.loc[0].to_dict()"
        "\nassert 0 <= df.loc[0, 'quality_score'] <= 1\n"
    )
    grading = next(i for i, block in enumerate(BLOCKS) if "LLMJudge(LlamaCppAdapter()" in block)
    blocks = [*BLOCKS[: grading + 1], scored, *BLOCKS[grading + 1 :]]
    code = "\n".join(blocks).replace('QualityLedger("ledger.jsonl")', f"QualityLedger({str(ledger)!r})")
    code += "\nassert len(df) == 1 and ledger.read_all()\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ledger.exists()
