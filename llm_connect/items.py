"""Items: the texts a judgment reads, and one rule for which item a row is.

An item is one row of a judging run's input: ``prompt``, ``baseline`` and ``candidate`` texts
(:data:`ITEM_COLUMNS`), for a conversation item its ``messages``, ``conversation_id`` and ``turn``
(:data:`CONVERSATION_COLUMNS`), and any other columns, carried through. :func:`items_frame` reads items
(a DataFrame, or an iterable of mappings) into a frame holding the columns a run needs; :func:`item_text`
and :func:`reference_text` read an item's texts (a missing text is an error, never the text ``"nan"``).

Item identity is one rule, kept here: an item's id is converted once (:func:`canonical_item_id`: a whole
float is an int, numpy scalars are plain Python, NaN/None/NA is missing) and matched on its text
(:func:`item_id_text`); an item without an id is keyed by its texts (:func:`content_item_id`,
``"row:<sha256>"``), never by its row position; every turn of a conversation is its own item
(:func:`item_id_of`: ``"<id>#turn=<k>"``); with its candidate, an item's key is :func:`item_key`.
``judge_many`` and ``grade_many`` record these ids, ``record_labels`` and the Labeller write them,
``paired_frame`` joins on them and ``grade_dataset`` resumes by them.

This module imports only :mod:`llm_connect.errors` (and pandas, when a frame is built or read).
:func:`load_items` reads a file of items (JSON Lines, JSON, CSV, TSV).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import ValidationError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONTENT_KEY_PREFIX",
    "CONVERSATION_COLUMNS",
    "CONVERSATION_TAGS",
    "ITEM_COLUMNS",
    "candidate_names",
    "canonical_item_id",
    "column_values",
    "content_item_id",
    "conversation_tags",
    "is_missing",
    "item_id_of",
    "item_id_text",
    "item_ids",
    "item_key",
    "item_text",
    "items_frame",
    "load_items",
    "reference_text",
    "row_item_id",
]

#: The texts a judgment reads from each item.
ITEM_COLUMNS = ("prompt", "baseline", "candidate")
#: What a conversation item adds to its texts (see :mod:`llm_connect.conversations`): the messages before the
#: judged reply, the conversation it belongs to and the reply's turn in it. They are part of the item's identity
#: (:func:`item_ids`) and travel with every row (result frames, ledger tags, labels).
CONVERSATION_COLUMNS = ("messages", "conversation_id", "turn")
#: The columns of an item that travel to its ledger records as tags of the same name.
CONVERSATION_TAGS = ("conversation_id", "turn")


# -- reading items -----------------------------------------------------------------


def items_frame(items: Any, required: Iterable[str], *, aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``items`` (a DataFrame, copied, or an iterable of mappings) as a DataFrame holding ``required``.

    Parameters
    ----------
    items : DataFrame or iterable of mappings
        The items.
    required : iterable of str
        The columns the items must have.
    aliases : mapping of str to str, optional
        An accepted alternative name for a required column (``{"reference": "baseline"}``): it is renamed
        only when the required column is absent.

    Returns
    -------
    DataFrame
        The items, a copy.

    Raises
    ------
    ValidationError
        A missing column (the message names it and what the items have), or items that are neither a
        frame nor mappings.

    Examples
    --------
    >>> items_frame([{"question": "q", "reference": "r"}], ["question", "baseline"], aliases={"reference": "baseline"})
      question baseline
    0        q        r
    """
    import pandas as pd

    required = list(required)
    if isinstance(items, pd.DataFrame):
        frame = items.copy()
    else:
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise ValidationError("items must be a DataFrame or an iterable of mappings with " + ", ".join(required))
        records = list(items)
        for k, rec in enumerate(records):
            if not isinstance(rec, Mapping):
                raise ValidationError(f"item {k} is a {type(rec).__name__}, not a mapping with " + ", ".join(required))
        frame = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=required)
    renames = {alt: name for alt, name in (aliases or {}).items() if name not in frame.columns and alt in frame.columns}
    if renames:
        frame = frame.rename(columns=renames)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValidationError(
            f"items lack the column(s) {missing}; they have {list(frame.columns)}. "
            "Rename your columns (e.g. df.rename(columns={'question': 'prompt'}))"
        )
    return frame


