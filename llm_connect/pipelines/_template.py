"""Prompt templates: plain ``str.format`` fields, never ``eval``.

A field is a name, then attribute names and integer indices:
``{candidate}``, ``{previous.explanation}``, ``{previous.judge[2].verdict}``.
Attributes are looked up only on the package's own view objects (never on a
string or any other object), indices only on their lists; ``{x.__class__}``,
``{x[key]}`` and ``{0}`` are refused. A field the item does not hold is a
:class:`ConfigError` naming it. Write ``{{`` and ``}}`` for literal braces.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["TemplateView", "ViewList", "field_paths", "render"]

_FIELD = re.compile(r"^(?P<root>[A-Za-z_][A-Za-z0-9_]*)(?P<rest>(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)$")
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")

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


def _parse_field(field: str, where: str) -> tuple[str, list[Part]]:
    match = _FIELD.match(field)
    if match is None:
        raise ConfigError(
            f"{where}: template field {{{field}}} is not allowed; use a name with attributes and integer "
            "indices only, e.g. {candidate}, {previous.explanation}, {previous.judge[2]}"
        )
    parts: list[Part] = []
    for attr, index in _PART.findall(match.group("rest")):
        parts.append(attr if attr else int(index))
    return match.group("root"), parts


def field_paths(template: str, where: str = "template") -> list[tuple[str, list[Part]]]:
    """Every field of ``template`` as ``(root, parts)``; a malformed template is a :class:`ConfigError`."""
    if not isinstance(template, str):
        raise ConfigError(f"{where}: a prompt template must be a string, got {type(template).__name__}")
    out: list[tuple[str, list[Part]]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(f"{where}: bad template ({exc}); write {{{{ and }}}} for literal braces") from None
    for _literal, field, spec, _conversion in parsed:
        if field is None:
            continue
        if field == "":
            raise ConfigError(f"{where}: empty template field {{}}; name a field such as {{candidate}}")
        out.append(_parse_field(field, where))
        if spec:
            out.extend(field_paths(spec, where))
    return out


def _show(root: str, parts: Sequence[Part]) -> str:
    text = root
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else f".{p}"
    return "{" + text + "}"


class _Formatter(string.Formatter):
    def __init__(self, context: Mapping[str, Any], where: str) -> None:
        self.context = context
        self.where = where

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        root, parts = _parse_field(field_name, self.where)
        return resolve(self.context, root, parts, self.where), root

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion not in (None, "s", "r"):
            raise ConfigError(f"{self.where}: conversion !{conversion} is not allowed in a template (use !s or !r)")
        return super().convert_field(value, conversion)


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


def render(template: str, context: Mapping[str, Any], where: str = "template") -> str:
    """``template`` filled from ``context`` with plain formatting."""
    field_paths(template, where)  # refuses malformed templates before any lookup
    return _Formatter(context, where).vformat(template, (), {})
