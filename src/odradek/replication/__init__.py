"""Partition replication: leader and follower state of one partition, kept pure.

``odradek.replication.producer_state`` owns the idempotent producers' state of a
partition (Kafka's ``ProducerStateManager``): which batches are duplicates, which
sequence numbers and producer epochs are acceptable. Like every module of this layer
it imports only ``core`` and ``protocol`` and never does I/O; the broker wires it to
storage and the network.
"""
