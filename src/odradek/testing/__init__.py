"""The deterministic simulator and its parts: simulated disk, network and clock.

Everything here is driven by one seeded ``random.Random`` and simulated time, never by
the wall clock, so a failing seed replays byte for byte. It may import every layer
below ``shell`` and no I/O module (asyncio, socket, signal).

* :mod:`odradek.testing.sim_disk`: ``SimDisk``, a filesystem that loses unsynced data
  on a crash and injects I/O errors and bit flips.
* :mod:`odradek.testing.raft_sim`: the KRaft quorum simulator (production ``RaftNode``
  cores, :mod:`~odradek.testing.sim_network` links and partitions,
  :mod:`~odradek.testing.sim_raft_log` logs that a crash cuts back to what was flushed,
  flushes that complete later, as on the shell's sync thread); its scenarios and swarm
  configuration in :mod:`~odradek.testing.raft_swarm`; :mod:`~odradek.testing.instant_disk`
  a node whose flushes complete at once, for tests of the core alone.
* :mod:`odradek.testing.replication_sim`: partition replication on simulated brokers
  (:mod:`~odradek.testing.sim_broker`: the production ``ReplicaManager``, a
  ``BrokerState`` whose partitions' logs are real ``PartitionLog`` s on ``SimDisk``, and
  the shipped Fetch handler and ``replica_fetch`` serving followers, fetch sessions
  included; the real controller state machine) under partitions, crashes and pauses,
  with acks=all clients; a broker's loop, the faults, the checks and the swarm's
  configuration in ``replication_sim_broker_loop``, ``replication_sim_faults``,
  ``replication_sim_checks`` and ``replication_sim_config``.
* :mod:`odradek.testing.produce_history`: the checker of a produce history with
  Jepsen's definitions (acknowledged, lost, duplicated, inconsistent offsets).
"""
