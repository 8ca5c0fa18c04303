"""What a :class:`~llm_connect.labelling.Labeller` shows: its items, read from a frame.

One item is one ``(id, adapter)``: the same question answered by two models is two items. Item ids are
converted as :func:`~llm_connect.grading.judge_many` records them (:func:`~llm_connect.items.canonical_item_id`)
and matched on their text (:func:`~llm_connect.items.item_id_text`), so labels pair with the judge's scores
whatever the ids' dtype. With ``unit="conversation"`` the rows of one conversation are one item
(:func:`conversation_items`). The judge's score is read from the items (``NAME`` or ``score_NAME``), else from
the ledger's observations of the task type with ``tags["grader_id"] == NAME`` (mean per item and adapter); its
reply from ``reply_NAME``, ``notes_NAME``, ``reply`` or ``notes``, the first present.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..items import CONVERSATION_COLUMNS, canonical_item_id, conversation_tags, item_id_text, item_ids

__all__ = ["UNITS", "LabelItems", "conversation_items", "judge_scores_from_ledger", "label_items", "read_items"]

_ID_COLUMNS = ("item_id", "id")
_REFERENCE_COLUMNS = ("references", "reference", "baseline")


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value if isinstance(value, str) else str(value)


def _items_frame(items: Any) -> pd.DataFrame:
    if isinstance(items, pd.DataFrame):
        frame = items.reset_index(drop=True)
    elif isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ValidationError(
            f"items must be a DataFrame or an iterable of mappings (one per answer to label), got "
            f"{type(items).__name__}"
        )
    else:
        rows = list(items)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, Mapping)]
        if bad:
            raise ValidationError(f"items must be mappings; item {bad[0]} is a {type(rows[bad[0]]).__name__}")
        frame = pd.DataFrame(rows)
    if not len(frame):
        raise ValidationError("items is empty: pass the answers to label (a DataFrame or a list of dicts)")
    return frame


def _abstained_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows a selective judge or a cascade abstained on (``status == "abstained"``, or ``decided_by ==
    "human"``) and their confidences (NaN where none), for ``strategy="abstained"``."""
    if "status" in frame.columns:
        mask = (frame["status"].astype(object) == "abstained").to_numpy(dtype=bool)
    elif "decided_by" in frame.columns:
        mask = (frame["decided_by"].astype(object) == "human").to_numpy(dtype=bool)
    else:
        raise ValidationError("strategy='abstained' takes the frame of judge_many(selective_judge, items) (or of a "
                              "cascade): items need a 'status' column (abstained rows) or a 'decided_by' column")
    if not mask.any():
        raise ValidationError(f"strategy='abstained': none of the {len(frame)} rows was abstained on; there is "
                              "nothing left for people")
    part = frame[mask].reset_index(drop=True)
    confidence = (pd.to_numeric(part["confidence"], errors="coerce").to_numpy(dtype=float)
                  if "confidence" in part.columns else np.full(len(part), np.nan))
    return part, confidence


