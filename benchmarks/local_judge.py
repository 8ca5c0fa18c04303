"""Seconds per judgment of the embedded LLM judge (SmolLM2-135M through llama.cpp), and why.

The default judge, ``LLMJudge(LlamaCppAdapter(n_threads=T), seed=0)`` (the
README's snippet and the CLI's judge), grades N short QA items from
``data/qa_calibration.jsonl`` one after another. Its fixed instructions are
decoded once (the first call, reported apart as the cold call); every other
judgment decodes only its item's new tokens and reads a one-token verdict. We
report the median seconds per judgment beside the new tokens it decoded, the
prompt-decoding rate of this model measured alone on this machine (a floor:
new tokens / rate), and, in the same process, the previous path as a baseline:
the JSON rubric held to the verdict's schema (96 tokens at most), decoded
whole.

``--load`` runs a CPU burner (a busy loop in another process) for the whole
run, as a machine busy with other work would. OpenMP's wait policy is the
library's (passive) unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set:
``OMP_WAIT_POLICY=ACTIVE python benchmarks/local_judge.py --load`` measures
busy-waiting threads.

Run: ``python benchmarks/local_judge.py [--n 100] [--threads 2] [--baseline 10] [--load]``.
Target: median <= 0.35 s per judgment with the default judge on 2 threads.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import Any

from llm_connect import LLMJudge, LLMResponse, RunConfig
from llm_connect.adapters import LlamaCppAdapter

DATA = Path(__file__).resolve().parents[1] / "data" / "qa_calibration.jsonl"
TARGET_S = 0.35


class RecordingAdapter(LlamaCppAdapter):
    """The real adapter, keeping its last reply so the benchmark can read the tokens it reused."""

    last: LLMResponse | None = None

    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        self.last = super().complete(prompt, run_config)
        return self.last


def burn() -> None:
    while True:
        pass


def prompt_rate(adapter: LlamaCppAdapter, n_tokens: int, repeats: int = 5) -> float:
    """Tokens per second decoding a prompt of ``n_tokens`` new tokens after a cached prefix, in llama.cpp alone."""
    llm = adapter._llm
    prefix = llm.tokenize(b"You check answers. " * 20, add_bos=False, special=False)
    body = llm.tokenize(b" The capital of Australia is Canberra, not Sydney." * 10, add_bos=False)[:n_tokens]
    times = []
    for _ in range(repeats):
        llm.n_tokens = 0
        llm.eval(prefix)
        t0 = time.perf_counter()
        llm.eval(body)
        times.append(time.perf_counter() - t0)
    adapter._forget()  # the benchmark used the context behind the adapter's back
    return len(body) / statistics.median(times)


def auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg)) if pos and neg else float("nan")


def judge_items(judge: LLMJudge, adapter: RecordingAdapter, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        t0 = time.perf_counter()
        try:
            result = judge.judge(
                LLMResponse(item["baseline"], "data", "data"),
                LLMResponse(item["candidate"], "data", "data"),
                prompt=item["prompt"],
                run_config=RunConfig(),
            )
            score: float | None = result.quality_score
        except ValueError:  # an unscored reply
            score = None
        seconds = time.perf_counter() - t0
        reply = adapter.last
        assert reply is not None
        usage = reply.raw.get("usage", {}) if isinstance(reply.raw, dict) else {}
        cached = int(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))
        rows.append(
            {
                "seconds": seconds,
                "new_tokens": reply.tokens_in - cached,
                "generated": reply.tokens_out,
                "prompt_tokens": reply.tokens_in,
                "score": score,
                "human": item.get("human") == "yes",
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="items judged by the default judge")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", type=int, default=10, help="items judged by the previous path (0: skip)")
    parser.add_argument("--load", action="store_true", help="run a CPU burner in another process meanwhile")
    args = parser.parse_args()

    items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    burner = None
    if args.load:
        burner = multiprocessing.Process(target=burn, daemon=True)
        burner.start()
    try:
        adapter = RecordingAdapter(n_threads=args.threads).load()
        judge = LLMJudge(adapter, seed=0)
        wait = os.environ.get("OMP_WAIT_POLICY") or ("(GOMP_SPINCOUNT set)" if "GOMP_SPINCOUNT" in os.environ else
                                                      "PASSIVE (the library's)")
        print(f"SmolLM2-135M, {args.threads} threads, OMP wait policy {wait}, load: "
              f"{'one CPU burner' if args.load else 'none added'}; os.getloadavg() {os.getloadavg()[0]:.2f}")
        print(f"default judge: scoring={judge.scoring!r}, rubric {judge.rubric_hash}")

        cold = judge_items(judge, adapter, items[:1])[0]
        rows = judge_items(judge, adapter, items[1 : args.n + 1])
        secs = [r["seconds"] for r in rows]
        new = [r["new_tokens"] for r in rows]
        median_s, median_new = statistics.median(secs), statistics.median(new)
        rate = prompt_rate(adapter, int(median_new))
        print(f"cold first call: {cold['seconds']:.2f} s for {cold['new_tokens']} prompt tokens")
        print(f"{len(rows)} judgments: median {median_s:.3f} s (p10 {statistics.quantiles(secs, n=10)[0]:.3f}, "
              f"p90 {statistics.quantiles(secs, n=10)[-1]:.3f}); target <= {TARGET_S} s: "
              f"{'met' if median_s <= TARGET_S else 'MISSED'}")
        prompt_tokens = statistics.median(r["prompt_tokens"] for r in rows)
        print(f"new tokens per judgment: median {median_new:.0f} (of {prompt_tokens:.0f} prompt tokens), "
              f"generated {statistics.median(r['generated'] for r in rows):.0f}")
        print(f"judge throughput: {median_new / median_s:.0f} new tokens/s; llama.cpp alone decodes "
              f"{rate:.0f} tokens/s, so {median_new:.0f} new tokens cost at least {median_new / rate:.3f} s; "
              f"{TARGET_S} s allows {TARGET_S * rate:.0f} new tokens at that rate")
        scored = [r for r in rows if r["score"] is not None]
        print(f"scored {len(scored)}/{len(rows)}; AUC against the human labels "
              f"{auc([r['score'] for r in scored], [r['human'] for r in scored]):.2f} (0.5 = chance)")

        if args.baseline:
            old_adapter = RecordingAdapter(n_threads=args.threads).load()
            old = LLMJudge(old_adapter, scoring="json", seed=0)
            old_rows = judge_items(old, old_adapter, items[1 : args.baseline + 1])
            old_s = statistics.median(r["seconds"] for r in old_rows)
            print(f"previous path (JSON rubric, schema grammar, 96-token cap) on {len(old_rows)} items: median "
                  f"{old_s:.3f} s, {statistics.median(r['new_tokens'] for r in old_rows):.0f} new prompt tokens, "
                  f"{statistics.median(r['generated'] for r in old_rows):.0f} generated; "
                  f"{old_s / median_s:.1f}x the default judge")
    finally:
        if burner is not None:
            burner.terminate()
            burner.join()


if __name__ == "__main__":
    main()
