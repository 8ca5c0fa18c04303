"""``calibrate`` with the embedding judge on QA-sized data, against a plain ``encode`` of its texts.

15,000 synthetic QA rows are generated from a seed (3,000 questions x 5 answers,
as when five QA models answer each question): each question has 1-4 short
references joined with ``|``; each answer has 5-300 words (log-uniform) from a
seeded vocabulary (common English words and made-up names), and one answer
in six is a copy of a reference, so texts repeat across rows as in real data. We measure, in one process:

- ``plain encode``: ``SentenceTransformer.encode`` (all-MiniLM-L6-v2, CPU, the
  same ``batch_size``) over the distinct texts the embedding judge embeds
  (each reference after splitting on ``|``, each answer), timed before and after
  the calibrate run (the machine may be shared: both are printed);
- ``calibrate``: the whole :func:`llm_connect.calibrate` run with the judges
  ``exact`` (``ExactMatchJudge(normalizer="squad")``) and ``embedding``
  (``EmbeddingSimilarityJudge(SentenceTransformerEmbedder())``), both with
  ``reference_sep="|"``, ``probes=None`` and ``n_boot=200`` (the defaults of the
  CLI are ``probes="auto"``, ``n_boot=1000``; bias probes embed their
  perturbed answers as more texts);
- ``row by row``: the embedding judge as it ran before the pre-pass (one
  embedder call per row, under the embedder's lock) on the first ``--subset``
  rows, for the before/after figure.

Run: ``python benchmarks/calibrate_embedding.py [--questions 3000] [--answers 5] [--subset 1000]``.
Target: calibrate within 1.3x of the plain encode.
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import time
from typing import Any

from llm_connect import EmbeddingSimilarityJudge, ExactMatchJudge, calibrate, judge_many
from llm_connect.adapters import SentenceTransformerEmbedder

_WORDS = """the of and to in is was for that on with as by at from his her their it an be are were which this
or had not but also first one two three new more after other into its who all time year years city state
world war river church school team party government music film album game season series league house family
people country island king queen army history company station line road bridge north south east west
century empire university college language book novel author poet painter artist song band record
player club cup final title award prize election president minister council court law act treaty
province county district village town capital port coast sea lake mountain valley forest desert
plant animal bird fish species gene cell body heart blood disease drug water fire earth air light
sound color gold silver iron stone wood glass paper money bank trade market price tax oil gas coal
power energy engine car ship plane train rail bus airport space star moon sun planet orbit rocket
"""
_COMMON = _WORDS.split()


def vocabulary(rng: random.Random, size: int = 600) -> list[str]:
    """Common English words and made-up names (names split into several word pieces, as real ones do)."""
    syllables = ["ka", "lo", "mi", "ren", "tas", "vo", "shi", "pra", "dun", "el", "or", "ith", "be", "qua", "zor"]
    names: set[str] = set()
    while len(names) < size - len(_COMMON):
        names.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))).capitalize())
    return sorted(_COMMON) + sorted(names)


def make_rows(questions: int, answers: int, seed: int) -> list[dict[str, Any]]:
    """``questions`` x ``answers`` QA rows, deterministic in ``seed``."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    rows = []
    for q in range(questions):
        topic = rng.sample(vocab[len(_COMMON):], 4) + rng.sample(_COMMON, 8)
        refs = [" ".join(rng.choices(topic, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
        prompt = f"Question {q}: " + " ".join(rng.choices(topic + vocab[:200], k=rng.randint(6, 14))) + "?"
        for m in range(answers):
            if rng.random() < 1 / 6:
                answer = rng.choice(refs)  # an extractive model copying a reference
            else:
                n_words = round(math.exp(rng.uniform(math.log(5), math.log(300))))
                answer = " ".join(rng.choices(topic + _COMMON, k=n_words)).capitalize() + "."
            overlap = any(r.split()[0] in answer.lower().split() for r in refs)
            human = "yes" if rng.random() < (0.8 if overlap else 0.2) else "no"
            rows.append({"id": f"q{q}-m{m}", "prompt": prompt, "baseline": "|".join(refs), "candidate": answer,
                         "candidate_model": f"model-{m}", "human": human})
    return rows


class RowByRowEmbeddingJudge(EmbeddingSimilarityJudge):
    """The embedding judge without the pre-pass: one embedder call per row (the path before it)."""

    aprepare_run = None  # type: ignore[assignment]


def timed(label: str, run: Any) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:8.1f} s", flush=True)
    return seconds, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3000)
    parser.add_argument("--answers", type=int, default=5)
    parser.add_argument("--subset", type=int, default=1000, help="rows for the row-by-row figure (0: skip)")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass, in both runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows = make_rows(args.questions, args.answers, args.seed)
    embedder = SentenceTransformerEmbedder(batch_size=args.batch_size).load()
    embedding = EmbeddingSimilarityJudge(embedder, reference_sep="|")
    distinct = list(dict.fromkeys(t for r in rows for t in embedding.texts_for(r["baseline"], r["candidate"])))
    words = [len(t.split()) for t in distinct]
    print(f"rows {len(rows):,}; distinct texts {len(distinct):,} (of "
          f"{sum(len(embedding.texts_for(r['baseline'], r['candidate'])) for r in rows):,} embedded row by row); "
          f"words a text: mean {sum(words) / len(words):.0f}, max {max(words)}")

    from sentence_transformers import SentenceTransformer

    from llm_connect.adapters import default_embedding_model_path

    plain = SentenceTransformer(str(default_embedding_model_path()), device="cpu", local_files_only=True)
    plain.encode(distinct[:64], batch_size=args.batch_size)  # warm both models up
    embedder.embed(distinct[:64])

    def encode() -> Any:
        return plain.encode(distinct, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True)

    judges = {"exact": ExactMatchJudge(normalizer="squad", reference_sep="|"), "embedding": embedding}

    def run_calibrate() -> Any:
        return calibrate(judges, rows, human="human", reference_sep="|", probes=None, n_boot=args.n_boot,
                         progress=False)

    before, _ = timed("plain encode of the distinct texts (before)", encode)
    cal, report = timed(f"calibrate exact,embedding (n_boot={args.n_boot})", run_calibrate)
    after, _ = timed("plain encode of the distinct texts (after)", encode)
    base = (before + after) / 2
    status = report.scores["status_embedding"].value_counts().to_dict()
    print(f"embedding rows by status: {status}")
    print(f"ratio calibrate / plain encode: {cal / base:.2f} (mean of before/after; {cal / before:.2f} and "
          f"{cal / after:.2f} against each); {len(rows) / cal:,.0f} rows/s")

    if args.subset:
        subset = rows[: args.subset]
        sub_distinct = len({t for r in subset for t in embedding.texts_for(r["baseline"], r["candidate"])})
        old = RowByRowEmbeddingJudge(embedder, reference_sep="|")
        slow, slow_frame = timed(f"row by row, first {len(subset):,} rows", lambda: judge_many(old, subset,
                                                                                             progress=False))
        fast, fast_frame = timed(f"batched (pre-pass), first {len(subset):,} rows",
                                 lambda: judge_many(embedding, subset, progress=False))
        gap = (fast_frame["quality_score"] - slow_frame["quality_score"]).abs().max()
        print(f"row by row: {len(subset) / slow:,.1f} rows/s; batched: {len(subset) / fast:,.1f} rows/s "
              f"({sub_distinct:,} distinct texts); {slow / fast:.1f}x faster; largest score difference {gap:.2e}")
        print(f"row by row extrapolated to {len(rows):,} rows: {slow * len(rows) / len(subset) / 60:.1f} min")


if __name__ == "__main__":
    main()
