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
(b) **Wall time** on the embedded judge, both runtimes (llama.cpp and transformers): per-turn judging
    of 10-turn conversations (10 judgments each, in order) against judging each conversation's last
    turn alone (1 judgment each). The aim is at most 1.5x.

The judge prompt: ``LLMJudge.build_prompt`` with the transcript so far as the item's prompt (the
question), the reference reply and the judged reply after it; the Anthropic run also passes
``RunConfig.stable_prefix_chars`` (the end of the instructions and of each earlier turn).

Run: ``python benchmarks/conversations.py [--n 20] [--local-n 3] [--skip-local]``.
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


def _time(judge: LLMJudge, rows: list[dict[str, Any]]) -> float:
    rc = RunConfig()
    t0 = time.perf_counter()
    for r in rows:
        judge.judge(LLMResponse(r["baseline"], "b", "ref"), LLMResponse(r["candidate"], "c", "cand"),
                    prompt=r["prompt"], run_config=rc)
    return time.perf_counter() - t0


def report_wall(n: int) -> None:
    from llm_connect.adapters import LlamaCppAdapter, TransformersAdapter

    convs = conversations(n, seed=1, context_words=150, reply_words=24)
    every, last = per_turn_items(convs), per_turn_items(convs, last_only=True)
    print(f"(b) wall time on the embedded judge: {n} conversations x {TURNS} turns; per-turn judging "
          f"({len(every)} judgments, in order) against each last turn alone ({len(last)} judgments)")
    for name, make in (("llama.cpp", LlamaCppAdapter), ("transformers", TransformersAdapter)):
        try:
            judge = LLMJudge(make(), seed=0)
            _time(judge, last[:1])  # load the model and decode the instructions once
        except Exception as exc:  # a runtime that is not installed
            print(f"  {name:<12} skipped: {type(exc).__name__}: {exc}")
            continue
        t_last = _time(judge, last)
        t_every = _time(judge, every)
        ratio = t_every / t_last
        print(f"  {name:<12} last turns {t_last:6.1f} s   every turn {t_every:6.1f} s   x{ratio:.2f}  "
              f"({'meets' if ratio <= TARGET_RATIO else 'MISSES'} the x{TARGET_RATIO} aim)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="conversations for the cost run")
    parser.add_argument("--local-n", type=int, default=3, help="conversations for the wall-time run")
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()
    report_cost(args.n)
    if not args.skip_local:
        report_wall(args.local_n)


if __name__ == "__main__":
    main()