def is_missing(value: Any) -> bool:
    """True for None and for the missing-value markers of Python, numpy and pandas (NaN, NaT, pd.NA).

    Parameters
    ----------
    value : object
        Any value.

    Returns
    -------
    bool
        Whether it is missing.

    Examples
    --------
    >>> is_missing(float("nan")), is_missing(""), is_missing(0)
    (True, False, False)
    """
    if value is None:
        return True
    if isinstance(value, str):
        return False
    if isinstance(value, float):
        return math.isnan(value)
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a container: not a missing scalar
        return False


def item_text(value: Any, column: str) -> str:
    """The text of an item's ``column``; a missing value (None/NaN/NA) is an error, never the text "nan".

    Parameters
    ----------
    value : object
        The item's value.
    column : str
        The column's name, for the error.

    Returns
    -------
    str
        ``str(value)``.

    Raises
    ------
    ValidationError
        A missing value (the message names the column).
    """
    if isinstance(value, str):
        return value
    if is_missing(value):
        raise ValidationError(f"{column} is missing (None/NaN) in this row")
    return str(value)


def reference_text(value: Any, *, sep: str | None = None, column: str = "baseline", required: bool = True) -> str:
    """The baseline's text; missing or blank (nothing to compare with) is an error.

    As is a baseline with no non-empty reference when split on ``sep`` (a judge's declared reference
    separator).

    Parameters
    ----------
    value : object
        The item's baseline.
    sep : str, optional
        The judge's reference separator (several references in one text).
    column : str, default "baseline"
        The column's name, for the error.
    required : bool, default True
        ``False`` (a judge shown no reference, e.g. a rubric with ``reference=False``): any baseline is fine,
        a missing one is ``""``.

    Returns
    -------
    str
        The baseline's text.

    Raises
    ------
    ValidationError
        A missing or blank baseline, or none left once split on ``sep`` (with ``required``).
    """
    if not required:
        return "" if is_missing(value) else item_text(value, column)
    text = item_text(value, column)
    if not text.strip():
        raise ValidationError(f"{column} is blank (empty or whitespace only): there is no reference to compare with")
    if isinstance(sep, str) and sep and not any(part.strip() for part in text.split(sep)):
        raise ValidationError(f"{column} holds no non-empty reference when split on reference_sep={sep!r}")
    return text


def column_values(frame: Any, column: str) -> list[Any]:
    """The values of ``column`` as a list (``None`` for each row when there is no such column).

    Parameters
    ----------
    frame : DataFrame
        The items.
    column : str
        The column.

    Returns
    -------
    list
        One value per row.
    """
    return frame[column].tolist() if column in frame.columns else [None] * len(frame)


# -- item identity -----------------------------------------------------------------


#: The prefix of the key of an item without an id (``"row:"`` and 24 hex digits of a SHA-256 of its texts,
#: see :func:`content_item_id`). Ids of this form are reserved: give your own ids another form.
CONTENT_KEY_PREFIX = "row:"
_CONTENT_DIGITS = 24  # 96 bits: two different texts share a key with probability ~2**-96 per pair


def canonical_item_id(value: Any) -> str | int | float | bool | None:
    """The one conversion of an item id, as every ledger record stores it.

    ``None`` when missing (None, NaN, NaT, pd.NA); numpy / pandas scalars as plain Python; a whole
    float as an int (pandas turns ids 1, 2, NaN into 1.0, 2.0, NaN, so ``1.0`` is item ``1``); a
    non-finite float and any other object (not str, int, float or bool) as its text. Strings are
    kept as they are (``"1"`` stays text; ids are matched on their text, :func:`item_id_text`).

    Parameters
    ----------
    value : object
        An item's id.

    Returns
    -------
    str or int or float or bool or None
        The id as a plain JSON value.

    Examples
    --------
    >>> canonical_item_id(1.0), canonical_item_id("1"), canonical_item_id(float("nan")) is None
    (1, '1', True)
    """
    if is_missing(value):
        return None
    item = getattr(value, "item", None)  # numpy / pandas scalars
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            value = item()  # numpy / pandas scalar -> Python
        except (TypeError, ValueError):
            pass
    if isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return int(value) if value.is_integer() else value
    return str(value)




def item_id_text(value: Any) -> str | None:
    """The text an item id is matched on everywhere.

    ``paired_frame``'s join, the Labeller, ``grade_dataset``'s resume: ``str`` of
    :func:`canonical_item_id`, ``None`` when missing. So ``1``, ``1.0``, ``np.int64(1)`` and ``"1"`` are
    one item, as they are once written to a CSV and read back.

    Parameters
    ----------
    value : object
        An item's id.

    Returns
    -------
    str or None
        Its text.

    Examples
    --------
    >>> item_id_text(1.0) == item_id_text("1") == "1"
    True
    """
    item_id = canonical_item_id(value)
    return None if item_id is None else str(item_id)


