"""Prompt templates: plain ``str.format`` fields, never ``eval``.

A field is a name, then attribute names and integer indices:
``{candidate}``, ``{previous.explanation}``, ``{previous.judge[2].verdict}``.
Attributes and indices are for ``previous`` only (the package's own view
objects); an item field is a plain value, so ``{candidate.__class__}``,
``{candidate[0]}``, ``{x[key]}`` and ``{0}`` are refused, and so is any
attribute starting with ``_``. A conversion is ``!s`` or ``!r``. A format spec
is the standard mini-language (``{previous.score:.2f}``, ``{candidate:.500}``)
with no nested field and a width and precision of at most
:data:`MAX_FORMAT_WIDTH`. All of this is checked when the template is read (a
unit's constructor, :func:`~llm_connect.pipelines.from_config`), each mistake a
:class:`ConfigError`. A field the item does not hold is a :class:`ConfigError`
naming it when the template is rendered. Write ``{{`` and ``}}`` for literal
braces.

Rendered with an :class:`~llm_connect.grading._parse.UntrustedText`, every
item field that holds text is fenced (``<<<CANDIDATE fence>>>`` ...
``<<<END CANDIDATE fence>>>``, the label being the field's name upper-cased)
and everything else substituted is defanged, so the item's text cannot close
its fence.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..grading._parse import UntrustedText

__all__ = ["MAX_FORMAT_WIDTH", "TemplateView", "ViewList", "field_paths", "render"]

#: The largest width or precision a template's format spec may ask for (``{candidate:>10000}``).
MAX_FORMAT_WIDTH = 10_000

_FIELD = re.compile(r"^(?P<root>[A-Za-z_][A-Za-z0-9_]*)(?P<rest>(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)\Z", re.ASCII)
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]", re.ASCII)
_SPEC = re.compile(  # [[fill]align][sign][z][#][0][width][grouping][.precision][type]
    r"^(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d+)?[,_]?(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?\Z",
    re.DOTALL | re.ASCII,
)
_VIEW_ROOTS = frozenset({"previous"})  # the roots whose values are view objects (attributes, indices)

Part = str | int  # an attribute name or an index


class TemplateView:
    """A plain object templates may look into: only the names in ``fields`` are visible."""

    fields: tuple[str, ...] = ()

    def template_attr(self, name: str) -> Any:
        raise NotImplementedError

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class ViewList(TemplateView, Sequence[Any]):
    """A list templates may index (``{previous.judge[2]}``); shown as its items, one per line."""

    def __init__(self, items: Sequence[Any], what: str) -> None:
        self._items = list(items)
        self.what = what

    def __getitem__(self, index: Any) -> Any:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __str__(self) -> str:
        return "\n\n".join(str(x) for x in self._items)


def _shown_field(field: str) -> str:
    return "{" + (field if len(field) <= 60 else field[:59] + "…") + "}"


def _parse_field(field: str, where: str) -> tuple[str, list[Part]]:
    match = _FIELD.match(field)
    if match is None:
        raise ConfigError(
            f"{where}: template field {_shown_field(field)} is not allowed; use a name with attributes and integer "
            "indices only, e.g. {candidate}, {previous.explanation}, {previous.judge[2]}"
        )
    parts: list[Part] = []
    for attr, index in _PART.findall(match.group("rest")):
        parts.append(attr if attr else int(index))
    root = match.group("root")
    if parts and root not in _VIEW_ROOTS:
        raise ConfigError(
            f"{where}: template field {_shown_field(field)} is not allowed: an item field is a plain value "
            f"(write {{{root}}}); attributes and indices are for previous units only, e.g. {{previous.judge[2]}}"
        )
    if any(isinstance(p, str) and p.startswith("_") for p in parts):
        raise ConfigError(f"{where}: template field {_shown_field(field)} is not allowed: no attribute starts with _")
    return root, parts


def check_spec(spec: str, where: str) -> None:
    """Refuse a format spec that is not the standard mini-language, or pads or extends past :data:`MAX_FORMAT_WIDTH`."""
    if not spec:
        return
    shown = spec if len(spec) <= 40 else spec[:39] + "…"
    if "{" in spec or "}" in spec:
        raise ConfigError(f"{where}: format spec {shown!r} holds a field; a format spec must be literal")
    match = _SPEC.match(spec)
    if match is None:
        raise ConfigError(
            f"{where}: format spec {shown!r} is not a standard format spec (e.g. {{previous.score:.2f}})"
        )
    for what in ("width", "precision"):
        digits = match.group(what)
        if digits is not None and (len(digits) > 6 or int(digits) > MAX_FORMAT_WIDTH):
            raise ConfigError(
                f"{where}: format spec {shown!r}: the {what} is over the limit of {MAX_FORMAT_WIDTH} characters"
            )


def field_paths(template: str, where: str = "template") -> list[tuple[str, list[Part]]]:
    """Every field of ``template`` as ``(root, parts)``; a malformed template is a :class:`ConfigError`."""
    if not isinstance(template, str):
        raise ConfigError(f"{where}: a prompt template must be a string, got {type(template).__name__}")
    out: list[tuple[str, list[Part]]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(f"{where}: bad template ({exc}); write {{{{ and }}}} for literal braces") from None
    for _literal, field, spec, conversion in parsed:
        if field is None:
            continue
        if field == "":
            raise ConfigError(f"{where}: empty template field {{}}; name a field such as {{candidate}}")
        out.append(_parse_field(field, where))
        if conversion not in (None, "s", "r"):
            raise ConfigError(f"{where}: conversion !{conversion} is not allowed in a template (use !s or !r)")
        check_spec(spec or "", where)
    return out


def _show(root: str, parts: Sequence[Part]) -> str:
    text = root
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else f".{p}"
    return "{" + text + "}"


@dataclass(frozen=True)
class _ItemText:
    """An item field's text on its way through the formatter, to be fenced once formatted."""

    value: str
    label: str


