"""Every server key we understand, declared once: name, type, default, validator, doc.

This module owns :class:`ServerKeys`, one :class:`~odradek.core.config_keys.Setting`
attribute per ``server.properties`` key, under Kafka's names with Kafka's types and
defaults, except where ours are safer (listed below), and :data:`SERVER_CONFIG_DEF`, the
table made from those declarations, which parsing, DescribeConfigs and the key's
documentation all read. :class:`~odradek.broker.server_config.ServerConfig` inherits the
declarations: ``config.log_segment_bytes`` is the typed value of ``log.segment.bytes``.

A key whose value is read only through a value Kafka derives from it (``log.retention.ms``
over ``log.retention.minutes`` over ``log.retention.hours``; ``listeners`` as endpoints)
is declared under a name that starts with ``_``; ServerConfig's public attribute of the
same name without it is the derived value.

Where our defaults differ from Kafka's, and why:

* ``default.replication.factor``: Kafka 1; ours unset, meaning ``min(3, brokers)``. One
  copy of a partition is one disk failure from losing acknowledged data.
* ``min.insync.replicas``: Kafka 1; ours unset, meaning a majority of the replication
  factor (``rf // 2 + 1``), so that ``acks=all`` survives the loss of any minority.
* ``odradek.flush.before.ack`` (ours, true): ``acks=all`` is answered only after the
  leader and the in-sync followers have fsynced the batch. Kafka answers from the page
  cache and relies on replication alone; a correlated power loss then loses data.
* ``quarantine.max.bytes`` (ours, 1 GiB): records cut by truncation are moved aside,
  up to this many bytes per partition, instead of being deleted.
* ``queued.max.request.bytes``: Kafka -1 (unbounded); ours 256 MiB per listener, so
  that many connections sending large requests at once cannot exhaust the memory.
* ``odradek.connections.partial.request.timeout.ms`` (ours, 30 s): a connection whose
  request has been arriving this long without completing is closed (a slow-loris client
  that sends a byte now and then is never idle, so ``connections.max.idle.ms`` would
  keep it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from odradek.broker.endpoints import (
    SECURITY_PROTOCOLS,
    HostPortListValidator,
    PerIpOverridesValidator,
    ProtocolMapValidator,
    VotersValidator,
)
from odradek.core.config_keys import (
    INT_MAX,
    LONG_MAX,
    REQUIRED,
    BoolKey,
    ConfigValue,
    DoubleKey,
    Importance,
    IntKey,
    ListKey,
    LongKey,
    OneOf,
    OptionalIntKey,
    OptionalListKey,
    OptionalLongKey,
    OptionalPasswordKey,
    OptionalStringKey,
    Range,
    ShortKey,
    StringKey,
    ValidList,
    config_def_of,
)

__all__ = [
    "BROKER_ROLE",
    "COMPRESSION_TYPES",
    "CONTROLLER_ROLE",
    "GIB",
    "KIB",
    "MIB",
    "SERVER_CONFIG_DEF",
    "ServerKeys",
]

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB

BROKER_ROLE: Final = "broker"
CONTROLLER_ROLE: Final = "controller"
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_H = Importance.HIGH
_M = Importance.MEDIUM
_LOW = Importance.LOW
_POSITIVE = Range.at_least(1)
_NON_NEGATIVE = Range.at_least(0)
_DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


class ServerKeys:
    """The declarations of every server key, in the order Kafka's documentation groups them.

    A subclass provides :attr:`values` (the typed value of every key, as
    :data:`SERVER_CONFIG_DEF` parses them); each attribute below then reads its key.
    """

    @property
    def values(self) -> Mapping[str, ConfigValue]:
        raise NotImplementedError

    # fmt: off
    # --- Node identity and KRaft -------------------------------------------------------
    node_id = IntKey("node.id", REQUIRED,
        "This node's id, unique in the cluster.", validator=_NON_NEGATIVE, importance=_H)
    broker_id = OptionalIntKey("broker.id", None,
        "Old name of node.id; when set it must equal node.id.",
        validator=_NON_NEGATIVE, importance=_H)
    _process_roles = ListKey("process.roles", REQUIRED,
        "The roles this node plays: broker, controller or both.",
        validator=ValidList(BROKER_ROLE, CONTROLLER_ROLE, allow_empty=False), importance=_H)
    broker_rack = OptionalStringKey("broker.rack", None,
        "Rack of this broker, used to spread replicas.", importance=_M)
    _controller_listener_names = ListKey("controller.listener.names", [],
        "Listener names the controllers use.", validator=ValidList(), importance=_H)
    _controller_quorum_voters = ListKey("controller.quorum.voters", [],
        "Static controller quorum as {id}@{host}:{port} entries.",
        validator=VotersValidator(), importance=_H)
    _controller_quorum_bootstrap_servers = ListKey("controller.quorum.bootstrap.servers", [],
        "Controllers to contact first, as {host}:{port} entries.",
        validator=HostPortListValidator(), importance=_H)
    controller_quorum_election_timeout_ms = IntKey("controller.quorum.election.timeout.ms", 1000,
        "How long a voter waits without a leader before it starts an election.",
        validator=_POSITIVE, importance=_H)
    controller_quorum_fetch_timeout_ms = IntKey("controller.quorum.fetch.timeout.ms", 2000,
        "How long without a successful fetch before a voter suspects the leader.",
        validator=_POSITIVE, importance=_H)
    controller_quorum_election_backoff_max_ms = IntKey(
        "controller.quorum.election.backoff.max.ms", 1000,
        "Upper bound of the random back-off between failed elections.",
        validator=_POSITIVE, importance=_H)
    controller_quorum_append_linger_ms = IntKey("controller.quorum.append.linger.ms", 25,
        "How long the quorum leader gathers writes before it flushes them.",
        validator=_NON_NEGATIVE)
    controller_quorum_request_timeout_ms = IntKey("controller.quorum.request.timeout.ms", 2000,
        "Timeout of one request between quorum members.", validator=_POSITIVE)
    controller_quorum_retry_backoff_ms = IntKey("controller.quorum.retry.backoff.ms", 20,
        "Pause before a failed quorum request is retried.",
        validator=_NON_NEGATIVE, importance=_LOW)
    broker_session_timeout_ms = IntKey("broker.session.timeout.ms", 9000,
        "A broker without a heartbeat for this long is fenced by the controller.",
        validator=_POSITIVE)
    broker_session_connection_loss_ms = IntKey("broker.session.connection.loss.ms", 500,
        "Odradek: when the connection a broker heartbeats on closes (its process died or its host "
        "reset the connection), the active controller fences it after this long without a new "
        "heartbeat, instead of waiting for broker.session.timeout.ms. -1 turns this off. A silent "
        "failure (a cut link, a paused process) still takes the session timeout.",
        validator=Range.at_least(-1), importance=_LOW)
    broker_heartbeat_interval_ms = IntKey("broker.heartbeat.interval.ms", 2000,
        "How often a broker sends a heartbeat to the controller.", validator=_POSITIVE)
    initial_broker_registration_timeout_ms = IntKey("initial.broker.registration.timeout.ms", 60000,
        "How long a starting broker waits for its registration to be accepted.",
        validator=_POSITIVE)
    _metadata_log_dir = OptionalStringKey("metadata.log.dir", None,
        "Directory of the metadata log; the first log directory when unset.", importance=_H)
    metadata_log_segment_bytes = IntKey("metadata.log.segment.bytes", GIB,
        "Segment size of the metadata log.", validator=Range.at_least(12), importance=_H)
    metadata_log_segment_ms = LongKey("metadata.log.segment.ms", 604_800_000,
        "Age after which the metadata log rolls a new segment.", validator=_POSITIVE, importance=_H)
    metadata_max_retention_bytes = LongKey("metadata.max.retention.bytes", 100 * MIB,
        "Metadata log size kept before old snapshots and segments are deleted.")
    metadata_max_retention_ms = LongKey("metadata.max.retention.ms", 604_800_000,
        "Age of metadata log segments and snapshots kept before deletion.")
    metadata_max_idle_interval_ms = IntKey("metadata.max.idle.interval.ms", 500,
        "How often an idle controller appends a no-op record (0 turns this off).",
        validator=_NON_NEGATIVE, importance=_LOW)
    metadata_quorum_stall_alarm_ms = IntKey("metadata.quorum.stall.alarm.ms", 10_000,
        "Odradek: raise the alarm 'metadata quorum stalled' when the metadata high watermark has "
        "not moved for this long (it moves at least every metadata.max.idle.interval.ms while the "
        "quorum works).", validator=_POSITIVE, importance=_LOW)
    metadata_log_max_record_bytes_between_snapshots = LongKey(
        "metadata.log.max.record.bytes.between.snapshots", 20 * MIB,
        "Metadata bytes appended after which a new snapshot is written.",
        validator=_POSITIVE, importance=_H)
    metadata_log_max_snapshot_interval_ms = LongKey(
        "metadata.log.max.snapshot.interval.ms", 3_600_000,
        "Longest time between metadata snapshots (0 turns the timer off).",
        validator=_NON_NEGATIVE, importance=_H)
    # --- Sockets and listeners ---------------------------------------------------------
    _listeners = ListKey("listeners", ["PLAINTEXT://:9092"],
        "Addresses this node listens on, as NAME://host:port.",
        validator=ValidList(allow_empty=False), importance=_H, dynamic=True)
    _advertised_listeners = OptionalListKey("advertised.listeners", None,
        "Addresses given to clients and peers; the listeners when unset.",
        validator=ValidList(), importance=_H, dynamic=True)
    _listener_security_protocol_map = StringKey(
        "listener.security.protocol.map", _DEFAULT_PROTOCOL_MAP,
        "Security protocol of each listener name, as NAME:PROTOCOL pairs.",
        validator=ProtocolMapValidator(), importance=_LOW, dynamic=True)
    _inter_broker_listener_name = OptionalStringKey("inter.broker.listener.name", None,
        "Listener brokers use to talk to each other.", importance=_M)
    _inter_broker_security_protocol = StringKey("inter.broker.security.protocol", "PLAINTEXT",
        "Protocol between brokers when inter.broker.listener.name is unset.",
        validator=OneOf(*SECURITY_PROTOCOLS))
    socket_send_buffer_bytes = IntKey("socket.send.buffer.bytes", 100 * KIB,
        "SO_SNDBUF of server sockets (-1: the OS default).", importance=_H)
    socket_receive_buffer_bytes = IntKey("socket.receive.buffer.bytes", 100 * KIB,
        "SO_RCVBUF of server sockets (-1: the OS default).", importance=_H)
    socket_request_max_bytes = IntKey("socket.request.max.bytes", 100 * MIB,
        "Largest request a client may send; larger frames close the connection.",
        validator=_POSITIVE, importance=_H)
    socket_listen_backlog_size = IntKey("socket.listen.backlog.size", 50,
        "Backlog of pending connections per listener.", validator=_POSITIVE)
    num_network_threads = IntKey("num.network.threads", 3,
        "Accepted for compatibility; the event loop serves every connection.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    num_io_threads = IntKey("num.io.threads", 8,
        "Accepted for compatibility; requests are handled on the event loop.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    background_threads = IntKey("background.threads", 10,
        "Accepted for compatibility; background work is scheduled on the event loop.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    queued_max_requests = IntKey("queued.max.requests", 500,
        "Requests a listener's connections may have in progress beyond the first of each "
        "connection before it stops reading from them.", validator=_POSITIVE, importance=_H)
    queued_max_request_bytes = LongKey("queued.max.request.bytes", 256 * MIB,
        "Bytes of requests a listener holds (received, not yet answered) before it stops reading; "
        "-1: unbounded.", validator=Range.at_least(-1))
    max_connections = IntKey("max.connections", INT_MAX,
        "Most connections each listener keeps open; over it a new connection is closed at once.",
        validator=_NON_NEGATIVE, dynamic=True)
    max_connections_per_ip = IntKey("max.connections.per.ip", INT_MAX,
        "Most connections accepted from one address.", validator=_NON_NEGATIVE, dynamic=True)
    _max_connections_per_ip_overrides = StringKey("max.connections.per.ip.overrides", "",
        "Per-address limits as host:count pairs, in place of max.connections.per.ip.",
        validator=PerIpOverridesValidator(), dynamic=True)
    connections_max_idle_ms = LongKey("connections.max.idle.ms", 600_000,
        "Idle connections are closed after this long.")
    request_timeout_ms = IntKey("request.timeout.ms", 30000,
        "How long the node waits for a reply to its own requests to peers.",
        validator=_NON_NEGATIVE)
    # --- TLS and SASL (read as text by security/ssl_keys.py and security/sasl_keys.py;
    # declared here so that DescribeConfigs lists them, the secrets as sensitive) -------
    _ssl_keystore_type = StringKey("ssl.keystore.type", "JKS",
        "Key store format: PEM or PKCS12 (JKS is refused with the keytool conversion).")
    _ssl_keystore_location = OptionalStringKey("ssl.keystore.location", None,
        "Key store file: the private key and certificate chain.")
    _ssl_keystore_password = OptionalPasswordKey("ssl.keystore.password", None,
        "Password of a PKCS12 key store.")
    _ssl_keystore_certificate_chain = OptionalPasswordKey("ssl.keystore.certificate.chain",
        None, "The certificate chain as PEM text (a PEM key store without a file).")
    _ssl_keystore_key = OptionalPasswordKey("ssl.keystore.key", None,
        "The private key as PEM text (a PEM key store without a file).")
    _ssl_key_password = OptionalPasswordKey("ssl.key.password", None,
        "Password of an encrypted private key.")
    _ssl_truststore_type = StringKey("ssl.truststore.type", "JKS",
        "Trust store format: PEM or PKCS12.")
    _ssl_truststore_location = OptionalStringKey("ssl.truststore.location", None,
        "Trust store file: the certificates peers are checked against.")
    _ssl_truststore_password = OptionalPasswordKey("ssl.truststore.password", None,
        "Password of a PKCS12 trust store.")
    _ssl_truststore_certificates = OptionalPasswordKey("ssl.truststore.certificates", None,
        "Trusted certificates as PEM text.")
    _ssl_client_auth = StringKey("ssl.client.auth", "none",
        "Whether clients must present a certificate: none, requested or required.")
    _ssl_enabled_protocols = ListKey("ssl.enabled.protocols", ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted.")
    _ssl_protocol = StringKey("ssl.protocol", "TLSv1.3", "The TLS protocol.")
    _ssl_cipher_suites = ListKey("ssl.cipher.suites", [],
        "Cipher suites (refused when set: Java's names do not map onto OpenSSL here).")
    _ssl_endpoint_identification_algorithm = StringKey(
        "ssl.endpoint.identification.algorithm", "https",
        "https checks a peer's host name against its certificate; empty does not.")
    _ssl_principal_mapping_rules = StringKey("ssl.principal.mapping.rules", "DEFAULT",
        "Rules that map a certificate's subject to a principal name.")
    _sasl_enabled_mechanisms = ListKey("sasl.enabled.mechanisms", ["GSSAPI"],
        "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI is refused).")
    _sasl_mechanism_inter_broker_protocol = StringKey("sasl.mechanism.inter.broker.protocol",
        "GSSAPI", "The mechanism brokers log in to each other with.")
    _sasl_mechanism_controller_protocol = StringKey("sasl.mechanism.controller.protocol",
        "GSSAPI", "The mechanism nodes log in to the controllers with.")
    _connections_max_reauth_ms = LongKey("connections.max.reauth.ms", 0,
        "Lifetime of a SASL session (KIP-368); 0: no limit.", validator=Range.at_least(0))
    _connection_failed_authentication_delay_ms = IntKey(
        "connection.failed.authentication.delay.ms", 100,
        "How long a failed SASL login waits for its answer (KIP-306).",
        validator=Range.at_least(0))
    _sasl_server_max_receive_size = IntKey("sasl.server.max.receive.size", 524_288,
        "Largest frame before a SASL login completes.", validator=Range.at_least(1))

    # --- Authorization -----------------------------------------------------------------
    authorizer_class_name = StringKey("authorizer.class.name", "",
        "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or "
        "odradek.StandardAuthorizer) checks every request against the ACLs in the "
        "metadata log; empty, Kafka's default, lets every client do anything.",
        importance=_H)
    super_users = StringKey("super.users", "",
        "Principals (User:name;User:other) the authorizer allows everything.",
        importance=_H)
    allow_everyone_if_no_acl_found = BoolKey("allow.everyone.if.no.acl.found", False,
        "Whether a resource no ACL names is open to everyone (the authorizer only).",
        importance=_H)
    # --- Logs --------------------------------------------------------------------------
    _log_dirs = OptionalListKey("log.dirs", None,
        "Directories that hold partition logs; wins over log.dir.",
        validator=ValidList(allow_empty=False, unique=True), importance=_H)
    _log_dir = ListKey("log.dir", ["/tmp/kafka-logs"],
        "Directory that holds partition logs when log.dirs is unset.",
        validator=ValidList(allow_empty=False, unique=True), importance=_H)
    num_partitions = IntKey("num.partitions", 1,
        "Partitions of a topic created without a count.", validator=_POSITIVE)
    default_replication_factor = OptionalIntKey("default.replication.factor", None,
        "Replicas of a topic created without a factor; unset means min(3, brokers).",
        validator=_POSITIVE)
    min_insync_replicas = OptionalIntKey("min.insync.replicas", None,
        "In-sync replicas acks=all needs; unset means a majority of the replicas.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    unclean_leader_election_enable = BoolKey("unclean.leader.election.enable", False,
        "Whether an out-of-sync replica may become leader, losing records.",
        importance=_H, dynamic=True)
    auto_create_topics_enable = BoolKey("auto.create.topics.enable", True,
        "Whether a Metadata request for a missing topic creates it.", importance=_H)
    auto_leader_rebalance_enable = BoolKey("auto.leader.rebalance.enable", True,
        "Whether leadership moves back to preferred replicas on its own.", importance=_H)
    leader_imbalance_per_broker_percentage = IntKey("leader.imbalance.per.broker.percentage", 10,
        "Imbalance of leaders per broker tolerated before a rebalance.", importance=_H)
    leader_imbalance_check_interval_seconds = LongKey(
        "leader.imbalance.check.interval.seconds", 300,
        "How often leader balance is checked.", validator=_POSITIVE, importance=_H)
    delete_topic_enable = BoolKey("delete.topic.enable", True,
        "Whether topics may be deleted.", importance=_H)
    compression_type = StringKey("compression.type", "producer",
        "Compression of stored batches; producer keeps what the producer sent.",
        validator=OneOf(*COMPRESSION_TYPES), importance=_H, dynamic=True)
    message_max_bytes = IntKey("message.max.bytes", 1_048_588,
        "Largest record batch a topic accepts (topic config max.message.bytes).",
        validator=_NON_NEGATIVE, importance=_H, dynamic=True)
    log_segment_bytes = IntKey("log.segment.bytes", GIB,
        "Size at which a log rolls a new segment.",
        validator=Range.at_least(MIB), importance=_H, dynamic=True)
    _log_roll_ms = OptionalLongKey("log.roll.ms", None,
        "Age at which a log rolls a new segment; wins over hours.", importance=_H, dynamic=True)
    _log_roll_hours = IntKey("log.roll.hours", 168,
        "Age in hours at which a log rolls a new segment.", validator=_POSITIVE, importance=_H)
    log_roll_jitter_ms = OptionalLongKey("log.roll.jitter.ms", None,
        "Random jitter subtracted from the roll age.", importance=_H, dynamic=True)
    log_roll_jitter_hours = IntKey("log.roll.jitter.hours", 0,
        "Random jitter in hours subtracted from the roll age.",
        validator=_NON_NEGATIVE, importance=_H)
    _log_retention_ms = OptionalLongKey("log.retention.ms", None,
        "Age after which segments are deleted (-1: forever); wins over minutes and hours.",
        importance=_H, dynamic=True)
    _log_retention_minutes = OptionalIntKey("log.retention.minutes", None,
        "Retention age in minutes; wins over hours.", importance=_H)
    _log_retention_hours = IntKey("log.retention.hours", 168,
        "Retention age in hours.", importance=_H)
    log_retention_bytes = LongKey("log.retention.bytes", -1,
        "Size a partition's log is trimmed to (-1: no limit).", importance=_H, dynamic=True)
    log_retention_check_interval_ms = LongKey("log.retention.check.interval.ms", 300_000,
        "How often logs are checked for segments to delete.", validator=_POSITIVE)
    log_cleanup_policy = ListKey("log.cleanup.policy", ["delete"],
        "What happens to old segments: delete, compact or both.",
        validator=ValidList("compact", "delete"), dynamic=True)
    log_cleaner_enable = BoolKey("log.cleaner.enable", True,
        "Whether the log cleaner runs (compacted topics).")
    log_cleaner_threads = IntKey("log.cleaner.threads", 1,
        "Log cleaner threads.", validator=_NON_NEGATIVE, dynamic=True)
    log_cleaner_delete_retention_ms = LongKey("log.cleaner.delete.retention.ms", 86_400_000,
        "How long delete tombstones stay in a compacted log.",
        validator=_NON_NEGATIVE, dynamic=True)
    log_cleaner_min_compaction_lag_ms = LongKey("log.cleaner.min.compaction.lag.ms", 0,
        "Youngest a record may be and still be compacted.", validator=_NON_NEGATIVE, dynamic=True)
    log_cleaner_max_compaction_lag_ms = LongKey("log.cleaner.max.compaction.lag.ms", LONG_MAX,
        "Oldest an uncompacted record may become.", validator=_POSITIVE, dynamic=True)
    log_cleaner_min_cleanable_ratio = DoubleKey("log.cleaner.min.cleanable.ratio", 0.5,
        "Share of dirty log that makes a partition eligible for cleaning.",
        validator=Range.between(0, 1), dynamic=True)
    log_cleaner_dedupe_buffer_size = LongKey("log.cleaner.dedupe.buffer.size", 128 * MIB,
        "Memory for the cleaner's key index, across all cleaner threads.", dynamic=True)
    log_cleaner_io_buffer_size = IntKey("log.cleaner.io.buffer.size", 512 * KIB,
        "Cleaner I/O buffer size.", validator=_NON_NEGATIVE, dynamic=True)
    log_cleaner_io_max_bytes_per_second = DoubleKey(
        "log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308,
        "Bytes a second the cleaner threads read and write, in all.",
        validator=Range.at_least(1), dynamic=True)
    log_cleaner_backoff_ms = LongKey("log.cleaner.backoff.ms", 15_000,
        "Pause when there is nothing to clean.", validator=_NON_NEGATIVE, dynamic=True)
    log_index_size_max_bytes = IntKey("log.index.size.max.bytes", 10 * MIB,
        "Largest offset or time index file.", validator=Range.at_least(4), dynamic=True)
    log_index_interval_bytes = IntKey("log.index.interval.bytes", 4096,
        "Log bytes between two offset index entries.", validator=_NON_NEGATIVE, dynamic=True)
    log_flush_interval_messages = LongKey("log.flush.interval.messages", LONG_MAX,
        "Records appended before a forced fsync of the log.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    _log_flush_interval_ms = OptionalLongKey("log.flush.interval.ms", None,
        "Longest a record stays unflushed; the scheduler interval when unset.",
        importance=_H, dynamic=True)
    _log_flush_scheduler_interval_ms = LongKey("log.flush.scheduler.interval.ms", LONG_MAX,
        "How often logs are checked for a due flush.", importance=_H)
    log_flush_offset_checkpoint_interval_ms = IntKey(
        "log.flush.offset.checkpoint.interval.ms", 60_000,
        "How often the recovery point checkpoint is written.",
        validator=_NON_NEGATIVE, importance=_H)
    log_flush_start_offset_checkpoint_interval_ms = IntKey(
        "log.flush.start.offset.checkpoint.interval.ms", 60_000,
        "How often the log start offset checkpoint is written.",
        validator=_NON_NEGATIVE, importance=_H)
    log_segment_delete_delay_ms = LongKey("log.segment.delete.delay.ms", 60_000,
        "Wait before a deleted segment's files are removed.", validator=_NON_NEGATIVE, dynamic=True)
    log_preallocate = BoolKey("log.preallocate", False,
        "Whether new segment files are preallocated.", dynamic=True)
    log_message_timestamp_type = StringKey("log.message.timestamp.type", "CreateTime",
        "Which timestamp records carry: the producer's or the append time.",
        validator=OneOf("CreateTime", "LogAppendTime"), dynamic=True)
    log_message_timestamp_before_max_ms = LongKey("log.message.timestamp.before.max.ms", LONG_MAX,
        "How far before the broker's time a CreateTime record's timestamp may be.",
        validator=_NON_NEGATIVE, dynamic=True)
    log_message_timestamp_after_max_ms = LongKey("log.message.timestamp.after.max.ms", 3_600_000,
        "How far after the broker's time a CreateTime record's timestamp may be.",
        validator=_NON_NEGATIVE, dynamic=True)
    log_message_downconversion_enable = BoolKey("log.message.downconversion.enable", True,
        "Accepted for compatibility; batches are never down-converted.", dynamic=True)
    num_recovery_threads_per_data_dir = IntKey("num.recovery.threads.per.data.dir", 2,
        "Accepted for compatibility; recovery runs on the event loop.",
        validator=_POSITIVE, importance=_H, dynamic=True)
    # --- Replication -------------------------------------------------------------------
    replica_lag_time_max_ms = LongKey("replica.lag.time.max.ms", 30_000,
        "A follower that has not caught up for this long leaves the ISR.", importance=_H)
    replica_fetch_max_bytes = IntKey("replica.fetch.max.bytes", MIB,
        "Bytes a follower fetches per partition.", validator=_NON_NEGATIVE)
    follower_replication_throttled_rate = LongKey("follower.replication.throttled.rate", LONG_MAX,
        "Bytes per second a broker fetches for the replicas a reassignment is adding (odradek "
        "cluster add-brokers --throttle sets it and removes it when done).",
        validator=_POSITIVE, dynamic=True)
    replica_fetch_min_bytes = IntKey("replica.fetch.min.bytes", 1,
        "Bytes a follower's fetch waits for.", importance=_H)
    replica_fetch_wait_max_ms = IntKey("replica.fetch.wait.max.ms", 500,
        "Longest a follower's fetch waits for data.")
    replica_fetch_response_max_bytes = IntKey("replica.fetch.response.max.bytes", 10 * MIB,
        "Bytes a follower fetches per request.", validator=_NON_NEGATIVE)
    replica_fetch_backoff_ms = IntKey("replica.fetch.backoff.ms", 1000,
        "Pause after a follower's fetch fails.", validator=_NON_NEGATIVE)
    replica_socket_timeout_ms = IntKey("replica.socket.timeout.ms", 30_000,
        "Socket timeout of follower fetches.")
    replica_socket_receive_buffer_bytes = IntKey("replica.socket.receive.buffer.bytes", 64 * KIB,
        "SO_RCVBUF of follower connections.")
    num_replica_fetchers = IntKey("num.replica.fetchers", 1,
        "Fetcher connections per source broker.", dynamic=True)
    max_incremental_fetch_session_cache_slots = IntKey(
        "max.incremental.fetch.session.cache.slots", 1000,
        "Incremental fetch sessions (KIP-227) a broker keeps; 0 turns them off.",
        validator=_NON_NEGATIVE)
    replica_high_watermark_checkpoint_interval_ms = LongKey(
        "replica.high.watermark.checkpoint.interval.ms", 5000,
        "How often the high watermark checkpoint is written.")
    # --- Groups and offsets ------------------------------------------------------------
    group_min_session_timeout_ms = IntKey("group.min.session.timeout.ms", 6000,
        "Shortest session a group member may ask.")
    group_max_session_timeout_ms = IntKey("group.max.session.timeout.ms", 1_800_000,
        "Longest session a group member may ask.")
    group_initial_rebalance_delay_ms = IntKey("group.initial.rebalance.delay.ms", 3000,
        "Wait for more members before the first rebalance of a new group.")
    group_max_size = IntKey("group.max.size", INT_MAX,
        "Most members one group may have.", validator=_POSITIVE)
    offsets_topic_num_partitions = IntKey("offsets.topic.num.partitions", 50,
        "Partitions of the committed offsets topic (fixed once created).",
        validator=_POSITIVE, importance=_H)
    offsets_topic_replication_factor = ShortKey("offsets.topic.replication.factor", 3,
        "Replicas of the committed offsets topic.", validator=_POSITIVE, importance=_H)
    offsets_topic_segment_bytes = IntKey("offsets.topic.segment.bytes", 100 * MIB,
        "Segment size of the committed offsets topic.", validator=_POSITIVE, importance=_H)
    offsets_retention_minutes = IntKey("offsets.retention.minutes", 10080,
        "How long the committed offsets of an empty group are kept.",
        validator=_POSITIVE, importance=_H)
    offsets_retention_check_interval_ms = LongKey("offsets.retention.check.interval.ms", 600_000,
        "How often expired committed offsets are looked for.", validator=_POSITIVE, importance=_H)
    offsets_commit_timeout_ms = IntKey("offsets.commit.timeout.ms", 5000,
        "How long an offset commit waits for its replicas.", validator=_POSITIVE, importance=_H)
    offsets_load_buffer_size = IntKey("offsets.load.buffer.size", 5 * MIB,
        "Read size when a coordinator loads committed offsets.", validator=_POSITIVE, importance=_H)
    offset_metadata_max_bytes = IntKey("offset.metadata.max.bytes", 4096,
        "Largest metadata string of one commit.", importance=_H)
    # --- Transactions and producer ids ----------------------------------------------------
    transaction_state_log_num_partitions = IntKey("transaction.state.log.num.partitions", 50,
        "Partitions of the transaction state topic.", validator=_POSITIVE, importance=_H)
    transaction_state_log_replication_factor = ShortKey(
        "transaction.state.log.replication.factor", 3,
        "Replicas of the transaction state topic.", validator=_POSITIVE, importance=_H)
    transaction_state_log_min_isr = IntKey("transaction.state.log.min.isr", 2,
        "min.insync.replicas of the transaction state topic.", validator=_POSITIVE, importance=_H)
    transaction_state_log_segment_bytes = IntKey("transaction.state.log.segment.bytes", 100 * MIB,
        "Segment size of the transaction state topic.", validator=_POSITIVE, importance=_H)
    transaction_state_log_load_buffer_size = IntKey(
        "transaction.state.log.load.buffer.size", 5 * MIB,
        "Read size when a coordinator loads transaction state.", validator=_POSITIVE)
    transactional_id_expiration_ms = IntKey("transactional.id.expiration.ms", 604_800_000,
        "Idle time after which a transactional id is forgotten.",
        validator=_POSITIVE, importance=_H)
    transaction_max_timeout_ms = IntKey("transaction.max.timeout.ms", 900_000,
        "Longest transaction timeout a producer may ask.", validator=_POSITIVE, importance=_H)
    transaction_abort_timed_out_transaction_cleanup_interval_ms = IntKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000,
        "How often timed-out transactions are looked for.", validator=_POSITIVE, importance=_LOW)
    transaction_remove_expired_transaction_cleanup_interval_ms = IntKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000,
        "How often expired transactional ids are removed.", validator=_POSITIVE, importance=_LOW)
    producer_id_expiration_ms = IntKey("producer.id.expiration.ms", 86_400_000,
        "Idle time after which an idempotent producer's state is dropped.",
        validator=_NON_NEGATIVE, importance=_LOW, dynamic=True)
    producer_id_expiration_check_interval_ms = IntKey(
        "producer.id.expiration.check.interval.ms", 600_000,
        "How often idle producers' state is looked for and dropped.",
        validator=_POSITIVE, importance=_LOW)
    share_coordinator_state_topic_replication_factor = ShortKey(
        "share.coordinator.state.topic.replication.factor", 3,
        "Accepted for compatibility; share groups are not supported.", validator=_POSITIVE)
    share_coordinator_state_topic_min_isr = ShortKey("share.coordinator.state.topic.min.isr", 2,
        "Accepted for compatibility; share groups are not supported.", validator=_POSITIVE)
    # --- Odradek's own ---------------------------------------------------------------------
    quarantine_max_bytes = LongKey("quarantine.max.bytes", GIB,
        "Bytes of truncated records kept aside per partition instead of deleted.",
        validator=_NON_NEGATIVE, dynamic=True)
    flush_before_ack = BoolKey("odradek.flush.before.ack", True,
        "acks=all is answered only after the in-sync replicas have fsynced the batch.",
        importance=_H)
    partial_request_timeout_ms = LongKey("odradek.connections.partial.request.timeout.ms", 30_000,
        "A connection whose request has been arriving this long without completing (not counting "
        "time the node did not read from it) is closed.", validator=_POSITIVE)
    log_scrub_bytes_per_second = LongKey("odradek.log.scrub.bytes.per.second", 64 * MIB,
        "How fast the background scrub validates the log bytes below the recovery points, which "
        "start-up no longer reads (ADR 0016).", validator=_POSITIVE)
    # fmt: on


SERVER_CONFIG_DEF: Final = config_def_of(ServerKeys)
"""The table of every server key, made from the declarations of :class:`ServerKeys`."""