def _column(frame: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    return next((c for c in candidates if c in frame.columns), None)


def _is_trajectory(value: Any) -> bool:
    """A reply or reference that is a list of chat messages (an agent run), not texts."""
    return isinstance(value, (list, tuple)) and any(isinstance(m, Mapping) for m in value)


def _reply_text(value: Any) -> str:
    """A reply as text: a trajectory's final answer (the text of its last assistant message), else the text."""
    if _is_trajectory(value):
        last = value[-1] if value else None
        if isinstance(last, Mapping) and last.get("role") == "assistant":
            content = last.get("content")
            return content if isinstance(content, str) else ""
        return ""
    return _text(value) or ""


def _references(value: Any, sep: str | None) -> list[str]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [t for t in (_text(v) for v in value) if t is not None]
    text = _text(value)
    if text is None:
        return []
    if sep:
        parts = [p.strip() for p in text.split(sep)]
        return [p for p in parts if p] or [text]
    return [text]


# -- conversations as items ------------------------------------------------------------------------

#: What one item of a :class:`Labeller` is: a row (``"turn"``: one reply) or a conversation.
UNITS = ("turn", "conversation")
# per-turn columns a conversation item does not carry over (it gets its own)
_TURN_ONLY = ("id", "item_id", "turn", "prompt", "candidate", "baseline", "reference", "references", "messages",
              "context", "status", "confidence", "decided_by")


def _missing_value(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict, np.ndarray)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _listed(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _score_columns(frame: pd.DataFrame, judge: str | None, uncertainty: str | None) -> list[str]:
    """The numeric columns a conversation item averages over its turns: the judge's score, the uncertainty."""
    names = [] if judge is None else [judge, f"score_{judge}"]
    if uncertainty not in (None, "judge"):
        names.append(str(uncertainty))
    return [c for c in names if c in frame.columns]


def _as_messages(reply: Any) -> list[Any]:
    """A turn's reply as messages: a trajectory as it is, a text as one assistant message."""
    reply = _listed(reply)
    if isinstance(reply, (list, tuple)):
        return list(reply)
    if _missing_value(reply):
        return []
    return [{"role": "assistant", "content": reply if isinstance(reply, str) else str(reply)}]


def conversation_items(frame: pd.DataFrame, *, score_columns: Sequence[str] = ()) -> pd.DataFrame:
    """One row per conversation (and candidate model) of a frame of turns: what ``Labeller(unit="conversation")``
    shows and labels.

    Parameters
    ----------
    frame : pandas.DataFrame
        Turns, as :func:`~llm_connect.conversations.per_turn` or
        :func:`~llm_connect.conversations.read_conversations` give them: ``conversation_id``, ``turn``
        (optional: the rows' order otherwise), ``messages`` (the conversation before the reply),
        ``candidate`` (a text or a trajectory), optional ``context``.
    score_columns : sequence of str
        Numeric columns averaged over a conversation's turns (the judge's score: a conversation's
        judge score is the mean of its turns' scores, NaN when none is scored).

    Returns
    -------
    pandas.DataFrame
        ``id`` (the conversation id), ``conversation_id``, ``n_turns``, ``messages`` (the whole
        conversation: each turn's messages not already shown, then its reply), ``prompt`` (the first
        user message), ``candidate`` (the last reply), ``context`` (every turn's documents, each
        once), the ``score_columns`` averaged, and every other column whose value is the same on
        every turn (``candidate_model``, a group column...).

    Raises
    ------
    ValidationError
        No ``conversation_id`` column, or a row without one.

    See Also
    --------
    Labeller : Labels a whole conversation at once with ``unit="conversation"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from llm_connect.labelling import conversation_items
    >>> hi = {"role": "user", "content": "Hi"}
    >>> turns = pd.DataFrame({
    ...     "conversation_id": ["c1", "c1", "c2"], "turn": [0, 1, 0],
    ...     "messages": [[hi], [hi, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}],
    ...                  [{"role": "user", "content": "Capital of France?"}]],
    ...     "candidate": ["Hello!", "4", "Paris"], "judge_score": [1.0, 0.5, 1.0]})
    >>> conversation_items(turns, score_columns=["judge_score"])[["id", "n_turns", "prompt", "candidate",
    ...                                                           "judge_score"]]
       id  n_turns              prompt candidate  judge_score
    0  c1        2                  Hi         4         0.75
    1  c2        1  Capital of France?     Paris         1.00
    """
    if "conversation_id" not in frame.columns:
        raise ValidationError("unit='conversation' needs a conversation_id column: read the data with "
                              "llm_connect.conversations.read_conversations or split conversations with per_turn")
    ids = frame["conversation_id"].astype(object).tolist()
    if any(_missing_value(v) for v in ids):
        raise ValidationError("unit='conversation': every row needs its conversation_id; some are missing")
    model_col = _column(frame, ("adapter_id", "candidate_adapter", "candidate_model", "model_id"))
    models = frame[model_col].astype(object).tolist() if model_col else [None] * len(frame)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (cid, model) in enumerate(zip(ids, models, strict=True)):
        groups.setdefault((str(item_id_text(cid)), str(_text(model))), []).append(i)
    turns = frame["turn"].astype(object).tolist() if "turn" in frame.columns else None

    def position(i: int) -> tuple[float, int]:
        turn = turns[i] if turns is not None else None
        return (math.inf if turn is None or _missing_value(turn) else float(turn), i)

    kept = [c for c in frame.columns if c not in _TURN_ONLY and c not in score_columns and c != "conversation_id"]
    rows = []
    for rows_of in groups.values():
        order = sorted(rows_of, key=position)
        shown: list[Any] = []
        context: list[str] = []
        for i in order:
            before = _listed(frame["messages"].iloc[i]) if "messages" in frame.columns else None
            before = list(before) if isinstance(before, (list, tuple)) else []
            shown += before[len(shown):] if before[: len(shown)] == shown else before
            shown += _as_messages(frame["candidate"].iloc[i]) if "candidate" in frame.columns else []
            docs = _listed(frame["context"].iloc[i]) if "context" in frame.columns else None
            if isinstance(docs, (list, tuple)):
                context += [d for d in docs if d not in context]
        first, last = order[0], order[-1]
        prompt = next((m.get("content") for m in shown if isinstance(m, Mapping) and m.get("role") == "user"), None)
        row: dict[str, Any] = {
            "id": canonical_item_id(ids[first]), "conversation_id": ids[first], "n_turns": len(order),
            "messages": shown, "prompt": prompt if isinstance(prompt, str) else "",
            "candidate": _listed(frame["candidate"].iloc[last]) if "candidate" in frame.columns else "",
            "context": context or None,
        }
        for column in score_columns:
            values = pd.to_numeric(frame[column].iloc[order], errors="coerce").to_numpy(dtype=float)
            row[column] = float(np.nanmean(values)) if np.isfinite(values).any() else math.nan
        for column in kept:
            same = frame[column].iloc[order].astype(object).tolist()
            if all(repr(v) == repr(same[0]) for v in same):
                row[column] = same[0]
        rows.append(row)
    return pd.DataFrame(rows)




# -- the items ------------------------------------------------------------------------------------


@dataclass
class LabelItems:
    """The items of a Labeller: ``frame`` (one row per item: ``item_id``, ``key_text``, ``adapter_id``,
    ``model_id``, ``prompt``, ``candidate``, ``references``, ``reply``, ``reference_run``, ``messages``,
    ``context``, ``conversation_id``, ``turn``, ``group``, ``judge_score``, ``judge_reply`` and, with a
    column of uncertainty, ``uncertainty``), each item's plain id (``ids``), key ``(id text, adapter)``
    (``keys``, and ``index``: key -> position), the conversation tags its labels carry (``tags``; ``None``
    for items that are not turns of conversations), the stratifying column (``group``) and where the
    judge's scores came from (``judge_source``)."""

    frame: pd.DataFrame
    ids: list[Any]
    keys: list[tuple[str, str]]
    index: dict[tuple[str, str], int]
    tags: list[dict[str, Any]] | None
    group: str | None
    judge_source: str | None

    def __len__(self) -> int:
        return len(self.keys)


def read_items(items: Any, *, unit: str, strategy: str, judge: str | None,
               uncertainty: str | None) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The rows to label (one per conversation with ``unit="conversation"``; only the abstained rows with
    ``strategy="abstained"``) and, for ``"abstained"``, their priority (the judge's confidence)."""
    frame = _items_frame(items)
    if unit == "conversation":
        frame = conversation_items(frame, score_columns=_score_columns(frame, judge, uncertainty))
    if strategy == "abstained":  # only the rows a selective judge or cascade abstained on
        return _abstained_rows(frame)
    return frame, None


def judge_scores_from_ledger(rows: pd.DataFrame, judge: str, keys: list[tuple[str, str]]) -> np.ndarray:
    """The judge's mean score per item and adapter, from the ledger's observations ``rows`` of the task type
    (NaN for an item it has no observation of)."""
    out = np.full(len(keys), np.nan)
    if not len(rows) or "tag.grader_id" not in rows.columns or "tag.item_id" not in rows.columns:
        return out
    mine = rows[(rows["tag.grader_id"] == judge).to_numpy(dtype=bool) & rows["tag.item_id"].notna().to_numpy()]
    if not len(mine):
        return out
    means = pd.DataFrame({
        "item": mine["tag.item_id"].astype(object).map(item_id_text).to_numpy(),
        "adapter": mine["adapter_id"].astype(str).to_numpy(),
        "score": mine["quality_score"].to_numpy(dtype=float),
    }).groupby(["item", "adapter"])["score"].mean()
    lookup = means.to_dict()
    return np.array([lookup.get(k, np.nan) for k in keys], dtype=float)


def label_items(frame: pd.DataFrame, *, strategy: str, group: str | None, reference_sep: str | None,
                uncertainty: str | None, judge: str | None, ledger_rows: Callable[[], pd.DataFrame]) -> LabelItems:
    """The items of ``frame`` as a Labeller shows and keys them (see :class:`LabelItems`); ``ledger_rows``
    reads the ledger's observations of the task type, for the judge's scores when the items have none.

    Raises
    ------
    ValidationError
        An item without an id, a prompt or a candidate; an item given twice; a missing group or uncertainty
        column; judge scores outside 0..1.
    """
    id_col = _column(frame, _ID_COLUMNS)
    conversational = any(c in frame.columns for c in CONVERSATION_COLUMNS)
    missing = [name for name, ok in (("an item id ('id' or 'item_id')", id_col is not None or conversational),
                                     ("'prompt'", "prompt" in frame.columns or "messages" in frame.columns),
                                     ("'candidate'", "candidate" in frame.columns)) if not ok]
    if missing:
        raise ValidationError(f"items lack {', '.join(missing)}; their columns are {list(frame.columns)[:20]}")
    if conversational:  # a conversation's turns: keyed as judge_many keys them (the turn is part of the item)
        if "prompt" not in frame.columns:
            from ..grading._judge_many import item_messages, item_prompt

            frame = frame.assign(prompt=[item_prompt(r, item_messages(r)) for r in frame.to_dict("records")])
        keyed = frame.rename(columns={id_col: "id"}) if id_col not in (None, "id") else frame
        ids: list[Any] = item_ids(keyed)
    else:
        assert id_col is not None
        ids = [canonical_item_id(v) for v in frame[id_col].tolist()]  # the one conversion (1.0 is 1), as judged
    if any(v is None for v in ids):
        raise ValidationError(f"every item needs an id; column {id_col!r} has missing values")
    tags = [conversation_tags(r) for r in frame.to_dict("records")] if conversational else None
    adapter_col = _column(frame, ("adapter_id", "candidate_adapter", "candidate_model"))
    model_col = _column(frame, ("model_id", "candidate_model"))

    def names(col: str | None) -> list[str | None]:
        if col is None:
            return [None] * len(frame)
        return [t if t is not None and t.strip() else None for t in map(_text, frame[col].tolist())]

    models = [m or "unknown" for m in names(model_col)]
    adapters = [a or m for a, m in zip(names(adapter_col), models, strict=True)]
    keys = [(str(item_id_text(i)), a) for i, a in zip(ids, adapters, strict=True)]
    seen: dict[tuple[str, str], int] = {}
    for k in keys:
        seen[k] = seen.get(k, 0) + 1
    dup = [k for k, c in seen.items() if c > 1]
    if dup:
        raise ValidationError(
            f"{len(dup)} item(s) appear more than once, e.g. id {dup[0][0]!r} for adapter {dup[0][1]!r}; each "
            "(id, candidate model) must be one row: drop the duplicates (df.drop_duplicates) or give them "
            "distinct ids"
        )
    ref_col = _column(frame, _REFERENCE_COLUMNS)
    raw_refs = [_listed(v) for v in frame[ref_col].tolist()] if ref_col else [None] * len(frame)
    refs = [[] if _is_trajectory(v) else _references(v, reference_sep) for v in raw_refs]
    replies = [_listed(v) for v in frame["candidate"].tolist()]
    data = pd.DataFrame({
        "item_id": pd.Series(ids, dtype=object),  # plain Python ids (numpy int64 is no JSON tag)
        "key_text": [f"{i}\x1f{a}" for i, a in keys],
        "adapter_id": adapters,
        "model_id": models,
        "prompt": [_text(v) or "" for v in frame["prompt"].tolist()],
        "candidate": [_reply_text(v) for v in replies],
        "references": refs,
    })
    # a conversation or an agent run: what the transcript shows (None where the items have no such column)
    data["reply"] = pd.Series(replies, dtype=object)
    data["reference_run"] = pd.Series([v if _is_trajectory(v) else None for v in raw_refs], dtype=object)
    for name in ("messages", "context", "conversation_id", "turn"):
        values = [_listed(v) for v in frame[name].tolist()] if name in frame.columns else [None] * len(frame)
        data[name] = pd.Series([None if _missing_value(v) else v for v in values], dtype=object)
    if strategy == "stratified" or group is not None:
        gcol = group if group is not None else _column(frame, ("candidate_model", "model_id", "adapter_id"))
        if gcol is None or gcol not in frame.columns:
            raise ValidationError(
                f"strategy='stratified' needs a group column: group={gcol!r} is not among the items' columns "
                f"{list(frame.columns)[:20]}; pass group='COLUMN' (e.g. the candidate model)"
            )
        data["group"] = [_text(v) or "(missing)" for v in frame[gcol].tolist()]
        group_col: str | None = gcol
    else:
        data["group"] = "all"
        group_col = None
    data["judge_score"] = np.nan
    data["judge_reply"] = None
    if uncertainty is not None and uncertainty != "judge":
        if not isinstance(uncertainty, str) or uncertainty not in frame.columns:
            raise ValidationError(f"uncertainty={uncertainty!r} is not a column of the items; pass a column "
                                  "name, 'judge' (the judge's own sqrt(s(1 - s))) or None (learned)")
        data["uncertainty"] = pd.to_numeric(frame[uncertainty], errors="coerce").to_numpy(dtype=float)
    judge_source = None
    if judge is not None:
        score_col = _column(frame, (judge, f"score_{judge}"))
        if score_col is not None:
            scores = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(dtype=float)
            if np.any((scores < 0) | (scores > 1)):
                raise ValidationError(f"the judge's scores in column {score_col!r} must be in 0..1; rescale first")
            data["judge_score"] = scores
            judge_source = f"items[{score_col!r}]"
        else:
            data["judge_score"] = judge_scores_from_ledger(ledger_rows(), judge, keys)
            judge_source = "ledger"
        reply_col = _column(frame, (f"reply_{judge}", f"notes_{judge}", "reply", "notes"))
        if reply_col is not None:
            data["judge_reply"] = [_text(v) for v in frame[reply_col].tolist()]
    return LabelItems(frame=data, ids=ids, keys=keys, index={k: i for i, k in enumerate(keys)}, tags=tags,
                      group=group_col, judge_source=judge_source)
