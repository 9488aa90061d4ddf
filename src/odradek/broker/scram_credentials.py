"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): SCRAM users.

The credentials live in the metadata image (:attr:`MetadataImage.scram_credentials`),
replayed from ``UserScramCredentialRecord`` and ``RemoveUserScramCredentialRecord``.

Describe reads the image as Kafka's ``ScramImage.describe`` does: no users (null or
empty) lists every user that has a credential; a named user without one gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (one result for it either
way). A result carries each mechanism and its iteration count, never salt or keys.

Alter decides as Kafka's controller (``ScramControlManager.alterCredentials``):

* a user may appear once in a request, whatever the mechanism: a second deletion or
  upsertion of the same name makes that user DUPLICATE_RESOURCE and drops all its
  alterations (Kafka keys this by name alone, so SHA-256 and SHA-512 for one user take
  two requests);
* an empty user name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
  UNSUPPORTED_SASL_MECHANISM;
* a deletion of a credential the image does not hold is RESOURCE_NOT_FOUND;
* an upsertion with fewer iterations than the mechanism's minimum (4096) or more than
  16384 is UNACCEPTABLE_CREDENTIAL. So is an empty salt or salted password, which Kafka
  lets through: no client makes one from a real password, and an empty salted password
  would store a credential anyone can compute.

The server turns each salted password into the stored key and server key
(``credential_from_salted_password``); the password itself never reaches the broker.
The users that pass are answered once their records are committed and replayed; each
user is answered on its own, so one refusal does not stop the others.
"""

from __future__ import annotations

from typing import Final

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from odradek.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from odradek.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from odradek.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from odradek.protocol.metadata import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from odradek.security.scram import credential_from_salted_password, mechanism_by_type

__all__ = [
    "ALTER_VERSIONS",
    "DESCRIBE_VERSIONS",
    "handle_alter_user_scram_credentials",
    "handle_describe_user_scram_credentials",
]

DESCRIBE_VERSIONS: Final = (0, 0)
ALTER_VERSIONS: Final = (0, 0)

# Kafka's messages (ScramImage, ScramControlManager), so that tools matching on them work.
_DESCRIBE_DUPLICATE = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
_ALTER_DUPLICATE = "A user credential cannot be altered twice in the same request"
_DELETE_MISSING = "Attempt to delete a user credential that does not exist"
_EMPTY_USER = "Username must not be empty"
_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
_TOO_FEW = "Too few iterations"
_TOO_MANY = "Too many iterations"
_EMPTY_SALT = "Salt must not be empty"
_EMPTY_SALTED_PASSWORD = "Salted password must not be empty"

_Error = tuple[int, str]


def handle_describe_user_scram_credentials(
    state: BrokerState, header: RequestHeader, request: DescribeUserScramCredentialsRequest
) -> Outcome:
    credentials = state.image.scram_credentials
    by_user: dict[str, list[CredentialInfo]] = {}
    for mechanism, user in sorted(credentials):
        by_user.setdefault(user, []).append(
            CredentialInfo(mechanism=mechanism, iterations=credentials[mechanism, user].iterations)
        )
    if not request.users:
        names = sorted(by_user)
        repeated: set[str] = set()
    else:
        asked = [user.name for user in request.users]
        names = list(dict.fromkeys(asked))
        repeated = {name for name in names if asked.count(name) > 1}
    results = []
    for name in names:
        if name in repeated:
            result = DescribeUserScramCredentialsResult(
                user=name,
                error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message=_DESCRIBE_DUPLICATE + name,
            )
        elif name not in by_user:
            result = DescribeUserScramCredentialsResult(
                user=name,
                error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=_DESCRIBE_MISSING + name,
            )
        else:
            result = DescribeUserScramCredentialsResult(
                user=name, error_message=None, credential_infos=by_user[name]
            )
        results.append(result)
    return Reply(DescribeUserScramCredentialsResponse(error_message=None, results=results))


def handle_alter_user_scram_credentials(
    state: BrokerState, header: RequestHeader, request: AlterUserScramCredentialsRequest
) -> Outcome:
    existing = state.image.scram_credentials
    deletions: dict[str, ScramCredentialDeletion] = {}
    upsertions: dict[str, ScramCredentialUpsertion] = {}
    errors: dict[str, _Error] = {}
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue  # Kafka answers a refused user once, with its first error
        if deletions.pop(name, None) is not None:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _ALTER_DUPLICATE)
            continue
        error = _check_user_and_mechanism(name, deletion.mechanism)
        if error is None and (deletion.mechanism, name) not in existing:
            error = (ErrorCode.RESOURCE_NOT_FOUND, _DELETE_MISSING)
        if error is None:
            deletions[name] = deletion
        else:
            errors[name] = error
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _ALTER_DUPLICATE)
            continue
        error = _check_upsertion(upsertion)
        if error is None:
            upsertions[name] = upsertion
        else:
            errors[name] = error

    records: list[UserScramCredentialRecord | RemoveUserScramCredentialRecord] = []
    results: list[AlterUserScramCredentialsResult] = []
    for name, deletion in deletions.items():
        records.append(RemoveUserScramCredentialRecord(name=name, mechanism=deletion.mechanism))
        results.append(AlterUserScramCredentialsResult(user=name, error_message=None))
    for name, upsertion in upsertions.items():
        records.append(_credential_record(upsertion))
        results.append(AlterUserScramCredentialsResult(user=name, error_message=None))
    results += [
        AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message)
        for name, (code, message) in errors.items()
    ]
    response = AlterUserScramCredentialsResponse(results=results)
    if not records:
        return Reply(response)
    # One batch: the users that passed change together or, on a failover before the
    # commit, not at all (Kafka's ControllerResult.atomicOf).
    return CommitRecords(list(records), lambda: Reply(response))


def _check_user_and_mechanism(name: str, mechanism: int) -> _Error | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER
    if mechanism_by_type(mechanism) is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM
    return None


def _check_upsertion(upsertion: ScramCredentialUpsertion) -> _Error | None:
    error = _check_user_and_mechanism(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    mechanism = mechanism_by_type(upsertion.mechanism)
    assert mechanism is not None  # checked just above
    if upsertion.iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, _TOO_FEW
    if upsertion.iterations > mechanism.max_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, _TOO_MANY
    if not upsertion.salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_SALT
    if not upsertion.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_SALTED_PASSWORD
    return None


def _credential_record(upsertion: ScramCredentialUpsertion) -> UserScramCredentialRecord:
    mechanism = mechanism_by_type(upsertion.mechanism)
    assert mechanism is not None  # only checked upsertions get here
    credential = credential_from_salted_password(
        mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
    )
    return UserScramCredentialRecord(
        name=upsertion.name,
        mechanism=upsertion.mechanism,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )
