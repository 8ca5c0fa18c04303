"""The embedded LLM judge on its two runtimes, each in fresh processes: the compile-free one (``TransformersAdapter``:
the GGUF converted once by transformers, run on onnxruntime; the ``local`` extra) against llama.cpp (the ``llama``
extra, the baseline).

For each runtime two processes run one after the other with the same, initially empty, converted-model cache
(``LLM_CONNECT_CACHE_DIR`` set to a new temporary directory): the **cold** one (the first load: the conversion, for
``TransformersAdapter``; llama.cpp keeps no cache, so its two rows differ only by the operating system's page cache)
and the **warm** one. Each runs ``LLMJudge(adapter, seed=0)`` (the local rubric: instructions decoded once, a
one-token verdict read from its logprobs) on the first N items of ``data/qa_calibration.jsonl`` and reports:

- **first verdict**: seconds from the process start (taken by this script just before it starts the process, so
  the interpreter's own start-up and every import count) to the first scored judgment;
- the median and mean seconds per judgment after it, and whether a second pass gives bit-for-bit the same scores;
- Cohen's kappa of its verdicts (P(yes) > 0.5) with the first annotator (scikit-learn, imported after the run);
- the resident size at the end (``VmRSS``; its file-backed part, the memory-mapped weights, and its anonymous
  part) and the peak (``VmHWM``);
- the load average (``/proc/loadavg``) when the process started: on a shared machine, read each figure with it.

The processes run with ``OMP_WAIT_POLICY=PASSIVE`` (unless it is set), as under the ``llm-connect`` command.

Run: ``python benchmarks/local_runtimes.py [--n 80] [--runtime transformers --runtime llama.cpp]``. Targets: the
first verdict <= 3 s from a warm cache, <= 0.20 s median per judgment, on an idle 2-core machine, for each runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "qa_calibration.jsonl"
FIRST_VERDICT_S = 3.0
PER_JUDGMENT_S = 0.20
RUNTIMES = ("transformers", "llama.cpp")


def _memory() -> dict[str, float]:
    """This process's resident size and peak, in MB (Linux; empty elsewhere)."""
    wanted = {"VmRSS": "rss_mb", "RssFile": "file_mb", "RssAnon": "anon_mb", "VmHWM": "peak_mb"}
    found = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in wanted:
                    found[wanted[name]] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found


def child(runtime: str, n: int, started: float) -> dict[str, Any]:
    """One process's run (imports nothing heavy before its first verdict but what the judge needs)."""
    load = os.getloadavg()[0]
    from llm_connect import LLMJudge, LLMResponse, RunConfig

    if runtime == "llama.cpp":
        from llm_connect.adapters import LlamaCppAdapter as Adapter
    else:
        from llm_connect.adapters import TransformersAdapter as Adapter
    items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()][:n]
    judge = LLMJudge(Adapter(), seed=0)
    rc = RunConfig()

    def one(item: dict[str, Any]) -> float:
        result = judge.judge(LLMResponse(item["baseline"], "b", "ref"), LLMResponse(item["candidate"], "c", "cand"),
                             prompt=item["prompt"], run_config=rc)
        return float(result.quality_score) if result.quality_score is not None else float("nan")

    scores = [one(items[0])]
    first = time.time() - started
    times = []
    for item in items[1:]:
        t0 = time.perf_counter()
        scores.append(one(item))
        times.append(time.perf_counter() - t0)
    again = [one(item) for item in items]
    memory = _memory()
    import statistics

    from sklearn.metrics import cohen_kappa_score

    human = [str(i["human"]).lower() in ("yes", "true", "1") for i in items]
    return {"first_s": first, "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
            "repeatable": scores == again, "kappa": float(cohen_kappa_score(human, [s > 0.5 for s in scores])),
            "load": load, "torch_imported": "torch" in sys.modules, **memory}


def measure(runtime: str, n: int, cache: Path) -> dict[str, Any]:
    """``child`` in a new process with ``cache`` as the converted-model cache."""
    # OpenMP waits passively, as under the llm-connect command: llama.cpp (and PyTorch, before) otherwise
    # busy-wait between steps, many times slower on a machine shared with other work
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "LLM_CONNECT_CACHE_DIR": str(cache)}
    started = time.time()
    done = subprocess.run([sys.executable, __file__, "--child", runtime, "--n", str(n), "--started", repr(started)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{runtime}: the benchmark process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=80)
    parser.add_argument("--runtime", action="append", choices=RUNTIMES, help="default: both")
    parser.add_argument("--child", choices=RUNTIMES, help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.started)))
        return
    results = {}
    for runtime in args.runtime or RUNTIMES:
        with tempfile.TemporaryDirectory(prefix="llm-connect-bench-") as cache:
            for state in ("cold", "warm"):
                r = measure(runtime, args.n, Path(cache))
                results[runtime, state] = r
                print(f"{runtime:<13} {state}  first verdict {r['first_s']:5.2f} s   median {r['median_s']:.3f} "
                      f"s/judgment   mean {r['mean_s']:.3f}   repeatable {r['repeatable']}   kappa vs people "
                      f"{r['kappa']:+.3f}   resident {r.get('rss_mb', 0):.0f} MB (mapped files "
                      f"{r.get('file_mb', 0):.0f}, anonymous {r.get('anon_mb', 0):.0f}; peak "
                      f"{r.get('peak_mb', 0):.0f})   torch imported {r['torch_imported']}   load {r['load']:.1f}",
                      flush=True)
            warm = results[runtime, "warm"]
            first = "meets" if warm["first_s"] <= FIRST_VERDICT_S else "MISSES"
            median = "meets" if warm["median_s"] <= PER_JUDGMENT_S else "MISSES"
            print(f"{runtime:<13} warm: the first verdict {first} the {FIRST_VERDICT_S} s target, the median "
                  f"{median} the {PER_JUDGMENT_S} s target", flush=True)
    if all((r, "warm") in results for r in RUNTIMES):
        a, b = results["transformers", "warm"], results["llama.cpp", "warm"]
        print(f"transformers / llama.cpp (warm): median x{a['median_s'] / b['median_s']:.2f}, "
              f"first verdict x{a['first_s'] / b['first_s']:.2f} ({args.n} items)")


if __name__ == "__main__":
    main()
