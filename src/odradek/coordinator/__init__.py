"""The group coordinator: classic consumer groups and committed offsets, as pure code.

:class:`GroupCoordinator` takes decoded group requests (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups), the time
and opaque tokens, and returns :class:`Output`: responses to send and
``__consumer_offsets`` records to persist. :mod:`odradek.coordinator.records` owns those
records' bytes and :func:`partition_for`; :mod:`odradek.coordinator.lookup` answers
FindCoordinator from them. :mod:`odradek.coordinator.group` lists the modules behind the
facade and what each one owns.
"""

from odradek.coordinator.group import (
    API_VERSIONS,
    CommittedOffset,
    Group,
    GroupCoordinator,
    GroupState,
    Member,
)
from odradek.coordinator.group_config import GroupConfig
from odradek.coordinator.lookup import find_coordinator
from odradek.coordinator.outputs import Completion, Output, Record, Token, Write
from odradek.coordinator.records import partition_for

__all__ = [
    "API_VERSIONS",
    "CommittedOffset",
    "Completion",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "Member",
    "Output",
    "Record",
    "Token",
    "Write",
    "find_coordinator",
    "partition_for",
]
