"""The Kafka protocol's error codes: their wire numbers, names, and whether a retry can help.

This module owns the one table of every error code Kafka defines up to Kafka 4.0
(``UNKNOWN_SERVER_ERROR`` = -1 through ``REBOOTSTRAP_REQUIRED`` = 129, with no gaps).
Names and numbers are Kafka's own, so ``int(code)`` is the INT16 sent on the wire and
``ErrorCode(n)`` decodes one. Each member also carries:

* ``retriable``: true exactly when Kafka's exception for the code is a
  ``RetriableException`` (the "Retriable" column of the protocol guide), i.e. the same
  request may succeed if sent again, possibly after refreshing metadata.
* ``message``: a one-line description, written for this project.

A peer may send a code newer than this table: :func:`error_name` names any number
without raising, while ``ErrorCode(n)`` raises ``ValueError`` for an unknown one.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """A Kafka protocol error code; the integer value is the wire value."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129

    @property
    def retriable(self) -> bool:
        """Whether the same request may succeed if sent again (Kafka's RetriableException)."""
        return _TABLE[self.value][0]

    @property
    def message(self) -> str:
        """A one-line description of what the code means."""
        return _TABLE[self.value][1]


# Code -> (retriable, message), for every member of ErrorCode and nothing else.
_TABLE: dict[int, tuple[bool, str]] = {
    -1: (False, "The broker hit an unexpected failure while handling the request."),
    0: (False, "No error: the operation succeeded."),
    1: (False, "The offset asked for lies outside the partition's retained log."),
    2: (True, "A record or batch is corrupt: bad CRC, bad size, or null key on a compacted topic."),
    3: (True, "This broker has no such topic or partition."),
    4: (False, "The fetch size in the request is not acceptable."),
    5: (True, "The partition has no leader right now, typically mid-election."),
    6: (True, "This broker is not the partition's leader (or not a replica of it at all)."),
    7: (True, "The request did not complete within its timeout."),
    8: (False, "The target broker is not available."),
    9: (True, "A replica of the requested partition is not available."),
    10: (False, "A message exceeds the largest size the broker accepts."),
    11: (False, "The request came from a controller that has since been replaced."),
    12: (False, "The metadata string attached to an offset commit is too long."),
    13: (True, "The connection closed before a response arrived."),
    14: (True, "The coordinator is still loading its state and cannot serve yet."),
    15: (True, "No coordinator is currently available for this group or transaction."),
    16: (True, "This broker is not the coordinator for the given group or transaction."),
    17: (False, "The topic is invalid for this operation (bad name, or internal)."),
    18: (False, "A record batch is larger than the log segment size allows."),
    19: (True, "Too few in-sync replicas to accept the write; nothing was appended."),
    20: (True, "The write was appended, but with fewer in-sync replicas than required."),
    21: (False, "The produce request's acks value is not one the broker allows."),
    22: (False, "The group generation id in the request is not the current one."),
    23: (False, "The member's protocols are missing or do not match the group's."),
    24: (False, "The group id is not valid."),
    25: (False, "The coordinator does not know this member id."),
    26: (False, "The session timeout is outside the range the broker permits."),
    27: (False, "The group is rebalancing; the member has to rejoin."),
    28: (False, "The size of the offset commit data is not acceptable."),
    29: (False, "The principal is not authorized for this topic."),
    30: (False, "The principal is not authorized for this group."),
    31: (False, "The principal is not authorized for this cluster operation."),
    32: (False, "A record timestamp falls outside the accepted window."),
    33: (False, "The broker does not offer the requested SASL mechanism."),
    34: (False, "The request is not allowed at this point of the SASL exchange."),
    35: (False, "The broker does not support this version of the API."),
    36: (False, "A topic of that name exists already."),
    37: (False, "The requested partition count is not valid."),
    38: (False, "The replication factor is below 1 or above the broker count."),
    39: (False, "The explicit replica assignment is not valid."),
    40: (False, "A configuration value is not valid."),
    41: (True, "This node is not the active controller."),
    42: (False, "The request is malformed or not valid for this broker; see its logs."),
    43: (False, "The broker's message format version cannot serve this request."),
    44: (False, "The request breaks a policy configured on the broker."),
    45: (False, "The producer's sequence number skips ahead of the expected one."),
    46: (False, "The producer's sequence number was already written."),
    47: (False, "The producer used an epoch older than the current one."),
    48: (False, "The transactional operation is not valid in the current transaction state."),
    49: (False, "The producer id is not the one assigned to this transactional id."),
    50: (False, "The transaction timeout exceeds the broker's maximum."),
    51: (True, "Another operation on the same transaction is still in progress."),
    52: (False, "The sending transaction coordinator is no longer current for the producer."),
    53: (False, "The principal is not authorized for this transactional id."),
    54: (False, "Security features are turned off on this broker."),
    55: (False, "Skipped: another operation in the same batch failed first."),
    56: (True, "A disk error occurred while accessing the log."),
    57: (False, "The named log directory is not configured on the broker."),
    58: (False, "SASL authentication did not succeed."),
    59: (False, "The broker holds no state for this producer id (e.g. it expired)."),
    60: (False, "A partition reassignment is already under way."),
    61: (False, "Delegation tokens are not enabled."),
    62: (False, "No such delegation token exists on the server."),
    63: (False, "The principal is neither owner nor renewer of the token."),
    64: (False, "Token requests need an authenticated, non-token, non-plaintext channel."),
    65: (False, "The principal is not authorized for this delegation token."),
    66: (False, "The delegation token has expired."),
    67: (False, "The principal type is not supported."),
    68: (False, "The group still has members."),
    69: (False, "No group with this id exists."),
    70: (True, "The incremental fetch session id is unknown to the broker."),
    71: (True, "The incremental fetch session epoch is not the expected one."),
    72: (True, "The leader has no listener matching the one this request arrived on."),
    73: (False, "Deleting topics is disabled on this cluster."),
    74: (True, "The request's leader epoch is older than the broker's."),
    75: (True, "The request's leader epoch is newer than the broker's."),
    76: (False, "The client cannot handle the partition's compression codec."),
    77: (False, "The broker epoch in the request is out of date."),
    78: (True, "The new leader's high watermark has not caught up yet."),
    79: (False, "The member must obtain a member id before joining the group."),
    80: (True, "The preferred replica cannot become leader right now."),
    81: (False, "The group is already at its maximum number of members."),
    82: (False, "Another member has taken over this static group.instance.id."),
    83: (True, "No eligible replica is available to be elected leader."),
    84: (True, "The partition already has the leader the election would choose."),
    85: (False, "There is no partition reassignment to act on."),
    86: (False, "Cannot delete offsets for a topic the group is subscribed to."),
    87: (False, "The broker's validation rejected a record."),
    88: (True, "Pending transactional offsets must resolve before this can be served."),
    89: (True, "The request would exceed the principal's throttling quota."),
    90: (False, "A newer producer with the same transactional id has fenced this one."),
    91: (False, "The request names a resource that does not exist."),
    92: (False, "The request names the same resource more than once."),
    93: (False, "The credential does not meet the acceptance criteria."),
    94: (False, "A sender or receiver of a voter-only request is not an expected voter."),
    95: (False, "The feature update version is not valid."),
    96: (False, "Finalized features could not be updated because of a server error."),
    97: (False, "A forwarded request's principal could not be deserialized."),
    98: (False, "The requested metadata snapshot does not exist."),
    99: (False, "The position lies outside the bounds of the snapshot."),
    100: (True, "This broker has no topic with that topic id."),
    101: (False, "Another broker has registered with this broker id."),
    102: (False, "No broker is registered under the given id."),
    103: (True, "The topic id in the request differs from the one in the log."),
    104: (False, "The request's cluster id differs from this server's."),
    105: (False, "No such transactional id is known."),
    106: (True, "The fetch session used topic ids inconsistently."),
    107: (False, "The proposed ISR includes a replica that is not eligible."),
    108: (False, "The partition state changed, but a different leader has been elected."),
    109: (False, "The offset is now only in tiered (remote) storage."),
    110: (False, "The member epoch is fenced; release all partitions and rejoin."),
    111: (False, "Another member still holds this instance id and must leave first."),
    112: (False, "The group does not support this assignor or assignor version."),
    113: (False, "The member epoch is outdated; retry once the new epoch is known."),
    114: (False, "The request reached an endpoint of the wrong kind."),
    115: (False, "This kind of endpoint is not supported yet."),
    116: (False, "No controller with this id is known."),
    117: (False, "The telemetry subscription id is unknown or out of date."),
    118: (False, "The pushed telemetry exceeds the broker's size limit."),
    119: (False, "The controller judged the broker registration to be invalid."),
    120: (False, "The transaction hit an error; abort it to keep using the transactional id."),
    121: (False, "The record is in a state that does not allow this acknowledgement."),
    122: (True, "The share session is unknown to the broker."),
    123: (True, "The share session epoch is not the expected one."),
    124: (False, "The share-group state epoch does not match the share coordinator's."),
    125: (False, "The voter key does not match the receiving replica."),
    126: (False, "The voter is already in the voter set."),
    127: (False, "The voter is not in the voter set."),
    128: (False, "The regular expression in the request is not valid."),
    129: (False, "The client's metadata is stale; it must bootstrap again."),
}


def error_name(code: int) -> str:
    """Kafka's name for ``code``, or ``UNKNOWN_ERROR_CODE(<code>)`` if it is not in the table."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE({code})"
