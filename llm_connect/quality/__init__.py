"""The quality contract: ``QualityObservation``, the JSON Lines ``QualityLedger``, ``is_stale``.

Durability model
----------------
- ``append`` holds a process-local :class:`threading.Lock` and a
  :class:`filelock.FileLock` on ``<path>.lock``, re-opens the file with
  ``O_APPEND`` (so a concurrent ``prune_before`` that replaced it is seen),
  writes one whole line with one ``write`` and flushes (``fsync=True`` also
  fsyncs). If the file does not end with a newline (a writer was killed
  mid-line), the new line starts on a fresh line, so a torn line never
  swallows the next observation.
- ``prune_before`` holds both locks, writes the kept lines to a temporary file
  in the same directory, fsyncs it and ``os.replace``-s it over the ledger: a
  crash leaves the old or the new ledger, never a mix.
- Readers do not lock: they see whole lines, skip malformed ones and count them.
- The ledger's path is resolved once, at construction (``os.path.realpath``):
  the lock (``<real path>.lock``), the temporary file of ``prune_before`` and
  its rename all use the real file, so a symbolic link and its target share one
  lock and a link stays a link. ``path`` is still the path as given.
- A line longer than ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`, 1 MiB,
  newline not counted) is malformed: counted and skipped by every reader, copied
  unchanged by ``prune_before``, and read in bounded chunks, never whole.
  ``append`` refuses (``ValidationError``) an observation whose line would be
  longer, before writing anything.
- Text must be valid Unicode: a lone surrogate in any string field, tag key or
  tag value is a ``ValidationError`` naming the field, and a line whose JSON
  escapes decode to one (``"\\ud800"``) is malformed.
- A ledger file with no write permission bit at all is read-only: ``append``,
  ``extend`` and ``prune_before`` refuse it with ``PermissionError`` (even for
  root, whom the kernel would let write), and ``prune_before`` needs exactly
  the access ``append`` needs (it opens the file for writing first), so it
  never replaces a file it could not append to. OS errors name the ledger, the
  file at fault and what to do, and keep their ``OSError`` subclass.

Speed
-----
``append`` serialises with the C string encoder (no intermediate dict), keeps
one :class:`filelock.FileLock` per ledger object and process (re-created after
a ``fork``) and polls it every millisecond under contention; the per-call
acquire/release of that lock is most of an append's cost. Readers parse each
line with a fast path that accepts only lines the full
:meth:`QualityObservation.from_dict` would accept, with the same result, and
hand every other line to ``from_dict`` itself.

Layout
------
- ``_observation``: :class:`QualityObservation` (its validation and
  ``from_dict``, the one full reader of a record) and :func:`is_stale`.
- ``_ledger_io``: the ledger's I/O, the one place that writes a line, splits a
  file into lines and parses them -- one line at a time (with its fast path),
  streamed with bounded reads, or in blocks read as columns by pyarrow (what
  :func:`llm_connect.frames.ledger_frame` builds its frames from).
- ``_ledger``: :class:`QualityLedger`, the file: locks, appends, queries,
  ``prune_before``.
- ``_base``: :class:`BaseLedger`, what every ledger offers (code that reads a
  ledger checks ``isinstance(x, BaseLedger)``), the queries written once
  (``read_all``, ``by_task_type``, ``recent``, ``mean_quality``), and
  ``is_parquet_location`` (a URI or an existing directory).
- ``_once``: recording once -- the key of a judgment (item, grader, rubric,
  candidate) and of a label (item, annotator), the keys a ledger holds, and
  :class:`Recorded`; ``extend_once`` of both classes (and of ``BaseLedger``)
  skips what the ledger holds, under the ledger's lock, reading only what is new.
- ``_open``: :func:`open_ledger` (a URI or a directory is a ``ParquetLedger``,
  anything else a ``QualityLedger``), above both classes.
- ``_parquet``: :class:`ParquetLedger`, the same queries over a directory or
  object-store prefix of Parquet files partitioned by task type and date, which
  any number of writers on any number of hosts extend without a lock;
  retried writes of one keyed judgment are read once (:data:`DEDUPE_TAGS`),
  and ``prune_before`` / ``compact`` rewrite it safely while others append.

Public names
------------
=========================  =====================================================
``QualityObservation``     one observed outcome (quality, cost, latency, tokens)
``QualityLedger``          the JSON Lines ledger file, many writers on one host
``ParquetLedger``          the Parquet ledger, lock-free, many writers and hosts
``BaseLedger``             what both offer; accept it to accept either
``open_ledger``            the ledger at a path or URI, of the right class
``DEDUPE_TAGS``            the tags keying a judgment for deduplication
``Recorded``               what ``extend_once`` wrote, and what the ledger held already
``is_stale``               whether an observation is older than a max age
``MAX_LINE_BYTES``         the longest line a JSON Lines ledger reads
=========================  =====================================================
"""

from ._base import BaseLedger
from ._ledger import QualityLedger
from ._ledger_io import MAX_LINE_BYTES
from ._observation import TAGS_MAX_DEPTH, QualityObservation, is_stale
from ._once import Recorded
from ._open import open_ledger
from ._parquet import DEDUPE_TAGS, ParquetLedger

__all__ = [
    "DEDUPE_TAGS",
    "MAX_LINE_BYTES",
    "TAGS_MAX_DEPTH",
    "BaseLedger",
    "ParquetLedger",
    "QualityLedger",
    "QualityObservation",
    "Recorded",
    "is_stale",
    "open_ledger",
]
