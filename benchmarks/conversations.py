"""Per-turn judging of conversations: what prompt caching saves, in money and in time.

Each judged turn re-sends the transcript so far, so the judge prompts of consecutive turns of a
conversation share a byte-identical prefix (the judge's instructions, then the transcript in order;
the judged reply comes last). Two measurements:

(a) **Cost** on the loopback server (``llm_connect.testing.LoopbackServer``), which caches a shared
    prefix as OpenAI does (prompts of 1024 tokens or more, 128-token steps) and, for Anthropic, the
    prefix up to a ``cache_control`` block: per-turn judging of N 10-turn conversations with the
    prompt cache on and off, at an example price (USD 2.00 / 8.00 per million input / output tokens;
    OpenAI's cached input at half price, Anthropic's reads at 0.1x and writes at 1.25x). Reported:
    prompt tokens, cached tokens, cost, and the ratio cached / uncached.
(b) **Wall time** on the embedded judge, both runtimes (llama.cpp and the converted model on
    onnxruntime): per-turn judging of 10-turn conversations (10 judgments each, in order) against
    judging each conversation's last turn alone (1 judgment each). The aim is at most 1.5x. Each
    configuration runs ``--repeat`` times, alternately, from an adapter with no kept prefix (the model
    loaded and the instructions decoded by a turn of another conversation); reported: the medians,
    each run's time, the prompt tokens the adapter decoded and reused (``tokens_evaluated``,
    ``tokens_reused``), whether the last turns got the same scores in both configurations, and the
    load average (the machine may be shared: read the figures with it).

The judge prompt, for (a): ``LLMJudge.build_prompt`` with the transcript so far as the item's prompt
(the question), the reference reply and the judged reply after it; the Anthropic run also passes
``RunConfig.stable_prefix_chars`` (the end of the instructions and of each earlier turn). For (b):
conversation items (``llm_connect.conversations.per_turn``), each judged by
``LLMJudge.with_item(messages=...)`` as ``judge_many`` does, which marks the stable part of its prompt
(``RunConfig.stable_prefix_chars``) for the adapter's prefix reuse.

Run: ``python benchmarks/conversations.py [--n 20] [--local-n 3] [--repeat 3] [--runtime llama.cpp]
[--skip-cost] [--skip-local]``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from llm_connect import LLMJudge, LLMResponse, RunConfig, judge_many
from llm_connect.adapters import AnthropicAdapter, OpenAICompatibleAdapter
from llm_connect.adapters.pricing import Price
from llm_connect.testing import LoopbackServer

TURNS = 10
PRICES = {"judge-model": Price(2.00, 8.00)}
TARGET_RATIO = 1.5
_TEXT = ("the order ships from our warehouse within two days and tracking is emailed once it leaves "
          "refunds go back to the original card in five business days returns need the receipt and "
          "the item unused in its box our support team answers chat messages around the clock")
_VOCAB = _TEXT.split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n)) + "."


def conversations(n: int, *, seed: int = 0, context_words: int = 1000, reply_words: int = 60) -> list[dict[str, Any]]:
    """``n`` synthetic support conversations of ``TURNS`` user/assistant turns, with a policy document first."""
    rng = random.Random(seed)
    out = []
    for c in range(n):
        messages = [{"role": "system", "content": "Policy: " + _sentence(rng, context_words)}]
        for t in range(TURNS):
            messages.append({"role": "user", "content": f"Question {t}: " + _sentence(rng, reply_words // 2)})
            messages.append({"role": "assistant", "content": _sentence(rng, reply_words)})
        out.append({"conversation_id": f"c{c}", "messages": messages})
    return out


def _render(messages: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """The transcript as text and the character offset where each message ends."""
    text, ends = "", []
    for m in messages:
        text += f"{m['role']}: {m['content']}\n"
        ends.append(len(text))
    return text, ends


def per_turn_items(convs: list[dict[str, Any]], *, last_only: bool = False) -> list[dict[str, Any]]:
    """One item per assistant reply (or only the last): the transcript up to its user message, then the reply."""
    rows = []
    for conv in convs:
        messages = conv["messages"]
        replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        for turn, i in enumerate(replies):
            if last_only and turn != len(replies) - 1:
                continue
            transcript, ends = _render(messages[:i])
            rows.append({"conversation_id": conv["conversation_id"], "turn": turn, "prompt": transcript,
                         "message_ends": ends, "baseline": "A correct, policy-grounded reply.",
                         "candidate": messages[i]["content"]})
    return rows


# -- (a) cost -------------------------------------------------------------------------------------------


def cost_openai(rows: list[dict[str, Any]], *, cache: bool) -> dict[str, float]:
    with LoopbackServer(prompt_cache=cache) as server:
        judge = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        df = judge_many(judge, [{k: r[k] for k in ("prompt", "baseline", "candidate")} for r in rows],
                        concurrency=1, progress=False)
    return {"tokens_in": int(df["judge_tokens_in"].sum()), "tokens_cached": int(df["judge_tokens_cached"].sum()),
            "tokens_written": 0, "cost_usd": float(df["judge_cost_usd"].sum())}


def cost_anthropic(rows: list[dict[str, Any]], *, cache: bool) -> dict[str, float]:
    totals = {"tokens_in": 0, "tokens_cached": 0, "tokens_written": 0, "cost_usd": 0.0}
    with LoopbackServer(prompt_cache=cache) as server:
        adapter = AnthropicAdapter("judge-model", base_url=server.anthropic_base_url, prices=PRICES)
        judge = LLMJudge(adapter)
        for r in rows:
            prompt = judge.build_prompt(LLMResponse(r["baseline"], "b", "ref"), LLMResponse(r["candidate"], "c", "c"),
                                        r["prompt"])
            start = prompt.index(r["prompt"])  # the transcript follows the instructions, byte for byte
            offsets = [start] + [start + e for e in r["message_ends"]] if cache else None
            reply = adapter.complete(prompt, RunConfig(stable_prefix_chars=offsets))
            totals["tokens_in"] += reply.tokens_in
            totals["tokens_cached"] += reply.tokens_cached
            totals["tokens_written"] += reply.tokens_cache_written
            totals["cost_usd"] += reply.cost_usd
    return totals


def report_cost(n: int) -> None:
    rows = per_turn_items(conversations(n))
    print(f"(a) cost: per-turn judging of {n} conversations x {TURNS} turns ({len(rows)} judgments) on the "
          "loopback server, USD 2.00 / 8.00 per million input / output tokens")
    for name, run in (("OpenAI", cost_openai), ("Anthropic", cost_anthropic)):
        off, on = run(rows, cache=False), run(rows, cache=True)
        for label, r in (("cache off", off), ("cache on", on)):
            print(f"  {name:<9} {label:<9}  prompt tokens {r['tokens_in']:>8}  cached {r['tokens_cached']:>8}  "
                  f"written {r['tokens_written']:>7}  cost ${r['cost_usd']:.5f}")
        print(f"  {name:<9} cached / uncached cost: {on['cost_usd'] / off['cost_usd']:.3f}  "
              f"({on['tokens_cached'] / on['tokens_in']:.1%} of prompt tokens read from the cache)")


# -- (b) wall time on the embedded judge ------------------------------------------------------------------


def conversation_items(convs: list[dict[str, Any]], *, last_only: bool = False) -> list[dict[str, Any]]:
    """The conversation items of per-turn judging (``llm_connect.conversations.per_turn``): the messages before
    each reply, the reply; only each conversation's last turn with ``last_only``."""
    from llm_connect.conversations import per_turn

    frame = per_turn([{"conversation_id": c["conversation_id"], "messages": c["messages"]} for c in convs])
    rows = frame.to_dict("records")
    if last_only:
        last = frame.groupby("conversation_id", sort=False)["turn"].max().to_dict()
        rows = [r for r in rows if r["turn"] == last[r["conversation_id"]]]
    return rows


