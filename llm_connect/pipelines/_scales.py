"""Scales: the typed answer a unit asks for, parsed strictly and mapped to 0..1.

A scale writes the instruction ("one of: yes, no"), parses a reply's verdict
text strictly (a label that was not offered is a :class:`JudgeReplyError`,
never a guess), names the tokens that carry its value (for logprob scoring
with :func:`llm_connect.grading.expected_label_value`) and normalises a value
to 0..1.

Value maps, pinned:

- :class:`BooleanScale`: ``yes`` is 1.0 and ``no`` 0.0 unless ``values`` says otherwise.
- :class:`CategoricalScale`: labels are listed **worst first, like a Likert
  scale**: without ``values``, label ``k`` of ``n`` is worth ``k / (n - 1)``
  (first 0.0, last 1.0). So ``["yes", "no"]`` asked as "does it contain
  errors?" scores "no" (no errors) 1.0. Give ``values={"no": 1.0, "yes": 0.0}``
  to say it explicitly; explicit is better when the order is not obvious.
- :class:`LikertScale`: ``min..max`` maps linearly to 0..1.
- :class:`ContinuousScale`: ``low..high`` (default 0..1) maps linearly; out-of-range
  replies are rejected, not clamped.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, JudgeReplyError
from ..grading._parse import brief_repr, quote

__all__ = ["BooleanScale", "CategoricalScale", "ContinuousScale", "LikertScale", "Scale", "clean_verdict"]

_EDGE = " \t\r\n*_`'\"“”‘’<>[](){}"
_TRAILING = ".,;:!"


def clean_verdict(text: str) -> str:
    """``text`` without surrounding whitespace, markdown emphasis, quotes, brackets and trailing punctuation."""
    previous = None
    while previous != text:
        previous = text
        text = text.strip(_EDGE).rstrip(_TRAILING)
    return text


def finite_number(value: Any) -> bool:
    """Is ``value`` an int or float (not a bool) with a finite float value (an int too large for a float is not)?"""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_unit_value(what: str, value: Any) -> float:
    if not finite_number(value):
        raise ConfigError(f"{what} must be a number in 0.0..1.0, got {brief_repr(value)}")
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{what} must be in 0.0..1.0, got {brief_repr(value)}")
    return float(value)


class Scale(ABC):
    """The typed answer a unit asks for."""

    kind: str = "scale"

    @abstractmethod
    def describe(self) -> str:
        """What to answer, for the prompt: ``one of: "yes", "no"``.

        Returns
        -------
        str
            The text.
        """

    @abstractmethod
    def parse(self, text: str) -> Any:
        """The value in a verdict's text.

        Parameters
        ----------
        text : str
            The verdict's text.

        Returns
        -------
        object
            The scale's value (a label, an int, a float, a bool).

        Raises
        ------
        JudgeReplyError
            Not a value the scale offers.
        """

    @abstractmethod
    def normalize(self, value: Any) -> float:
        """``value`` mapped to 0..1.

        Parameters
        ----------
        value : object
            A value of the scale.

        Returns
        -------
        float
            Its 0..1 value.
        """

    def label(self, value: Any) -> str:
        """The canonical text of ``value`` (what a vote counts).

        Parameters
        ----------
        value : object
            A value of the scale.

        Returns
        -------
        str
            Its text.
        """
        return str(value)

    def label_values(self) -> dict[str, float] | None:
        """The tokens that carry the value, each with its 0..1 value; ``None`` when not discrete.

        Returns
        -------
        dict of str to float or None
            The labels' values.
        """
        return None

    def discrete_values(self) -> list[Any] | None:
        """Every value the scale offers, in order; ``None`` for a continuous scale.

        Returns
        -------
        list or None
            The values.
        """
        return None

    @property
    def binary(self) -> bool:
        values = self.discrete_values()
        return values is not None and len(values) == 2

    def flip(self, value: Any) -> Any:
        """The other value of a two-valued scale.

        Parameters
        ----------
        value : object
            One value.

        Returns
        -------
        object
            The other.

        Raises
        ------
        ConfigError
            A scale with other than two values.
        """
        values = self.discrete_values()
        if values is None or len(values) != 2:
            raise ConfigError(f"only a two-valued scale can be flipped, not {self!r}")
        return values[1] if value == values[0] else values[0]

    def signature(self) -> tuple[Any, ...]:
        """Equal for scales that vote alike (same labels, same values).

        Returns
        -------
        tuple
            The labels and values.
        """
        return (type(self).__name__, tuple(sorted((self.label_values() or {}).items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scale) and self.signature() == other.signature()

    def __hash__(self) -> int:
        return hash(self.signature())


class CategoricalScale(Scale):
    """A fixed list of labels, matched case-insensitively after trimming quotes and markdown.

    Without ``values`` the labels are evenly spaced worst first: the first is
    0.0 and the last 1.0 (as on a Likert scale). ``values`` maps every label to
    its own 0..1 value.

    Parameters
    ----------
    labels : sequence of str
        The labels, worst first (at least two, distinct once folded).
    values : mapping of str to float, optional
        Every label's own 0..1 value.

    Raises
    ------
    ConfigError
        Fewer than two labels, repeated labels, or ``values`` that miss a label or are out of 0..1.

    Examples
    --------
    >>> scale = CategoricalScale(["bad", "ok", "good"])
    >>> scale.parse("**Good**"), scale.normalize("ok")
    ('good', 0.5)
    """

    kind = "categorical"

    def __init__(self, labels: Sequence[str], values: Mapping[str, float] | None = None) -> None:
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise ConfigError(f"categories must be a list of labels, got {brief_repr(labels)}")
        labels = list(labels)
        for lab in labels:
            if isinstance(lab, bool):
                raise ConfigError(
                    f"category {lab!r} is a boolean; in YAML quote yes/no/true/false ('yes') so they stay labels"
                )
            if not isinstance(lab, str) or not lab.strip():
                raise ConfigError(f"each category must be a non-empty string, got {brief_repr(lab)}")
        if len(labels) < 2:
            raise ConfigError(f"a categorical scale needs at least two categories, got {brief_repr(labels)}")
        folded = [lab.strip().casefold() for lab in labels]
        if len(set(folded)) != len(folded):
            raise ConfigError(f"categories must differ (ignoring case), got {brief_repr(labels)}")
        self.labels: tuple[str, ...] = tuple(lab.strip() for lab in labels)
        self._by_fold = dict(zip(folded, self.labels, strict=True))
        if values is None:
            n = len(self.labels)
            self.values: dict[str, float] = {lab: k / (n - 1) for k, lab in enumerate(self.labels)}
            self.explicit_values = False
        else:
            if not isinstance(values, Mapping):
                raise ConfigError(f"values must map each category to a number in 0..1, got {brief_repr(values)}")
            mapped: dict[str, float] = {}
            for key, val in values.items():
                if isinstance(key, bool):
                    raise ConfigError(
                        f"values has the boolean key {key!r}; in YAML quote yes/no ('yes': 0.0) so they stay labels"
                    )
                category = self._by_fold.get(str(key).strip().casefold())
                if category is None:
                    raise ConfigError(
                        f"values names {brief_repr(key)}, which is not one of the categories {list(self.labels)}"
                    )
                mapped[category] = _check_unit_value(f"values[{key!r}]", val)
            missing = [lab for lab in self.labels if lab not in mapped]
            if missing:
                raise ConfigError(f"values gives no value for the categories {missing}; map every category")
            self.values = {lab: mapped[lab] for lab in self.labels}
            self.explicit_values = True

    def describe(self) -> str:
        return "one of: " + ", ".join(f'"{lab}"' for lab in self.labels)

    def parse(self, text: str) -> str:
        cleaned = clean_verdict(text)
        lab = self._by_fold.get(cleaned.casefold())
        if lab is None:
            raise JudgeReplyError(
                f"verdict {quote(cleaned, 80)} is not one of the labels offered {list(self.labels)}", reply=text
            )
        return lab

    def normalize(self, value: Any) -> float:
        return self.values[value]

    def label_values(self) -> dict[str, float]:
        return dict(self.values)

    def discrete_values(self) -> list[Any]:
        return list(self.labels)

    def __repr__(self) -> str:
        return f"CategoricalScale({list(self.labels)!r}, values={self.values!r})"


class BooleanScale(Scale):
    """Yes or no. The value is a ``bool``; ``yes`` is 1.0 and ``no`` 0.0 unless ``values`` says otherwise.

    Parameters
    ----------
    yes : str, default "yes"
        The label of ``True``.
    no : str, default "no"
        The label of ``False``.
    values : mapping of str to float, optional
        The two labels' 0..1 values.

    Examples
    --------
    >>> BooleanScale().parse("Yes."), BooleanScale().normalize(False)
    (True, 0.0)
    """

    kind = "boolean"

    def __init__(self, yes: str = "yes", no: str = "no", values: Mapping[str, float] | None = None) -> None:
        inner = CategoricalScale([yes, no], values if values is not None else {yes: 1.0, no: 0.0})
        self.yes, self.no = inner.labels
        self._inner = inner

    @property
    def values(self) -> dict[str, float]:
        return self._inner.values

    def describe(self) -> str:
        return f'"{self.yes}" or "{self.no}"'

    def parse(self, text: str) -> bool:
        return self._inner.parse(text) == self.yes

    def normalize(self, value: Any) -> float:
        return self._inner.values[self.yes if value else self.no]

    def label(self, value: Any) -> str:
        return self.yes if value else self.no

    def label_values(self) -> dict[str, float]:
        return dict(self._inner.values)

    def discrete_values(self) -> list[Any]:
        return [True, False]

    def __repr__(self) -> str:
        return f"BooleanScale(yes={self.yes!r}, no={self.no!r}, values={self.values!r})"


_INT = re.compile(r"^[+-]?\d+$")


class LikertScale(Scale):
    """Integers ``min..max``; a reply that is not such an integer is rejected (``4.5``, ``4/5``, ``four``).

    Parameters
    ----------
    min : int, default 1
        The lowest rating (0.0).
    max : int, default 5
        The highest rating (1.0).

    Raises
    ------
    ConfigError
        ``min`` not below ``max``.

    Examples
    --------
    >>> LikertScale(1, 5).normalize(4)
    0.75
    """

    kind = "likert"

    def __init__(self, min: int = 1, max: int = 5) -> None:
        for what, v in (("min", min), ("max", max)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"Likert {what} must be an integer, got {brief_repr(v)}")
        if not min < max:
            raise ConfigError(f"Likert min must be below max, got min={brief_repr(min)}, max={brief_repr(max)}")
        if max - min > 100:
            raise ConfigError(
                "a Likert scale of more than 101 points is not a Likert scale "
                f"(min={brief_repr(min)}, max={brief_repr(max)})"
            )
        self.min, self.max = min, max

    def describe(self) -> str:
        return f"an integer from {self.min} to {self.max}"

    def parse(self, text: str) -> int:
        cleaned = clean_verdict(text)
        if not _INT.match(cleaned):
            raise JudgeReplyError(
                f"verdict {quote(cleaned, 80)} is not an integer from {self.min} to {self.max}", reply=text
            )
        value = int(cleaned)
        if not self.min <= value <= self.max:
            raise JudgeReplyError(f"verdict {value} is outside {self.min}..{self.max}", reply=text)
        return value

    def normalize(self, value: Any) -> float:
        return (int(value) - self.min) / (self.max - self.min)

    def label_values(self) -> dict[str, float]:
        return {str(v): self.normalize(v) for v in range(self.min, self.max + 1)}

    def discrete_values(self) -> list[Any]:
        return list(range(self.min, self.max + 1))

    def __repr__(self) -> str:
        return f"LikertScale(min={self.min}, max={self.max})"


_FLOAT = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class ContinuousScale(Scale):
    """A number in ``low..high`` (default 0..1); out of range is rejected, not clamped.

    Parameters
    ----------
    low : float, default 0.0
        The lowest value (0.0).
    high : float, default 1.0
        The highest value (1.0).

    Raises
    ------
    ConfigError
        ``low`` not below ``high``.
    """

    kind = "continuous"

    def __init__(self, low: float = 0.0, high: float = 1.0) -> None:
        for what, v in (("low", low), ("high", high)):
            if not finite_number(v):
                raise ConfigError(f"continuous {what} must be a finite number, got {brief_repr(v)}")
        if not low < high:
            raise ConfigError(f"continuous low must be below high, got low={brief_repr(low)}, high={brief_repr(high)}")
        self.low, self.high = float(low), float(high)

    def describe(self) -> str:
        return f"a number from {self.low:g} to {self.high:g}"

    def parse(self, text: str) -> float:
        cleaned = clean_verdict(text)
        if not _FLOAT.match(cleaned):
            raise JudgeReplyError(f"verdict {quote(cleaned, 80)} is not a number", reply=text)
        value = float(cleaned)
        if not self.low <= value <= self.high:
            raise JudgeReplyError(
                f"verdict {value!r} is outside {self.low:g}..{self.high:g} (not clamped)", reply=text
            )
        return value

    def normalize(self, value: Any) -> float:
        return (float(value) - self.low) / (self.high - self.low)

    def label(self, value: Any) -> str:
        return f"{float(value):.4g}"

    def signature(self) -> tuple[Any, ...]:
        return ("ContinuousScale", self.low, self.high)

    def __repr__(self) -> str:
        return f"ContinuousScale(low={self.low:g}, high={self.high:g})"
