"""Partition replication: leader and follower state of one partition, kept pure.

``odradek.replication.leader`` owns a partition leader's decisions (follower positions,
the ISR with KIP-497's pending changes, the high watermark frozen under
``min.insync.replicas`` as KIP-966 has it, acks=all outcomes, AlterPartition
proposals); ``odradek.replication.follower`` a follower's (what to fetch, truncation by
leader epoch, the follower's high watermark). ``odradek.replication.producer_state``
owns the idempotent producers' state of a partition (Kafka's ``ProducerStateManager``):
which batches are duplicates, which sequence numbers and producer epochs are
acceptable. Like every module of this layer they import only ``core`` and ``protocol``
and never do I/O; the broker and the shell wire them to storage and the network.
"""