def _time(judge: LLMJudge, rows: list[dict[str, Any]]) -> tuple[float, list[float]]:
    """Seconds to judge ``rows`` one after the other (each bound to its conversation, as ``judge_many`` binds
    it), and the scores."""
    rc = RunConfig()
    scores = []
    t0 = time.perf_counter()
    for r in rows:
        bound = judge.with_item(messages=r["messages"])
        result = bound.judge(LLMResponse("A correct, policy-grounded reply.", "b", "ref"),
                             LLMResponse(r["candidate"], "c", "cand"), prompt=r["prompt"] or "", run_config=rc)
        scores.append(result.quality_score)
    return time.perf_counter() - t0, scores


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _counters(adapter: Any) -> tuple[int, int]:
    """The prompt tokens ``adapter`` has decoded and reused so far (0 for an adapter that does not count them)."""
    return getattr(adapter, "tokens_evaluated", 0), getattr(adapter, "tokens_reused", 0)


def report_wall(n: int, *, repeat: int = 3, runtimes: tuple[str, ...] = ("llama.cpp", "transformers")) -> None:
    """Per-turn judging against last turns alone on each embedded runtime, ``repeat`` times alternately.

    Before each timed run the adapter's kept prefixes are dropped (``close()``, the model loaded again) and one
    turn of a conversation outside the timed set is judged, so both runs start with the model loaded and the
    judge's instructions decoded, and neither reuses what the other decoded."""
    import os

    from llm_connect.adapters import LlamaCppAdapter, TransformersAdapter

    convs = conversations(n + 1, seed=1, context_words=150, reply_words=24)
    warm_up = conversation_items(convs[-1:])[:1]
    every, last = conversation_items(convs[:n]), conversation_items(convs[:n], last_only=True)
    print(f"(b) wall time on the embedded judge: {n} conversations x {TURNS} turns; per-turn judging "
          f"({len(every)} judgments, in order) against each last turn alone ({len(last)} judgments); "
          f"{repeat} runs of each, alternately; medians")
    makers = {"llama.cpp": LlamaCppAdapter, "transformers": TransformersAdapter}
    for name in runtimes:
        try:
            adapter = makers[name]()
            judge = LLMJudge(adapter, seed=0)
            _time(judge, warm_up)
        except Exception as exc:  # a runtime that is not installed
            print(f"  {name:<12} skipped: {type(exc).__name__}: {exc}")
            continue
        times: dict[str, list[float]] = {"last": [], "every": []}
        tokens: dict[str, tuple[int, int]] = {}
        scores: dict[str, list[float]] = {}
        loads = []
        for _ in range(repeat):
            for kind, rows in (("last", last), ("every", every)):
                adapter.close()
                _time(judge, warm_up)
                before = _counters(adapter)
                loads.append(os.getloadavg()[0])
                seconds, scores[kind] = _time(judge, rows)
                times[kind].append(seconds)
                after = _counters(adapter)
                tokens[kind] = (after[0] - before[0], after[1] - before[1])
        adapter.close()
        t_last, t_every = _median(times["last"]), _median(times["every"])
        ratio = t_every / t_last
        same = [s for s, r in zip(scores["every"], every, strict=True) if r in last] == scores["last"]
        print(f"  {name:<12} last turns {t_last:6.2f} s   every turn {t_every:6.2f} s   x{ratio:.2f}  "
              f"({'meets' if ratio <= TARGET_RATIO else 'MISSES'} the x{TARGET_RATIO} aim)   "
              f"runs: last {', '.join(f'{t:.2f}' for t in times['last'])}; "
              f"every {', '.join(f'{t:.2f}' for t in times['every'])}")
        print(f"  {'':<12} prompt tokens decoded / reused: last turns {tokens['last'][0]} / {tokens['last'][1]}, "
              f"every turn {tokens['every'][0]} / {tokens['every'][1]}; last turns scored alike in both runs: "
              f"{same}; load average {min(loads):.1f}-{max(loads):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="conversations for the cost run")
    parser.add_argument("--local-n", type=int, default=3, help="conversations for the wall-time run")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each configuration, alternately")
    parser.add_argument("--runtime", action="append", choices=("llama.cpp", "transformers"),
                        help="an embedded runtime to time (default: both)")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    if not args.skip_cost:
        report_cost(args.n)
    if not args.skip_local:
        report_wall(args.local_n, repeat=args.repeat, runtimes=tuple(args.runtime or ("llama.cpp", "transformers")))


if __name__ == "__main__":
    main()
