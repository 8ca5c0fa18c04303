"""LLM units: one LLM call per attempt. A judge, a pairwise comparison, a verifier.

How a unit's reply is read (the reply format, planted verdicts, missing
verdicts) is pinned in :mod:`llm_connect.pipelines._unit_base`.

Verify, pinned. A :class:`VerifyUnit` checks exactly one previous unit (its
explanation and verdict) and answers yes/no: "is the verdict under review
right?". Its output is the *verified verdict*:

- ``yes``: the verdict under review stands;
- ``no`` on a two-valued scale: the verdict is flipped (yes <-> no, A <-> B);
- ``no`` on a scale with more values: the verifier must add
  ``Correction: <value>``, which becomes the verdict (no valid correction: the
  attempt failed and is retried).

``UnitOutput.agrees`` records the yes/no; pools vote on verified verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._docstrings import PIPELINE_TEXTS, share_parameters
from .._runtime import acall_complete
from ..core import LLMAdapter, LLMResponse, RunConfig, TokenLogprob
from ..errors import ConfigError, JudgeReplyError, LogprobsUnavailableError
from ..grading._parse import Found, UntrustedText, brief_repr, expected_label_value, quote
from ..grading._verdicts import PAIRWISE_ORDERS, pairwise_labels, verdict_for
from ._pipeline import Unit
from ._scales import BooleanScale, CategoricalScale, Scale, clean_verdict, finite_number
from ._template import field_paths, render
from ._trace import PreviousView, TraceRecord, UnitOutput
from ._unit_base import (
    _CORRECTION,
    NodeContext,
    _after_marker,
    _brief,
    _check_int,
    _copied_error,
    _fence_note,
    _Guard,
    _read_reply,
    _Reading,
)

__all__ = ["MAX_RETRIES", "PAIRWISE_PROMPT", "VERIFY_PROMPT", "JudgeUnit", "LLMUnit", "PairwiseUnit", "VerifyUnit"]

#: The most retries an LLM unit may make after a reply that does not parse (each retry is a paid call).
MAX_RETRIES = 10


@share_parameters(texts=PIPELINE_TEXTS)
class LLMUnit(Unit):
    """A unit that makes one LLM call per attempt.

    ``adapter``: the adapter to call (``None``: the pipeline's). ``retries``:
    how many more attempts after a reply that does not parse. ``temperature``
    and ``max_tokens`` go into the call's run config; ``seed``, when set, goes
    into ``model_params["seed"]`` as ``seed + replica`` (so the copies of a
    repeated unit differ reproducibly), and in epoch ``e`` of repeated judging
    as ``seed + e * copies + replica`` (``copies``: how many the graph holds;
    see :class:`~llm_connect.pipelines._unit_base.NodeContext`), so a response
    cache never serves one epoch's call to another. A unit without a seed uses
    the run config's, which each epoch moves (:func:`~llm_connect.grading.reseed`). Note that copies of a unit at
    temperature 0 tend to repeat each other: give an ensemble some temperature.

    Parameters
    ----------
    prompt : str
        The template (``{prompt}``, ``{baseline}``, ``{previous.explanation}`` ...; see the module docs).
    name : str
        The unit's name (in traces, configs and ``{previous.NAME}``).
    explanation : bool, default False
        Ask for an explanation before the verdict.
    adapter : LLMAdapter, optional
        The adapter to call (``None``: the pipeline's).
    retries : int, default 2
        How many more attempts after a reply that does not parse.
    temperature : float, default 0.0
        Goes into the call's run config.
    seed : int, optional
        Goes into ``model_params["seed"]`` (above).
    max_tokens : int, optional
        Goes into the call's run config.
    {origin}

    Raises
    ------
    ConfigError
        A blank prompt, a bad setting, or an adapter without ``complete``.
    """

    calls_llm = True

    def __init__(
        self,
        prompt: str,
        *,
        name: str,
        explanation: bool = False,
        adapter: LLMAdapter | None = None,
        retries: int = 2,
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        origin: str | None = None,
    ) -> None:
        super().__init__(name, origin)
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"unit {name!r}: prompt must be a non-empty template string, got {brief_repr(prompt)}")
        self.fields = field_paths(prompt, f"unit {name!r} prompt")
        self.prompt = prompt
        if not isinstance(explanation, bool):
            raise ConfigError(f"unit {name!r}: explanation must be true or false, got {brief_repr(explanation)}")
        self.explanation = explanation
        if adapter is not None and not callable(getattr(adapter, "complete", None)):
            raise ConfigError(f"unit {name!r}: adapter must have a complete(prompt, run_config) method")
        self.adapter = adapter
        self.retries = _check_int(f"unit {name!r}: retries", retries, 0, MAX_RETRIES)
        if not finite_number(temperature) or temperature < 0:
            raise ConfigError(f"unit {name!r}: temperature must be a finite number >= 0, got {brief_repr(temperature)}")
        self.temperature = float(temperature)
        if seed is not None:
            _check_int(f"unit {name!r}: seed", seed, 0)
        self.seed = seed
        if max_tokens is not None:
            _check_int(f"unit {name!r}: max_tokens", max_tokens, 1)
        self.max_tokens = max_tokens

    def describe_call(self) -> list[str]:
        """The prompt and call settings, as :meth:`~llm_connect.pipelines.Pipeline.describe` shows (and hashes) them.

        Returns
        -------
        list of str
            The lines.
        """
        return [f"  prompt: {self.prompt!r}",
                f"  temperature={self.temperature} retries={self.retries} seed={self.seed}"]

    # what subclasses define
    def instruction(self, ctx: NodeContext) -> str:
        """The reply format asked for, after the rendered prompt (what each kind of unit defines).

        Parameters
        ----------
        ctx : NodeContext
            The node being run.

        Returns
        -------
        str
            The instruction.
        """
        raise NotImplementedError

    def interpret(self, response: LLMResponse, reading: _Reading, ctx: NodeContext) -> UnitOutput:
        """The unit's output from a reply that parsed (what each kind of unit defines).

        Parameters
        ----------
        response : LLMResponse
            The reply.
        reading : _Reading
            Its verdict text and explanation.
        ctx : NodeContext
            The node being run.

        Returns
        -------
        UnitOutput
            The output.

        Raises
        ------
        JudgeReplyError
            A verdict the unit cannot use (the call is tried again, up to ``retries``).
        """
        raise NotImplementedError

    def verdict_scale(self, ctx: NodeContext) -> Scale:
        """The scale the reply's ``Verdict:`` is written on (what copied verdicts are compared by).

        Parameters
        ----------
        ctx : NodeContext
            The node being run.

        Returns
        -------
        Scale
            The scale.
        """
        raise NotImplementedError

    def untrusted(self, ctx: NodeContext) -> UntrustedText:
        """The text this call shows but its judge must not obey: the item fields the prompt reads
        (in name order) and the explanations of the unit's inputs (model text that may quote them).

        Parameters
        ----------
        ctx : NodeContext
            The node being run.

        Returns
        -------
        UntrustedText
            The texts and their fence.
        """
        texts = [ctx.item[f] for f in sorted(self.item_fields()) if isinstance(ctx.item.get(f), str)]
        texts += [o.explanation for o in ctx.inputs if o.explanation]
        return UntrustedText(texts)

    def render_prompt(self, ctx: NodeContext, untrusted: UntrustedText) -> str:
        """The rendered template (item text fenced), the fence note when anything was fenced, the instruction.

        Parameters
        ----------
        ctx : NodeContext
            The node being run.
        untrusted : UntrustedText
            The texts to fence.

        Returns
        -------
        str
            The prompt sent.
        """
        body = render(self.prompt, self.template_context(ctx), ctx.where, untrusted=untrusted).rstrip()
        parts = [body]
        if f" {untrusted.fence}>>>" in body:
            parts.append(_fence_note(untrusted.fence))
        parts.append(self.instruction(ctx))
        return "\n\n".join(parts)

    def template_context(self, ctx: NodeContext) -> dict[str, Any]:
        """The values the template is rendered with: the item's fields and ``previous`` (the inputs' outputs).

        Parameters
        ----------
        ctx : NodeContext
            The node being run.

        Returns
        -------
        dict
            Field name to value.
        """
        context = {k: v for k, v in ctx.item.items() if isinstance(k, str) and k != "previous"}
        context["previous"] = PreviousView(ctx.inputs, ctx.where)
        return context

    def item_fields(self) -> set[str]:
        """The item fields the prompt reads.

        Returns
        -------
        set of str
            Their names.
        """
        return {root for root, _ in self.fields if root != "previous"}

    def check_inputs(self, inputs: Sequence[tuple[str, Unit]], where: str) -> None:
        names = {u.name for _, u in inputs}
        for root, parts in self.fields:
            if root != "previous":
                continue
            shown = "{previous" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts) + "}"
            if not inputs:
                raise ConfigError(f"{where}: the prompt uses {shown} but the unit has no previous unit")
            if not parts:
                continue
            head = parts[0]
            if isinstance(head, int):
                raise ConfigError(f"{where}: {shown}: index a unit name, e.g. {{previous.judge[0]}}")
            if head in PreviousView._single:
                if len(inputs) != 1:
                    first = inputs[0][1].name
                    raise ConfigError(
                        f"{where}: {shown} is ambiguous: the unit has {len(inputs)} inputs; "
                        f"name one, e.g. {{previous.{first}[0].{head}}}"
                    )
                if head == "explanation":
                    _needs_explanation(inputs[0], where, shown)
            elif head != "all":
                if head not in names:
                    raise ConfigError(
                        f"{where}: {shown}: no previous unit is named {head!r} (inputs: {sorted(names)})"
                    )
                same = [(n, u) for n, u in inputs if u.name == head]
                if len(parts) > 1 and isinstance(parts[1], int):
                    if parts[1] >= len(same):
                        raise ConfigError(
                            f"{where}: {shown}: index {parts[1]} is out of range ({len(same)} inputs from {head!r})"
                        )
                    if len(parts) > 2 and parts[2] == "explanation":
                        _needs_explanation(same[parts[1]], where, shown)

    def call_config(self, ctx: NodeContext) -> RunConfig:
        """The run config of the unit's call: the run's, with the unit's temperature, ``max_tokens`` and seed.

        Parameters
        ----------
        ctx : NodeContext
            The node being run (its run config and seed offset).

        Returns
        -------
        RunConfig
            The call's.
        """
        params = dict(ctx.run_config.model_params)
        if self.seed is not None:
            params["seed"] = self.seed + ctx.seed_offset
        changes: dict[str, Any] = {"temperature": self.temperature, "model_params": params}
        if self.max_tokens is not None:
            changes["max_tokens"] = self.max_tokens
        return ctx.run_config.replace(**changes)

    def _skip(self, ctx: NodeContext) -> UnitOutput | None:
        failed = [o.node for o in ctx.inputs if not o.ok]
        if not failed:
            return None
        reason = f"no call: input {', '.join(failed)} has no verdict"
        ctx.trace.add(
            TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="skipped",
                        inputs=tuple(o.node for o in ctx.inputs), error=reason)
        )
        return UnitOutput(node=ctx.node, unit=self.name, kind=self.kind, ok=False, error=reason)

    async def execute(self, ctx: NodeContext) -> UnitOutput:
        """Run the unit on one item: render the prompt, call, parse (retrying a reply that does not parse).

        Every attempt is added to the item's trace. A unit whose input has no verdict is skipped (no call).

        Parameters
        ----------
        ctx : NodeContext
            The node being run.

        Returns
        -------
        UnitOutput
            The output; ``ok=False`` with the reason when no reply could be used.
        """
        skipped = self._skip(ctx)
        if skipped is not None:
            return skipped
        untrusted = self.untrusted(ctx)
        guard = _Guard(untrusted, self.verdict_scale(ctx))
        prompt = self.render_prompt(ctx, untrusted)
        config = self.call_config(ctx)
        inputs = tuple(o.node for o in ctx.inputs)
        reason = ""
        for attempt in range(self.retries + 1):
            asked = prompt if attempt == 0 else (
                f"{prompt}\n\nYour previous reply could not be used ({untrusted.defang(_brief(reason))}). "
                "Reply again in exactly the format above."
            )
            try:
                response = await acall_complete(ctx.adapter, asked, config)
            except Exception as exc:
                ctx.trace.add(
                    TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="error", attempt=attempt,
                                inputs=inputs, prompt=asked, error=f"{type(exc).__name__}: {exc}",
                                adapter_id=getattr(ctx.adapter, "adapter_id", None),
                                model_id=getattr(ctx.adapter, "model_id", None))
                )
                raise
            usage = {
                "adapter_id": response.adapter_id,
                "model_id": response.model_id,
                "tokens_in": response.tokens_in,
                "tokens_out": response.tokens_out,
                "cost_usd": response.cost_usd,
                "latency_ms": response.latency_ms,
                "cached": response.cached,
            }
            try:
                reading = _read_reply(response.content, want_explanation=self.explanation, guard=guard)
                try:
                    out = self.interpret(response, reading, ctx)
                except JudgeReplyError as exc:
                    if not reading.bare:
                        raise
                    raise JudgeReplyError(
                        f"the reply has no 'Verdict:' line and is not itself a verdict ({exc})",
                        reply=response.content,
                    ) from exc
            except JudgeReplyError as exc:
                reason = str(exc)
                ctx.trace.add(
                    TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="unparsed", attempt=attempt,
                                inputs=inputs, prompt=asked, reply=response.content, error=reason, **usage)
                )
                if isinstance(exc, LogprobsUnavailableError):
                    break  # asking again cannot help
                continue
            ctx.trace.add(
                TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="ok", attempt=attempt,
                            inputs=inputs, prompt=asked, reply=response.content, value=out.value,
                            verdict=out.verdict, score=out.score, explanation=out.explanation or None, **usage)
            )
            return out
        return UnitOutput(
            node=ctx.node, unit=self.name, kind=self.kind, ok=False,
            error=f"no usable reply after {attempt + 1} attempt(s): {reason}",
        )


def _needs_explanation(inp: tuple[str, Unit], where: str, shown: str) -> None:
    node, unit = inp
    if isinstance(unit, LLMUnit) and not unit.explanation:
        raise ConfigError(
            f"{where}: {shown} reads the explanation of {node}, which asks for none; give it explanation=True"
        )


def _format_lines(explanation: bool, verdict_hint: str, extra: str = "") -> str:
    lines = ["Reply in exactly this format:"]
    if explanation:
        lines.append("Explanation: <your reasoning, in a few sentences>")
    lines.append(f"Verdict: <{verdict_hint}>")
    if extra:
        lines.append(extra)
    return "\n".join(lines)


class JudgeUnit(LLMUnit):
    """Asks for a verdict on ``scale``, optionally after an explanation.

    ``scoring="verdict"`` (default) scores the parsed verdict's value.
    ``scoring="logprob"`` still requires a verdict that parses, and scores the
    probability-weighted value of the scale's labels at the verdict's position
    (from the adapter's top logprobs; an adapter that returns none leaves the
    unit without a verdict, never a silent fallback). Not for continuous scales.

    Parameters
    ----------
    prompt : str
        The template.
    scale : Scale
        The verdict's scale.
    name : str, default "judge"
        The unit's name.
    explanation : bool, default False
        Ask for an explanation before the verdict.
    scoring : {"verdict", "logprob"}, default "verdict"
        How the verdict is scored (above).
    top_logprobs : int, default 10
        How many most probable tokens a ``"logprob"`` score reads.
    **options
        :class:`LLMUnit`'s (``adapter``, ``retries``, ``temperature``, ``seed``, ``max_tokens``).

    Raises
    ------
    ConfigError
        A ``scale`` that is not a :class:`Scale`, an unknown ``scoring``, or ``"logprob"`` on a continuous
        scale.

    Examples
    --------
    >>> from llm_connect.pipelines import BooleanScale
    >>> unit = JudgeUnit("Is {candidate} a right answer to {prompt}?", BooleanScale(), explanation=True)
    >>> unit.describe(), sorted(unit.item_fields())
    ('judge: boolean "yes" or "no" + explanation', ['candidate', 'prompt'])
    """

    kind = "judge"

    def __init__(
        self,
        prompt: str,
        scale: Scale,
        *,
        name: str = "judge",
        explanation: bool = False,
        scoring: str = "verdict",
        top_logprobs: int = 10,
        **options: Any,
    ) -> None:
        super().__init__(prompt, name=name, explanation=explanation, **options)
        if not isinstance(scale, Scale):
            raise ConfigError(f"unit {name!r}: scale must be a Scale (BooleanScale(), CategoricalScale([...])...)")
        self.scale = scale
        if scoring not in ("verdict", "logprob"):
            raise ConfigError(f"unit {name!r}: scoring must be 'verdict' or 'logprob', got {brief_repr(scoring)}")
        if scoring == "logprob" and self.logprob_labels() is None:
            raise ConfigError(f"unit {name!r}: logprob scoring needs a discrete scale, not {scale!r}")
        self.scoring = scoring
        self.top_logprobs = _check_int(f"unit {name!r}: top_logprobs", top_logprobs, 1)

    def describe(self) -> str:
        text = f"{self.kind}: {self.scale.kind} {self.scale.describe()}"
        if self.explanation:
            text += " + explanation"
        if self.scoring == "logprob":
            text += " (logprob)"
        return text

    def output_scale(self, input_scales: Sequence[Scale | None], where: str) -> Scale:
        return self.scale

    def reply_scale(self) -> Scale:
        """The scale the reply is written on (a pairwise unit's differs from its output's).

        Returns
        -------
        Scale
            The scale.
        """
        return self.scale

    def logprob_labels(self) -> dict[str, float] | None:
        """The reply's labels and their 0..1 values, for a ``"logprob"`` score (``None``: a continuous scale).

        Returns
        -------
        dict of str to float or None
            The labels' values.
        """
        return self.scale.label_values()

    def to_value(self, reply_value: Any) -> Any:
        """The output's value of a parsed reply (the same for a judge unit; a pairwise unit maps A/B to
        baseline/candidate).

        Parameters
        ----------
        reply_value : object
            The value parsed on :meth:`reply_scale`.

        Returns
        -------
        object
            The value on the output's scale.
        """
        return reply_value

    def call_config(self, ctx: NodeContext) -> RunConfig:
        config = super().call_config(ctx)
        return config.replace(top_logprobs=self.top_logprobs) if self.scoring == "logprob" else config

    def verdict_scale(self, ctx: NodeContext) -> Scale:
        return self.reply_scale()

    def instruction(self, ctx: NodeContext) -> str:
        scale = self.reply_scale()
        return f"Answer with {scale.describe()}.\n" + _format_lines(self.explanation, scale.describe())

    def interpret(self, response: LLMResponse, reading: _Reading, ctx: NodeContext) -> UnitOutput:
        value = self.to_value(self.reply_scale().parse(reading.verdict_text))
        score = self.scale.normalize(value)
        details: dict[str, Any] = {}
        if self.scoring == "logprob":
            labels = self.logprob_labels() or {}
            tokens: Sequence[TokenLogprob] | None = response.logprobs
            if tokens:
                tokens = _after_marker(tokens, response.content, reading.verdict_end)
                if not tokens:
                    raise JudgeReplyError("no generated token follows the 'Verdict:' marker", reply=response.content)
            try:
                score, probs = expected_label_value(tokens, labels, adapter_id=repr(response.adapter_id))
            except ArithmeticError as exc:  # absurd logprobs (overflow, all underflowing to 0)
                raise JudgeReplyError(f"the reply's logprobs are unusable: {exc}", reply=response.content) from exc
            if not (0.0 <= score <= 1.0):
                raise JudgeReplyError(f"the reply's logprobs give the score {score!r}", reply=response.content)
            details["label_probs"] = probs
        return UnitOutput(
            node=ctx.node, unit=self.name, kind=self.kind, ok=True, value=value, verdict=self.scale.label(value),
            score=score, explanation=reading.explanation if self.explanation else "", scale=self.scale,
            details=details,
        )


PAIRWISE_PROMPT = """Question:
{prompt}

