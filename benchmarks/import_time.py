"""How long ``import llm_connect`` takes beside ``import pandas``, each in a fresh interpreter.

    python benchmarks/import_time.py [--runs 15]

Prints the median wall time of each import and their ratio (issue 28 asks for at most 1.5x pandas),
and the time of the first use of a name that needs the judges (``llm_connect.LLMJudge``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

_TIMED = "import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"


def _median(stmt: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _TIMED.format(stmt=stmt)], capture_output=True, text=True,
                             check=True)
        times.append(float(out.stdout))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    pandas = _median("import pandas", args.runs)
    ours = _median("import llm_connect", args.runs)
    first_use = _median("import llm_connect; llm_connect.LLMJudge", args.runs)
    everything = _median("from llm_connect import *", args.runs)
    print(f"import pandas                      {pandas * 1000:7.1f} ms")
    print(f"import llm_connect                 {ours * 1000:7.1f} ms  ({ours / pandas:.2f}x pandas)")
    print(f"... and first use of LLMJudge      {first_use * 1000:7.1f} ms  ({first_use / pandas:.2f}x pandas)")
    print(f"from llm_connect import *          {everything * 1000:7.1f} ms  ({everything / pandas:.2f}x pandas)")


if __name__ == "__main__":
    main()
