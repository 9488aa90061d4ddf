"""The recovery audit record: what ``recover-quorum apply`` did, kept in the log itself.

An offline edit of the metadata log must leave a trace that travels with the log: the
apply step appends a ``NoOpRecord`` (which every Kafka-compatible reader skips) whose
record header ``odradek.recover-quorum.audit`` holds a JSON document (who, when, which
log, what was demoted). Every replica that fetches past it holds the same record, so the
trace survives the loss of the node it was written on, until a snapshot compacts it
away; the apply step also writes the document to a file beside the log for that case.
"""

from __future__ import annotations

AUDIT_HEADER = "odradek.recover-quorum.audit"
AUDIT_FILE = "recover-quorum-audit.json"
