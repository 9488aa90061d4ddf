"""A metadata image written out as records, and read back: the body of a KRaft snapshot.

This module owns the mapping between a :class:`~odradek.controller.image.MetadataImage`
and the metadata records that rebuild it. The snapshot file around those records
(header, footer, batches) belongs to ``odradek.raft.snapshot``; this module only hands
it the record values.

The records come in the order of Kafka's ``MetadataImage.write``: features
(``metadata.version`` first, because a reader may need it to decode what follows),
brokers, topics with their partitions, configs, producer ids, SCRAM credentials (by
mechanism type, then user name), ACLs (by id), client quotas (by entity, a default name
before any other, then by key). Kafka walks hash maps inside each part;
we sort instead, so that two nodes holding equal images write
byte-identical snapshots whatever order their dicts were filled in.

Each record is written in the highest version its schema defines, because the image
does not track which ``metadata.version`` it would have to stay readable by.

What the image does not hold cannot be written: a snapshot made here carries no
delegation tokens or controller registrations (the
records :data:`~odradek.controller.image.UNMODELLED_RECORDS` lists), and no supported
feature ranges or ZooKeeper-migration flag for brokers.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

from odradek.controller.image import BrokerImage, MetadataImage, PartitionImage, QuotaEntity
from odradek.core.errors import InvariantError
from odradek.core.invariant import invariant
from odradek.protocol.metadata import (
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from odradek.protocol.metadata.client_quota_record import EntityData
from odradek.protocol.metadata.register_broker_record import BrokerEndpoint
from odradek.protocol.metadata_record import (
    MetadataRecord,
    decode_metadata_record,
    encode_metadata_record,
)

__all__ = ["decode_image_records", "encode_image_records", "image_records"]

_METADATA_VERSION = "metadata.version"
_NO_PRODUCER_IDS = -1


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records whose replay into a fresh image gives ``image`` (but its offset).

    An empty image gives no records at all: there is no ``metadata.version`` to write
    until the log has set one, and inventing one would change the image.
    """
    records: list[MetadataRecord] = []
    records += _feature_records(image.features)
    records += [_broker_record(image.brokers[broker_id]) for broker_id in sorted(image.brokers)]
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
        records += [
            _partition_record(topic.topic_id, index, topic.partitions[index])
            for index in sorted(topic.partitions)
        ]
    for resource_type, resource_name in sorted(image.configs):
        values = image.configs[resource_type, resource_name]
        records += [
            ConfigRecord(
                resource_type=resource_type,
                resource_name=resource_name,
                name=key,
                value=values[key],
            )
            for key in sorted(values)
        ]
    # -1 is "no block handed out yet", which a fresh image already is. Any other value
    # is written, so that an impossible one fails loudly on replay instead of vanishing.
    if image.next_producer_id != _NO_PRODUCER_IDS:
        # Kafka's ProducerIdsImage.write stamps broker id and epoch -1: the image
        # remembers only where the next block starts, not who asked for the last one.
        records.append(
            ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id
            )
        )
    for mechanism, user in sorted(image.scram_credentials):
        credential = image.scram_credentials[mechanism, user]
        records.append(
            UserScramCredentialRecord(
                name=user,
                mechanism=mechanism,
                salt=credential.salt,
                stored_key=credential.stored_key,
                server_key=credential.server_key,
                iterations=credential.iterations,
            )
        )
    # The image holds each ACL as the record that added it; a new record per ACL keeps
    # the snapshot's values apart from the image's (which it must never change).
    records += [dataclasses.replace(image.acls[acl_id]) for acl_id in sorted(image.acls)]
    for entity in sorted(image.client_quotas, key=_entity_order):
        quotas = image.client_quotas[entity]
        records += [
            ClientQuotaRecord(
                entity=[EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                key=key,
                value=quotas[key],
            )
            for key in sorted(quotas)
        ]
    return records


def _entity_order(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    # A default name (None) cannot be compared with a name: it sorts before every name.
    return tuple((kind, name is not None, name or "") for kind, name in entity)


def encode_image_records(image: MetadataImage) -> list[bytes]:
    """:func:`image_records` framed as metadata log record values, ready for a snapshot."""
    return [encode_metadata_record(record) for record in image_records(image)]


def decode_image_records(values: Sequence[bytes], offset: int) -> MetadataImage:
    """The image that the record ``values`` of a snapshot ending at ``offset`` describe.

    ``offset`` is the last offset the snapshot covers; it is -1 for the bootstrap
    snapshot that ``storage format`` writes, which nonetheless holds records. Bytes that
    do not parse raise :class:`~odradek.core.errors.DecodeError`; records that do not fit
    together raise :class:`~odradek.core.errors.InvariantError` naming their position.
    """
    invariant(offset >= -1, f"snapshot offset {offset} is below -1")
    # Every record of a snapshot belongs at the snapshot's offset, but
    # MetadataImage.replay insists that each record's offset be above the last one
    # (and above -1). So the records are replayed at their positions 0, 1, 2, ... in a
    # scratch image, and the result is stamped with the snapshot's offset. Only the
    # offset differs from replaying each record "at" the snapshot's offset.
    scratch = MetadataImage()
    for position, value in enumerate(values):
        record, _version = decode_metadata_record(value)
        try:
            scratch.replay(record, position)
        except InvariantError as e:
            raise InvariantError(
                f"snapshot at offset {offset}, record {position} of {len(values)}: {e}"
            ) from e
    return dataclasses.replace(scratch, offset=offset)


def _feature_records(features: dict[str, int]) -> list[MetadataRecord]:
    names = sorted(features, key=lambda name: (name != _METADATA_VERSION, name))
    return [FeatureLevelRecord(name=name, feature_level=features[name]) for name in names]


def _broker_record(broker: BrokerImage) -> RegisterBrokerRecord:
    # The endpoints keep the image's order: it is part of the image (replay keeps the
    # first position of each listener name), and names in it are already unique, so
    # replay's de-duplication gives the same list back. Fenced and controlled-shutdown
    # states go into the registration itself, so no Fence/Unfence or change record is
    # needed after it.
    return RegisterBrokerRecord(
        broker_id=broker.broker_id,
        incarnation_id=broker.incarnation_id,
        broker_epoch=broker.epoch,
        end_points=[
            BrokerEndpoint(
                name=endpoint.name,
                host=endpoint.host,
                port=endpoint.port,
                security_protocol=endpoint.security_protocol,
            )
            for endpoint in broker.endpoints
        ],
        rack=broker.rack,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        log_dirs=list(broker.log_dirs),
    )


def _partition_record(
    topic_id: uuid.UUID, index: int, partition: PartitionImage
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=list(partition.replicas),
        isr=list(partition.isr),
        removing_replicas=list(partition.removing_replicas),
        adding_replicas=list(partition.adding_replicas),
        leader=partition.leader,
        leader_recovery_state=partition.leader_recovery_state,
        leader_epoch=partition.leader_epoch,
        partition_epoch=partition.partition_epoch,
        # Written out even when every replica is in MIGRATING_DIRECTORY: replay fills
        # an empty list with exactly that, so either way gives the same image, and the
        # explicit list needs no knowledge of that rule to read.
        directories=list(partition.directories),
        # Kafka's PartitionRegistration.toRecord leaves the ELR tagged fields out when
        # they are empty, to save space; replay reads an absent list as empty.
        eligible_leader_replicas=list(partition.eligible_leader_replicas) or None,
        last_known_elr=list(partition.last_known_elr) or None,
    )
