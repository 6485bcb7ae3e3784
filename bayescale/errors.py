"""Exceptions with messages that say what is wrong and what to do."""


class BayescaleError(Exception):
    """Base class of bayescale's own errors."""


class RunTableError(BayescaleError, ValueError):
    """The run table cannot be used as given (missing column, NaN, non-positive size, too few points, ...)."""


class UnknownLawError(BayescaleError, KeyError):
    """No law of that name is registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class FitFileError(BayescaleError, OSError):
    """A saved fit cannot be read back (missing, corrupt, or made by an unregistered law)."""


class SettingError(BayescaleError, ValueError):
    """An option has a value it cannot take (a level outside (0, 1), a negative extrapolation error, ...)."""
