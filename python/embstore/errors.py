"""Exceptions raised by embstore. Each carries embstore's message, which names the server, table,
file or row that failed and what was wrong."""


class EmbstoreError(Exception):
    """Base class of every embstore error."""


class NotFoundError(EmbstoreError, LookupError):
    """A table, file or key does not exist."""


class InvalidArgumentError(EmbstoreError, ValueError):
    """A malformed request: bad row range, bad option, bad table name."""


class OutOfRangeError(EmbstoreError, IndexError):
    """Rows past the end of a table."""


class CorruptionError(EmbstoreError):
    """Data failed verification (checksum mismatch, malformed table file)."""


class UnavailableError(EmbstoreError, ConnectionError):
    """The server could not be reached, or went away and did not come back in time."""


class DeadlineExceededError(EmbstoreError, TimeoutError):
    """The load did not finish before its timeout."""


class PermissionError_(EmbstoreError, PermissionError):
    """The server refused the credentials (token or client certificate)."""


class AlreadyExistsError(EmbstoreError, FileExistsError):
    """Refusing to replace an existing file."""


class FailedPreconditionError(EmbstoreError):
    """The operation cannot run in this state (for example, the table changed during a load)."""


class CancelledError(EmbstoreError):
    """The load was cancelled."""


class MissingKeysError(NotFoundError, KeyError):
    """Some requested keys are not in the table (with missing="error")."""

    def __init__(self, table, missing):
        self.missing = list(missing)
        shown = ", ".join(repr(k) for k in self.missing[:5])
        more = f" and {len(self.missing) - 5} more" if len(self.missing) > 5 else ""
        super().__init__(f"table {table!r} lacks {len(self.missing)} of the requested keys: "
                         f"{shown}{more}")

    def __str__(self):  # KeyError would otherwise print the repr of the message
        return self.args[0]
