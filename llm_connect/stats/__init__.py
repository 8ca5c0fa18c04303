"""Statistics on arrays and DataFrames: no judges, no I/O, no drawing.

Like :mod:`scipy.stats`, every function here takes numbers (arrays, Series,
DataFrames) and returns numbers (floats, arrays, DataFrames, small frozen
dataclasses). The floor imports nothing from the package but
:mod:`llm_connect.errors`, and never matplotlib, ipywidgets or IPython; the
objects that run judges and people through these functions live in
:mod:`llm_connect.calibration`, and their pictures in :mod:`llm_connect.views`.
Bad input raises :class:`~llm_connect.errors.ValidationError` (a ``ValueError``).

=========================  ======================================================
module                     what
=========================  ======================================================
``stats.estimates``        mean quality from judge scores and a few labels: PPI,
                           PPI++, IPW (active inference), ``labels_needed``
=========================  ======================================================

A new statistic goes here, in the module of its kind, with its paper cited in
the docstring and a test against a well-kept reference implementation.
"""

from .estimates import ESTIMATE_METHODS, estimate_quality, labels_needed

__all__ = ["ESTIMATE_METHODS", "estimate_quality", "labels_needed"]
