"""``open_ledger``: the ledger at a path or URI, of the right class.

It sits above :mod:`._base`, :mod:`._ledger` and :mod:`._parquet` (it imports
both subclasses), so none of them imports it back.
"""

from __future__ import annotations

import os
from typing import Any

from ._base import BaseLedger, is_parquet_location
from ._ledger import QualityLedger
from ._parquet import ParquetLedger

__all__ = ["open_ledger"]


def open_ledger(location: str | os.PathLike[str], **kwargs: Any) -> BaseLedger:
    """The ledger at ``location``, of the right class.

    Parameters
    ----------
    location : str or os.PathLike
        A URI (``s3://...``, ``file://...``) or a directory: a :class:`ParquetLedger`; anything else (a JSON
        Lines file, existing or not): a :class:`QualityLedger`.
    **kwargs
        Go to the class's constructor.

    Returns
    -------
    BaseLedger
        The ledger.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> type(open_ledger(folder / "ledger.jsonl")).__name__, type(open_ledger(folder)).__name__
    ('QualityLedger', 'ParquetLedger')
    """
    if is_parquet_location(location):
        return ParquetLedger(location, **kwargs)
    return QualityLedger(location, **kwargs)