class _Formatter(string.Formatter):
    def __init__(self, context: Mapping[str, Any], where: str, untrusted: UntrustedText | None) -> None:
        self.context = context
        self.where = where
        self.untrusted = untrusted

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        root, parts = _parse_field(field_name, self.where)
        value = resolve(self.context, root, parts, self.where)
        if self.untrusted is not None and root not in _VIEW_ROOTS and isinstance(value, str):
            value = _ItemText(value, root.upper())
        return value, root

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion not in (None, "s", "r"):
            raise ConfigError(f"{self.where}: conversion !{conversion} is not allowed in a template (use !s or !r)")
        if isinstance(value, _ItemText):
            return _ItemText(super().convert_field(value.value, conversion), value.label)
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        check_spec(format_spec, self.where)
        inner = value.value if isinstance(value, _ItemText) else value
        try:
            text = format(inner, format_spec)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{self.where}: format spec {format_spec!r} does not apply to a {type(inner).__name__}: {exc}"
            ) from None
        if self.untrusted is None:
            return text
        if isinstance(value, _ItemText):
            return self.untrusted.block(value.label, text)
        return self.untrusted.defang(text)


def resolve(context: Mapping[str, Any], root: str, parts: Sequence[Part], where: str) -> Any:
    """The value of one field in ``context``; what is missing is a :class:`ConfigError` naming the field."""
    if root not in context:
        have = ", ".join(sorted(context)) or "nothing"
        raise ConfigError(f"{where}: template field {_show(root, [])} is missing; the item has {have}")
    value = context[root]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise ConfigError(f"{where}: template field {_show(root, [])} is empty (None/NaN) in this item")
    for k, part in enumerate(parts):
        shown = _show(root, parts[: k + 1])
        if isinstance(part, int):
            if not isinstance(value, ViewList):
                raise ConfigError(f"{where}: {shown}: only a unit list such as previous.judge can be indexed")
            if part >= len(value):
                raise ConfigError(f"{where}: {shown}: index {part} is out of range ({len(value)} {value.what})")
            value = value[part]
        else:
            if not isinstance(value, TemplateView) or part not in value.fields:
                offered = ", ".join(value.fields) if isinstance(value, TemplateView) else "none"
                raise ConfigError(f"{where}: {shown}: no such field (offered here: {offered})")
            value = value.template_attr(part)
    return value


def render(
    template: str, context: Mapping[str, Any], where: str = "template", *, untrusted: UntrustedText | None = None
) -> str:
    """``template`` filled from ``context`` with plain formatting.

    With ``untrusted``, each item field holding text is fenced as that field
    (see the module docs) and every other substituted value is defanged.
    """
    field_paths(template, where)  # refuses malformed templates before any lookup
    return _Formatter(context, where, untrusted).vformat(template, (), {})
