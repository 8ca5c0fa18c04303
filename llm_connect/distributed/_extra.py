"""Ray, the optional dependency of :mod:`llm_connect.distributed` (the ``ray`` extra), imported when first used."""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError

__all__ = ["need_ray"]


def need_ray() -> Any:
    """The ``ray`` module, with Ray Data imported.

    Returns
    -------
    module
        ``ray`` (``import llm_connect`` never imports it; this does, when a job or a shared budget needs it).

    Raises
    ------
    MissingDependencyError
        Ray (or Ray Data) is not installed: the message names the extra (``pip install -e '.[ray]'``).
    """
    try:
        import ray
        import ray.data  # Ray Data is part of the extra: ray[data]
    except ImportError as exc:
        raise MissingDependencyError("ray[data]", "ray", "grading a Ray Dataset") from exc
    return ray
