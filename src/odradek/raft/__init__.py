"""The KRaft core (KIP-595): elections, log replication and the high watermark, as a pure
state machine. See :mod:`odradek.raft.core` for the driving contract."""
