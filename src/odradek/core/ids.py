"""Kafka's identifiers as distinct types, so that an offset is never passed as an epoch."""

from __future__ import annotations

from typing import NewType

Offset = NewType("Offset", int)
Epoch = NewType("Epoch", int)
LeaderEpoch = NewType("LeaderEpoch", int)
BrokerId = NewType("BrokerId", int)
NodeId = NewType("NodeId", int)
PartitionIndex = NewType("PartitionIndex", int)
ProducerId = NewType("ProducerId", int)
