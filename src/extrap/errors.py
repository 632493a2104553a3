"""User-facing errors.

Anything a user can get wrong (a bad flag, an unknown scheme, a missing corpus)
raises :class:`ExtrapError`.  The CLI prints its message on one line and exits
with status 2; it never shows a traceback for these.
"""


class ExtrapError(ValueError):
    """A mistake in user input, reported as one line and exit status 2."""


class DiskFullError(ExtrapError):
    """A write stopped because the file system is full; what was complete before it is kept."""


class RunInUseError(ExtrapError):
    """Another process holds the run directory's lock."""
