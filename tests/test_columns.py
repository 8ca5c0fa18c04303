"""The columns of a result frame (``llm_connect.columns``): the judge's tokens beside its cost, once, under the
judge's names, in ``judge_many``, ``results_frame`` and ``score_items``' usage. Real HTTP against the loopback server.
"""

from __future__ import annotations

import pytest

import llm_connect
from llm_connect.adapters import OpenAICompatibleAdapter, Price
from llm_connect.calibration import ScoredItems, score_items
from llm_connect.frames import results_frame
from llm_connect.grading import LLMJudge, judge_many
from llm_connect.testing import LoopbackServer

MODEL = "priced-judge"
PRICES = {MODEL: Price(1.0, 2.0)}  # $ per million tokens in / out
VERDICT = '{"quality_score": 0.75, "notes": "fine"}'


def priced(server: LoopbackServer) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter(MODEL, base_url=server.base_url, prices=PRICES)


def items(n: int) -> list[dict]:
    return [{"id": i, "prompt": f"question {i}", "baseline": f"answer {i}",
             "candidate": f"answer {i}" if i % 3 else f"reply {i}", "human": bool(i % 3)} for i in range(n)]


# -- judge_tokens_in / judge_tokens_out beside judge_cost_usd ---------------------------------------------


def test_result_frames_carry_the_judges_tokens_beside_its_cost_over_http():
    sent: list[str] = []

    def reply(prompt: str) -> str:
        sent.append(prompt)
        return VERDICT

    with LoopbackServer(reply=reply) as server:
        judge = LLMJudge(priced(server))
        df = judge_many(judge, items(4), concurrency=1, progress=False)
        results = [judge.judge(llm_connect.LLMResponse(r["baseline"], "b", "ref"),
                               llm_connect.LLMResponse(r["candidate"], "c", "cand"),
                               prompt=r["prompt"], run_config=llm_connect.RunConfig()) for r in items(2)]
        scored = score_items({"llm": judge}, items(3), progress=False)
    columns = list(df.columns)
    assert columns.index("judge_tokens_in") + 2 == columns.index("judge_tokens_out") + 1 \
        == columns.index("judge_cost_usd")  # beside the cost
    assert "tokens_in" not in columns and "tokens_out" not in columns  # once, under the judge's names
    # the loopback server counts the words it was sent and sent back: the tokens the judge call used
    assert df["judge_tokens_in"].tolist() == [len(p.split()) for p in sent[:4]]
    assert (df["judge_tokens_out"] == len(VERDICT.split())).all()
    assert df["judge_cost_usd"].tolist() == pytest.approx(
        [(i * 1.0 + o * 2.0) / 1e6 for i, o in zip(df["judge_tokens_in"], df["judge_tokens_out"], strict=True)])
    rf = results_frame(results)
    assert rf["judge_tokens_in"].tolist() == [len(p.split()) for p in sent[4:6]]
    assert rf["judge_tokens_out"].tolist() == [len(VERDICT.split())] * 2 and "tokens_out" not in rf.columns
    usage = ScoredItems.from_frame(scored).usage["llm"]
    assert usage["judge_tokens_in"] == sum(len(p.split()) for p in sent[6:9])
    assert usage["judge_tokens_out"] == 3 * len(VERDICT.split())