def _content_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    value = _as_plain_list(value)
    if isinstance(value, (list, tuple, Mapping)):  # a trajectory or a list of messages: its JSON, keys sorted
        return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return None if is_missing(value) else str(value)


def _as_plain_list(value: Any) -> Any:
    """A numpy array (a list column read from Parquet) as a list; anything else as it is."""
    if type(value).__name__ == "ndarray" and hasattr(value, "tolist"):
        return value.tolist()
    return value


def content_item_id(*texts: Any) -> str:
    """The key of an item without an id: :data:`CONTENT_KEY_PREFIX` and 24 hex digits of a SHA-256 of its texts.

    It depends on the item alone, never on its row position, so it cannot be another item's id: the same
    texts are the same item in every run and every ordering (judged twice, they are averaged as one item, as
    they should be), different texts are different items.

    Parameters
    ----------
    *texts : object
        ``prompt``, ``baseline``, ``candidate``, then for a conversation item its ``messages``,
        ``conversation_id`` and ``turn``; a missing text counts as absent, a list of messages as its JSON.

    Returns
    -------
    str
        ``"row:"`` and the digest.

    Examples
    --------
    >>> content_item_id("2+2?", "4", "4")
    'row:953f4dd6717a760742f28fc4'
    """
    payload = json.dumps([_content_text(t) for t in texts], ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode("ascii")).hexdigest()
    return CONTENT_KEY_PREFIX + digest[:_CONTENT_DIGITS]


def _messages_text(messages: Any) -> str | None:
    """The messages of an item as they are keyed: their JSON, keys sorted (a JSON string and the list it holds are
    one conversation); ``None`` when missing."""
    messages = _as_plain_list(messages)
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            return messages  # not JSON: keyed by its text (its row fails on its own)
    elif not isinstance(messages, (list, tuple)) and is_missing(messages):
        return None
    return _content_text(messages)


def item_id_of(item_id: Any, texts: Iterable[Any] = (), *, messages: Any = None, conversation_id: Any = None,
               turn: Any = None) -> str | int | float | bool:
    """The item id recorded for one item: the one rule behind :func:`item_ids` and :func:`row_item_id`.

    Parameters
    ----------
    item_id : Any
        The item's ``id`` (missing: None/NaN/NA).
    texts : iterable
        Its texts (``prompt``, ``baseline``, ``candidate``), which key an item without an id.
    messages, conversation_id, turn : Any, optional
        A conversation item's messages before the judged reply, its conversation and the reply's turn.

    Returns
    -------
    str, int, float or bool
        An item that is not part of a conversation (no ``conversation_id``, no ``turn``): its id as
        :func:`canonical_item_id` converts it, as always. With a ``turn``, every turn of a conversation is its own
        item: ``"<id>#turn=<k>"`` (``"<conversation_id>/<id>#turn=<k>"`` when the conversation id is not the
        item's id). An item without an id: the key of its texts (:func:`content_item_id`), which for a
        conversation item also covers its messages, conversation id and turn.

    Raises
    ------
    ValidationError
        An item without an id and without texts to key it by.
    """
    cid, k = canonical_item_id(conversation_id), canonical_item_id(turn)
    found = canonical_item_id(item_id)
    if found is not None:
        if cid is None and k is None:
            return found
        text = str(found)
        if cid is not None and str(cid) != text:
            text = f"{cid}/{text}"
        return text if k is None else f"{text}#turn={k}"
    texts = list(texts)
    if not texts:
        raise ValidationError("an item has no id (its 'id' is missing) and no texts to key it by: give every item an "
                              "id, or pass its texts (prompt, baseline, candidate)")
    if cid is None and k is None and _messages_text(messages) is None:
        return content_item_id(*texts)  # a plain item: the key it always had
    return content_item_id(*texts, _messages_text(messages), cid, k)


