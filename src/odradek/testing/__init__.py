"""The deterministic simulator and its parts: simulated disk, network and clock.

Everything here is driven by one seeded ``random.Random`` and simulated time, never by
the wall clock, so a failing seed replays byte for byte. It may import every layer
below ``shell`` and no I/O module (asyncio, socket, signal).

* :mod:`odradek.testing.sim_disk`: ``SimDisk``, a filesystem that loses unsynced data
  on a crash and injects I/O errors and bit flips.
* :mod:`odradek.testing.raft_sim`: the KRaft quorum simulator (production ``RaftNode``
  cores, :mod:`~odradek.testing.sim_network` links and partitions,
  :mod:`~odradek.testing.sim_raft_log` logs that a crash cuts back to what was flushed).
* :mod:`odradek.testing.replication_sim`: partition replication on simulated brokers
  (production ``PartitionLeader``/``PartitionFollower`` cores and the real controller
  state machine) under partitions, crashes and pauses, with acks=all clients.
* :mod:`odradek.testing.produce_history`: the checker of a produce history with
  Jepsen's definitions (acknowledged, lost, duplicated, inconsistent offsets).
"""
