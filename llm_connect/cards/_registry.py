"""The judge-card registry kept beside a ledger: a small JSON file (``<ledger>.cards.json``), one card per
``(grader_id, rubric_hash)``, rewritten atomically under ``filelock.FileLock(<registry>.lock)``; routing
reads it to refuse uncalibrated judges."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .._display import view
from ..errors import ValidationError
from ..quality import BaseLedger
from ..quality._ledger_io import temp_file_beside
from ._card import JudgeCard, cards_frame

__all__ = ["JudgeCardRegistry", "registry_path"]


def registry_path(ledger: BaseLedger | str | os.PathLike[str]) -> Path:
    """Where the card registry of a ledger lives: ``<ledger path>.cards.json``.

    Parameters
    ----------
    ledger : BaseLedger or str or os.PathLike
        A ledger (its ``path``) or a ledger's path.

    Returns
    -------
    Path
        ``<ledger path>.cards.json``.

    Raises
    ------
    ValidationError
        When ``ledger`` is neither a ledger nor a path.
    """
    path = getattr(ledger, "path", ledger)
    if not isinstance(path, (str, os.PathLike)):
        raise ValidationError(f"expected a ledger or a path, got {type(ledger).__name__}")
    return Path(os.fspath(path) + ".cards.json")


class JudgeCardRegistry:
    """A small JSON file of judge cards, one per ``(grader_id, rubric_hash)``.

    Saving rewrites the file atomically (a temporary file and ``os.replace``)
    under ``filelock.FileLock(<path>.lock)``, so several processes may save at
    once. ``JudgeCardRegistry.for_ledger(ledger)`` opens the one beside a ledger.

    Parameters
    ----------
    path : str or os.PathLike
        The registry's JSON file; it need not exist yet (an absent file holds no cards).

    See Also
    --------
    JudgeCard : One card.
    registry_path : Where the registry of a ledger lives.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from llm_connect.cards import JudgeCard, JudgeCardRegistry
    >>> registry = JudgeCardRegistry.for_ledger(pathlib.Path(tempfile.mkdtemp()) / "quality.jsonl")
    >>> registry.path.name
    'quality.jsonl.cards.json'
    >>> registry.get("gpt-4o-judge") is None  # no file yet: no cards
    True
    >>> card = JudgeCard(
    ...     grader_id="gpt-4o-judge", rubric_hash="3f2a9c", reference="human", people=True, n_labelled=120,
    ...     percent_agreement=0.84, agreement_low=0.77, agreement_high=0.90,
    ...     kappa=0.62, kappa_low=0.41, kappa_high=0.80, mean_bias=0.02, bias_low=-0.03, bias_high=0.07,
    ...     unscored_rate=0.0, n_items=120, verdict="gpt-4o-judge: substantial agreement against people")
    >>> registry.save(card)
    >>> registry.get("gpt-4o-judge", "3f2a9c").kappa
    0.62
    """

    VERSION = 1

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @classmethod
    def for_ledger(cls, ledger: BaseLedger | str | os.PathLike[str]) -> JudgeCardRegistry:
        """The registry beside ``ledger`` (``<ledger path>.cards.json``).

        Parameters
        ----------
        ledger : BaseLedger or str or os.PathLike
            A ledger or a ledger's path.

        Returns
        -------
        JudgeCardRegistry
            Its registry.
        """
        return cls(registry_path(ledger))

    @property
    def path(self) -> Path:
        """The registry's JSON file."""
        return self._path

    def _lock(self) -> Any:
        from filelock import FileLock

        return FileLock(os.fspath(self._path) + ".lock")

    def _read(self) -> list[JudgeCard]:
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ValidationError(f"cannot read the judge-card registry {self._path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValidationError(
                f"the judge-card registry {self._path} is not valid JSON ({exc}); "
                "delete it and re-run llm-connect calibrate --ledger to rebuild it"
            ) from exc
        cards = data.get("cards") if isinstance(data, Mapping) else None
        if not isinstance(cards, list):
            raise ValidationError(f"the judge-card registry {self._path} has no 'cards' list; delete and rebuild it")
        return [JudgeCard.from_dict(c) for c in cards]

    def cards(self) -> list[JudgeCard]:
        """Every card, in the order saved.

        Returns
        -------
        list of JudgeCard
            The cards; empty when the file does not exist.

        Raises
        ------
        ValidationError
            When the file cannot be read, is not valid JSON or has no ``cards`` list.
        """
        return self._read()

    def __iter__(self) -> Iterator[JudgeCard]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def get(self, grader_id: str, rubric_hash: str | None = None) -> JudgeCard | None:
        """The card of ``grader_id`` under ``rubric_hash``; with ``rubric_hash=None``, its newest card.

        Parameters
        ----------
        grader_id : str
            The judge.
        rubric_hash : str, optional
            The rubric; ``None``: any (the newest card).

        Returns
        -------
        JudgeCard or None
            The card, or ``None`` when there is none.

        Raises
        ------
        ValidationError
            When the file cannot be read, is not valid JSON or has no ``cards`` list.
        """
        found = [c for c in self._read() if c.grader_id == grader_id
                 and (rubric_hash is None or c.rubric_hash == rubric_hash)]
        if not found:
            return None
        return max(found, key=lambda c: c.created_at)

    def versions(self, grader_id: str) -> list[JudgeCard]:
        """Every card of ``grader_id``, one per rubric, oldest first.

        Parameters
        ----------
        grader_id : str
            The judge.

        Returns
        -------
        list of JudgeCard
            Its cards, oldest first (an aligned rubric's card names its parent in
            ``provenance["parent_rubric_hash"]``).

        Raises
        ------
        ValidationError
            When the file cannot be read, is not valid JSON or has no ``cards`` list.
        """
        return sorted((c for c in self._read() if c.grader_id == grader_id), key=lambda c: c.created_at)

    def save(self, cards: JudgeCard | Sequence[JudgeCard]) -> None:
        """Add or replace cards (matched on ``(grader_id, rubric_hash)``).

        Parameters
        ----------
        cards : JudgeCard or sequence of JudgeCard
            The cards to save.

        Raises
        ------
        ValidationError
            When a card is not a :class:`JudgeCard`, or the file cannot be read or written.
        """
        new = [cards] if isinstance(cards, JudgeCard) else list(cards)
        for c in new:
            if not isinstance(c, JudgeCard):
                raise ValidationError(f"expected JudgeCard objects, got {type(c).__name__}")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock():
                kept = {c.key: c for c in self._read()}
                for c in new:
                    kept[c.key] = c
                payload = json.dumps({"version": self.VERSION, "cards": [c.to_dict() for c in kept.values()]},
                                     indent=1, ensure_ascii=False, allow_nan=False)
                with temp_file_beside(self._path.parent, self._path.name + ".") as (fd, tmp):
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        fh.write(payload)
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.replace(tmp, self._path)
        except OSError as exc:
            raise ValidationError(
                f"cannot write the judge-card registry {self._path}: {exc.strerror or exc}; "
                "check that its directory exists and is writable"
            ) from exc

    def frame(self) -> pd.DataFrame:
        """One row per card.

        Returns
        -------
        DataFrame
            One row per card, the columns :data:`CARD_COLUMNS`.
        """
        return cards_frame(self._read())

    def _repr_html_(self) -> str:
        return str(view("card_registry_html")(self))

    def __repr__(self) -> str:
        return f"JudgeCardRegistry({os.fspath(self._path)!r})"