def row_item_id(ids: list[Any], i: int, texts: Iterable[Any] | None = None, *, messages: Any = None,
                conversation_id: Any = None, turn: Any = None) -> str | int | float | bool:
    """The item id recorded for row ``i``.

    Its ``id`` (:func:`canonical_item_id`); for a row without one, the key of its ``texts``
    (:func:`content_item_id`); a conversation item's turn makes it its own item (:func:`item_id_of`).

    Parameters
    ----------
    ids : list
        Every row's ``id`` (``None`` for a row without one).
    i : int
        The row.
    texts : iterable, optional
        The row's texts, which key a row without an id.
    messages : object, optional
        A conversation item's messages before the judged reply.
    conversation_id : object, optional
        Its conversation.
    turn : object, optional
        The judged reply's turn.

    Returns
    -------
    str or int or float or bool
        The id recorded.

    Raises
    ------
    ValidationError
        An id-less row without ``texts``: a row's position is never its id (it is another item's).
    """
    if texts is None and canonical_item_id(ids[i]) is None:
        raise ValidationError(f"row {i} has no item id (its 'id' is missing) and no texts to key it by: "
                              "give every item an id, or pass its texts (prompt, baseline, candidate)")
    return item_id_of(ids[i], () if texts is None else texts, messages=messages, conversation_id=conversation_id,
                      turn=turn)


def item_ids(frame: Any, texts: Iterable[str] = ITEM_COLUMNS) -> list[str | int | float | bool]:
    """The item id of every row of ``frame``, as :func:`~llm_connect.grading.judge_many` records it.

    The row's ``id`` (:func:`canonical_item_id`), or for a row without one (no ``id`` column, or a missing
    value in it) the key of its ``texts`` columns (:func:`content_item_id`); a row of a conversation
    (``conversation_id`` / ``turn`` columns) is keyed by its turn too, and an id-less one by its
    ``messages`` (:func:`item_id_of`).

    Parameters
    ----------
    frame : DataFrame
        The items.
    texts : iterable of str, default ("prompt", "baseline", "candidate")
        The columns that key a row without an id.

    Returns
    -------
    list
        One id per row.
    """
    ids = column_values(frame, "id")
    columns = [column_values(frame, c) for c in texts]
    messages, cids, turns = (column_values(frame, c) for c in CONVERSATION_COLUMNS)
    return [item_id_of(ids[i], [col[i] for col in columns], messages=messages[i], conversation_id=cids[i],
                       turn=turns[i]) for i in range(len(ids))]


