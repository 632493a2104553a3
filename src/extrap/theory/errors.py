"""Why a series cannot be summed: the engine reports these as a null TRF with the reason."""

from __future__ import annotations


class SeriesError(Exception):
    """The series cannot be summed reliably (reported as a null TRF with the reason)."""


class InfiniteTerm(SeriesError):
    """Some b_t is +oo (r(t) = +oo at a finite distance): the sum is infinite."""


class NotReal(SeriesError):
    """Some b_t is not a real number (e.g. the log of a negative number)."""
