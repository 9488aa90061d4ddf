"""Every exception Odradek raises, in one hierarchy.

::

    OdradekError
    ├── InvariantError            a bug: a rule the code relies on was broken; stop loudly
    ├── ProtocolError             Kafka wire protocol trouble
    │   ├── RemoteProtocolError   the peer sent something we cannot accept; close that
    │   │   │                     connection only
    │   │   ├── DecodeError           bytes that are not a valid message of that version
    │   │   ├── FrameTooLargeError    a size prefix above the configured maximum
    │   │   └── InvalidRecordBatchError  a record batch that fails validation (has .problem)
    │   └── EncodeError           we were asked to encode something the version cannot carry
    │       └── UnsupportedVersionError  an API version outside the schema's valid range
    ├── CorruptLogError           a file on disk failed validation (names file and position)
    ├── StorageError              a partition's log cannot be used on this node
    │   ├── LogOfflineError           the log went offline (I/O error, corruption); has .reason
    │   └── OffsetOutOfRangeError     a read below the log start or past the log end
    └── ConfigError               a configuration key is unknown or its value invalid

Kafka outcomes such as NOT_LEADER_OR_FOLLOWER are never exceptions: they are error codes
carried as values in responses (see ``odradek.protocol.error_codes``).
"""

from __future__ import annotations


class OdradekError(Exception):
    """Base of every exception raised by Odradek."""


class InvariantError(OdradekError):
    """A rule the code relies on was broken: a bug, never a recoverable condition."""


class ProtocolError(OdradekError):
    """Something about the Kafka wire protocol went wrong."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol. The shell closes that one connection and logs why."""


class DecodeError(RemoteProtocolError):
    """Bytes that do not decode as the expected message and version."""


class FrameTooLargeError(RemoteProtocolError):
    """A frame's size prefix exceeds the configured maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {max_size} bytes")
        self.size = size
        self.max_size = max_size


class InvalidRecordBatchError(RemoteProtocolError):
    """A record batch failed validation; ``problem`` names what is wrong."""

    def __init__(self, problem: str, detail: str) -> None:
        super().__init__(f"{problem}: {detail}")
        self.problem = problem
        self.detail = detail


class EncodeError(ProtocolError):
    """A value cannot be encoded in the requested version (a bug on our side)."""


class UnsupportedVersionError(EncodeError):
    """An API version outside the range that a message schema supports."""


class CorruptLogError(OdradekError):
    """A log file failed validation at a known position."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path} at position {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptLogError], tuple[str, int, str]]:
        # A cleaning pass in a worker process sends it back to the node whole.
        return (type(self), (self.path, self.position, self.reason))


class StorageError(OdradekError):
    """A partition's log cannot serve this request on this node."""


class LogOfflineError(StorageError):
    """The log is offline on this node (Kafka's KAFKA_STORAGE_ERROR); ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} is offline: {reason}")
        self.path = path
        self.reason = reason


class OffsetOutOfRangeError(StorageError):
    """An offset below the log start offset or above the log end offset."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class ConfigError(OdradekError):
    """A configuration key is unknown or has an invalid value."""