def conversation_tags(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The tags a conversation item's records carry: its ``conversation_id`` and ``turn``, those it has.

    Parameters
    ----------
    row : mapping
        The item.

    Returns
    -------
    dict
        Plain JSON values (:func:`canonical_item_id`); empty for an item that is not a conversation's.
    """
    out: dict[str, Any] = {}
    for key in CONVERSATION_TAGS:
        value = canonical_item_id(row.get(key))
        if value is not None:
            out[key] = value
    return out


def candidate_names(candidate_model: Any, candidate_adapter: Any = None) -> tuple[str, str]:
    """``(adapter_id, model_id)`` of an item's candidate, as :func:`~llm_connect.grading.judge_many` records them.

    Parameters
    ----------
    candidate_model : object
        Names its model (``"unknown"`` when absent or blank).
    candidate_adapter : object, optional
        Names its adapter (else the model).

    Returns
    -------
    tuple of (str, str)
        ``(adapter_id, model_id)``.

    Examples
    --------
    >>> candidate_names("gpt-x"), candidate_names(None)
    (('gpt-x', 'gpt-x'), ('unknown', 'unknown'))
    """
    model = candidate_model if isinstance(candidate_model, str) and candidate_model.strip() else "unknown"
    adapter = candidate_adapter if isinstance(candidate_adapter, str) and candidate_adapter.strip() else model
    return adapter, model


def item_key(item_id: Any, candidate_model: Any = None, candidate_adapter: Any = None) -> tuple[str, str, str]:
    """The one canonical key of a judged item: ``(id text, adapter_id, model_id)``.

    Its id as matched everywhere (:func:`item_id_text`) and its candidate (:func:`candidate_names`), so the
    same question answered by two models is two items.

    Parameters
    ----------
    item_id : object
        For a ledger observation ``tags["item_id"]``; for an item, its recorded id (:func:`item_ids`).
    candidate_model : object, optional
        The observation's ``model_id``, or the item's ``candidate_model``.
    candidate_adapter : object, optional
        The observation's ``adapter_id``, or the item's ``candidate_adapter``.

    Returns
    -------
    tuple of (str, str, str)
        The key.

    Raises
    ------
    ValidationError
        A missing id (key an id-less item by :func:`item_ids` first).

    Examples
    --------
    >>> item_key(1.0, "gpt-x")
    ('1', 'gpt-x', 'gpt-x')
    """
    text = item_id_text(item_id)
    if text is None:
        raise ValidationError("an item without an id has no key: give it an id, or key it by its texts (item_ids)")
    adapter, model = candidate_names(candidate_model, candidate_adapter)
    return text, adapter, model


# -- reading a file of items -------------------------------------------------------


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_records(text: str, name: str, *, array: bool) -> list[Any]:
    """The objects of a JSON array (``array``) or of JSON Lines; a repeated key or bad JSON is an error."""
    if array:
        try:
            records = json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{name} is not JSON: {exc.msg} (line {exc.lineno})") from None
        except _DuplicateKey as exc:
            raise ValidationError(f"{name}: an object has the key {exc.key!r} twice") from None
        if not isinstance(records, list):
            raise ValidationError(f"{name}: expected a list of JSON objects")
        return records
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line, object_pairs_hook=_unique_keys))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{name} line {n} is not JSON: {exc.msg}") from None
            except _DuplicateKey as exc:
                raise ValidationError(f"{name} line {n} has the key {exc.key!r} twice") from None
    return records


def load_items(path: str | os.PathLike[str], *, items: bool = True) -> pd.DataFrame:
    """Read a JSON Lines, JSON, CSV or TSV file of items into a DataFrame.

    Text columns stay text: no NA guessing (an empty cell is an empty string, so a blank baseline becomes an
    ``error`` row when judged, never the text ``"nan"``). A column name given twice (a CSV header, or a key
    repeated in a JSON object) is an error, never silently renamed or dropped.

    Parameters
    ----------
    path : str or os.PathLike
        The file: ``.jsonl`` or ``.ndjson`` (one JSON object a line), ``.json`` (JSON Lines, or one array of
        objects), ``.csv`` or ``.txt`` (comma-separated), ``.tsv`` or ``.tab`` (tab-separated); read as UTF-8,
        with or without a byte-order mark.
    items : bool, default True
        Whether the rows are items: ``True`` asks for the columns ``prompt`` (unless the rows have
        ``messages``), ``baseline`` (a ``reference`` column is read as it) and ``candidate``; ``False`` reads
        any table (labels, graded rows for :func:`~llm_connect.stats.estimate_quality`) as it is.

    Returns
    -------
    pandas.DataFrame
        One row per line or object, in file order, indexed 0..n-1; CSV cells as strings.

    Raises
    ------
    ValidationError
        When the file is missing or not a file, its suffix is none of the above, it cannot be decoded or
        parsed (the message names the line), a column name is repeated, it has no rows, or (``items=True``)
        an item column is missing.

    See Also
    --------
    items_frame : The same check for a frame or mappings already in memory.
    llm_connect.calibration.score_items : Takes the path itself.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "items.csv").write_text("prompt,reference,candidate\\nCapital of France?,Paris,paris\\n")
    >>> load_items(folder / "items.csv")
                   prompt baseline candidate
    0  Capital of France?    Paris     paris
    """
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise ValidationError(f"cannot read {str(p)!r}: no such file")
    if not p.is_file():
        raise ValidationError(f"cannot read {str(p)!r}: not a file")
    suffix = p.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson", ".json"):
            text = p.read_text(encoding="utf-8-sig")
            records = _json_records(text, p.name, array=suffix == ".json" and text.lstrip().startswith("["))
            if not all(isinstance(r, dict) for r in records):
                raise ValidationError(f"{p.name}: every line must be a JSON object")
            frame = pd.DataFrame.from_records(records)
        elif suffix in (".csv", ".tsv", ".tab", ".txt"):
            options: dict[str, Any] = {"sep": "\t" if suffix in (".tsv", ".tab") else ",", "dtype": str,
                                       "keep_default_na": False, "na_values": [], "encoding": "utf-8-sig"}
            header = pd.read_csv(p, header=None, nrows=1, **options)
            names = [str(c) for c in header.iloc[0].tolist()] if len(header) else []
            twice = sorted({c for c in names if names.count(c) > 1})
            if twice:
                raise ValidationError(
                    f"{p.name}: the header names the column(s) {', '.join(map(repr, twice))} more than once; "
                    "rename them so each column has its own name"
                )
            frame = pd.read_csv(p, **options)
        else:
            raise ValidationError(f"cannot read {p.name}: use a .jsonl, .csv or .tsv file")
    except ValidationError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
        raise ValidationError(f"cannot read {p.name}: {exc}") from None
    if not len(frame):
        raise ValidationError(f"{p.name} has no items (no rows after the header)" if len(frame.columns)
                              else f"{p.name} has no items")
    if not items:
        return frame
    frame = items_frame(frame, ("candidate",), aliases={"reference": "baseline"})
    required = [c for c in ITEM_COLUMNS if c != "prompt" or "messages" not in frame.columns]
    return items_frame(frame, required).reset_index(drop=True)