Answer A:
{answer_a}

Answer B:
{answer_b}

Which answer answers the question better? Judge correctness first; do not prefer an answer for its length,
its formatting or its position."""


class PairwiseUnit(JudgeUnit):
    """Which of two answers is better: the item's ``baseline`` and ``candidate``, shown as A and B.

    ``order="baseline-first"`` shows the baseline as A; ``"candidate-first"`` the
    candidate. The template may use ``{answer_a}`` and ``{answer_b}`` (and any
    item field). The reply is ``A`` or ``B`` (or ``tie`` with ``allow_tie``);
    the output's value is ``"candidate"``, ``"baseline"`` or ``"tie"``, worth
    1.0, 0.0 and 0.5, so verdicts from both orders vote together.

    Parameters
    ----------
    prompt : str, default PAIRWISE_PROMPT
        The template.
    name : str, default "pairwise"
        The unit's name.
    order : {"baseline-first", "candidate-first"}, default "baseline-first"
        Which answer is shown as A.
    allow_tie : bool, default False
        Offer ``tie``.
    **options
        :class:`JudgeUnit`'s and :class:`LLMUnit`'s.

    Raises
    ------
    ConfigError
        An unknown ``order``.
    """

    kind = "pairwise"
    ORDERS = PAIRWISE_ORDERS

    def __init__(
        self,
        prompt: str = PAIRWISE_PROMPT,
        *,
        name: str = "pairwise",
        order: str = "baseline-first",
        allow_tie: bool = False,
        **options: Any,
    ) -> None:
        if order not in self.ORDERS:
            raise ConfigError(f"unit {name!r}: order must be one of {list(self.ORDERS)}, got {brief_repr(order)}")
        self.order = order
        self.allow_tie = bool(allow_tie)
        labels = ["baseline", "tie", "candidate"] if allow_tie else ["baseline", "candidate"]
        self._reply_scale = CategoricalScale(list(pairwise_labels(self.allow_tie)))
        super().__init__(prompt, CategoricalScale(labels), name=name, **options)

    def describe(self) -> str:
        return f"pairwise ({self.order})" + (" + explanation" if self.explanation else "")

    def reply_scale(self) -> Scale:
        return self._reply_scale

    def to_value(self, reply_value: Any) -> Any:
        return verdict_for(reply_value, self.order)  # as PairwiseJudge reads its winner

    def logprob_labels(self) -> dict[str, float]:
        return {lab: self.scale.normalize(self.to_value(lab)) for lab in self._reply_scale.labels}

    def item_fields(self) -> set[str]:
        return (super().item_fields() - {"answer_a", "answer_b"}) | {"baseline", "candidate"}

    def template_context(self, ctx: NodeContext) -> dict[str, Any]:
        context = super().template_context(ctx)
        for key in ("baseline", "candidate"):
            if key not in context:
                raise ConfigError(f"{ctx.where}: a pairwise unit needs the item field {{{key}}}")
        first, second = ("baseline", "candidate") if self.order == "baseline-first" else ("candidate", "baseline")
        context["answer_a"], context["answer_b"] = context[first], context[second]
        return context


VERIFY_PROMPT = """Check the verdict below and the explanation given for it.

