"""The persisted election state: Kafka's ``quorum-state`` file.

A voter must never vote twice in one epoch nor forget the epoch it reached, even across
a crash, or two leaders could be elected for one epoch. So the epoch, the leader it
knows and the candidate it voted for are written here, durably, before the node acts on
them (a vote is sent only after the write returns).

The file sits in the metadata log's partition directory and is the JSON Kafka writes
(data_version 1, KIP-853)::

    {"leaderId":1,"leaderEpoch":5,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}

-1 means "none" for ids and the zero uuid means "none" for the directory id. Version 0
files (Kafka before 3.9, with extra fields and no directory id) are read too. The file is
replaced atomically: temporary file, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from odradek.core.errors import LogOfflineError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.storage.fs import FileSystem, join, write_file_atomically

QUORUM_STATE = "quorum-state"
DATA_VERSION = 1
_NONE = -1
_ZERO_UUID = uuid.UUID(int=0)


class CorruptQuorumStateError(LogOfflineError):
    """The quorum-state file cannot be parsed: the metadata log cannot be used here.

    An offline log rather than a fresh start: guessing an epoch or a vote could let this
    node vote twice in one epoch.
    """


@dataclass(frozen=True, slots=True)
class StoredQuorumState:
    """The election state as persisted: None where Kafka writes -1 or the zero uuid."""

    epoch: int
    leader_id: int | None
    voted_id: int | None
    voted_directory_id: uuid.UUID | None = None


class QuorumStateFile:
    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.path = join(directory, QUORUM_STATE)

    def read(self) -> StoredQuorumState | None:
        """The stored state, or None when no state was ever written."""
        if not self.fs.exists(self.path):
            return None
        raw = self.fs.read_file(self.path)
        try:
            document = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptQuorumStateError(self.path, f"not JSON: {e}") from None
        if not isinstance(document, dict):
            raise CorruptQuorumStateError(self.path, "not a JSON object")
        return self._parse(document)

    def write(self, state: StoredQuorumState) -> None:
        """Replace the file with ``state``; durable when this returns."""
        directory = state.voted_directory_id or _ZERO_UUID
        document = {
            "leaderId": _NONE if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": _NONE if state.voted_id is None else state.voted_id,
            "votedDirectoryId": to_kafka_str(directory),
            "data_version": DATA_VERSION,
        }
        text = json.dumps(document, separators=(",", ":"))
        write_file_atomically(self.fs, self.path, text.encode("utf-8"))

    # --- Parsing ---------------------------------------------------------------------

    def _parse(self, document: dict[str, object]) -> StoredQuorumState:
        version = self._int(document, "data_version")
        if version not in (0, 1):
            raise CorruptQuorumStateError(self.path, f"unsupported data_version {version}")
        epoch = self._int(document, "leaderEpoch")
        leader_id = self._int(document, "leaderId")
        voted_id = self._int(document, "votedId")
        if epoch < 0 or leader_id < _NONE or voted_id < _NONE:
            raise CorruptQuorumStateError(
                self.path,
                f"impossible state: leaderEpoch {epoch}, leaderId {leader_id}, votedId {voted_id}",
            )
        voted_directory_id = self._directory_id(document) if version >= 1 else None
        if voted_id == _NONE and voted_directory_id is not None:
            raise CorruptQuorumStateError(self.path, "votedDirectoryId without a votedId")
        return StoredQuorumState(
            epoch=epoch,
            leader_id=None if leader_id == _NONE else leader_id,
            voted_id=None if voted_id == _NONE else voted_id,
            voted_directory_id=voted_directory_id,
        )

    def _int(self, document: dict[str, object], name: str) -> int:
        value = document.get(name)
        # bool is an int in Python, not in JSON: true is not an epoch.
        if not isinstance(value, int) or isinstance(value, bool):
            raise CorruptQuorumStateError(self.path, f"{name} is missing or not an integer")
        return value

    def _directory_id(self, document: dict[str, object]) -> uuid.UUID | None:
        value = document.get("votedDirectoryId", to_kafka_str(_ZERO_UUID))
        if not isinstance(value, str):
            raise CorruptQuorumStateError(self.path, "votedDirectoryId is not a string")
        try:
            parsed = from_kafka_str(value)
        except ValueError as e:
            raise CorruptQuorumStateError(self.path, f"votedDirectoryId: {e}") from None
        return None if parsed == _ZERO_UUID else parsed