Explanation under review:
{previous.explanation}"""


class VerifyUnit(LLMUnit):
    """Checks one previous unit's explanation and verdict; answers yes (right) or no (wrong).

    Its output is the verified verdict (see the module docs): the verdict under
    review when the verifier agrees, else flipped (two-valued scales) or the
    verifier's ``Correction:``. The verdict under review is always shown to the
    verifier, after the prompt.

    Parameters
    ----------
    prompt : str, default VERIFY_PROMPT
        The template (it may read ``{previous.explanation}``).
    name : str, default "verify"
        The unit's name.
    **options
        :class:`LLMUnit`'s.
    """

    kind = "verify"
    checks_one_verdict = True

    def __init__(self, prompt: str = VERIFY_PROMPT, *, name: str = "verify", **options: Any) -> None:
        super().__init__(prompt, name=name, **options)
        self._answer = BooleanScale()

    def describe(self) -> str:
        return "verify: yes/no" + (" + explanation" if self.explanation else "")

    def check_inputs(self, inputs: Sequence[tuple[str, Unit]], where: str) -> None:
        if not inputs:
            raise ConfigError(f"{where}: a verify unit needs a previous unit whose verdict it checks")
        if len(inputs) != 1:
            raise ConfigError(
                f"{where}: a verify unit checks exactly one previous verdict, but it has {len(inputs)} inputs; "
                "connect it with 'broadcast' (one verifier per unit) or follow a single unit"
            )
        node, unit = inputs[0]
        if not isinstance(unit, (JudgeUnit, VerifyUnit)):
            raise ConfigError(
                f"{where}: a verify unit checks a judge, pairwise or verify unit, not {node} ({unit.kind})"
            )
        super().check_inputs(inputs, where)

    def output_scale(self, input_scales: Sequence[Scale | None], where: str) -> Scale | None:
        return input_scales[0] if input_scales else None

    def instruction(self, ctx: NodeContext) -> str:
        prev = ctx.inputs[0]
        scale = prev.scale
        head = (
            f"The verdict under review is: {prev.verdict}\n"
            + (f"(It was asked for as {scale.describe()}.)\n" if scale is not None else "")
            + "Is the verdict under review right?\n"
        )
        extra = ""
        if scale is not None and not scale.binary:
            extra = f"Correction: <only when your verdict is no: the right verdict, {scale.describe()}>"
        return head + _format_lines(self.explanation, '"yes" if it is right, "no" if it is wrong', extra)

    def verdict_scale(self, ctx: NodeContext) -> Scale:
        return self._answer

    def interpret(self, response: LLMResponse, reading: _Reading, ctx: NodeContext) -> UnitOutput:
        prev = ctx.inputs[0]
        scale = prev.scale
        agrees = self._answer.parse(reading.verdict_text)
        if agrees or scale is None:
            value = prev.value
        elif scale.binary:
            value = scale.flip(prev.value)
        else:
            reply = response.content
            guard = _Guard(reading.guard.untrusted if reading.guard else UntrustedText(), scale)
            own = guard.own_line(_CORRECTION, reply, guard.planted_corrections)
            if own is False:
                raise _copied_error(reply, "'Correction:' lines")
            if own is None:
                raise JudgeReplyError(
                    f"the verifier said no but gave no 'Correction:' ({scale.describe()}): {quote(reply)}",
                    reply=reply,
                )
            assert isinstance(own, Found)
            value = _parse_on(scale, own.value)
            if scale.label(value) == scale.label(prev.value):
                raise JudgeReplyError(
                    f"the verifier said no but its correction repeats the verdict {prev.verdict!r}",
                    reply=response.content,
                )
        score = scale.normalize(value) if scale is not None else prev.score
        return UnitOutput(
            node=ctx.node, unit=self.name, kind=self.kind, ok=True, value=value,
            verdict=scale.label(value) if scale is not None else prev.verdict, score=score,
            explanation=reading.explanation if self.explanation else "", agrees=agrees, scale=scale,
            details={"checked": prev.node, "verdict_checked": prev.verdict},
        )


def _parse_on(scale: Scale, text: str) -> Any:
    value = scale.parse(clean_verdict(text))
    return value
