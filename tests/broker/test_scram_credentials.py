"""DescribeUserScramCredentials and AlterUserScramCredentials handlers: a password set
through Alter authenticates, Describe shows mechanisms and iterations but never keys,
and every refusal carries Kafka's error code and message for that user alone."""

from __future__ import annotations

import pytest

from odradek.broker.effects import CommitRecords, Reply
from odradek.broker.scram_credentials import (
    ALTER_VERSIONS,
    DESCRIBE_VERSIONS,
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
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
from odradek.protocol.messages.describe_user_scram_credentials_request import UserName
from odradek.protocol.metadata import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from odradek.security import scram
from tests.broker.harness import Harness, header, new_harness

SHA256 = scram.MECHANISMS["SCRAM-SHA-256"]
SHA512 = scram.MECHANISMS["SCRAM-SHA-512"]
SALT = b"0123456789abcdef"


def upsert(
    name: str,
    password: str = "secret",
    mechanism: scram.ScramMechanism = SHA512,
    iterations: int = 4096,
    salt: bytes = SALT,
) -> ScramCredentialUpsertion:
    """What a client sends: the password salted and hashed on the client side."""
    salted = scram.salted_password(mechanism, password, salt, iterations) if password else b""
    return ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism.kafka_type,
        iterations=iterations,
        salt=salt,
        salted_password=salted,
    )


def delete(name: str, mechanism: int = SHA512.kafka_type) -> ScramCredentialDeletion:
    return ScramCredentialDeletion(name=name, mechanism=mechanism)


def alter(
    h: Harness,
    upsertions: list[ScramCredentialUpsertion] | None = None,
    deletions: list[ScramCredentialDeletion] | None = None,
) -> AlterUserScramCredentialsResponse:
    request = AlterUserScramCredentialsRequest(
        upsertions=upsertions or [], deletions=deletions or []
    )
    response: AlterUserScramCredentialsResponse = h.through_router(
        AlterUserScramCredentialsRequest.API_KEY,
        ALTER_VERSIONS,
        lambda hd, body: handle_alter_user_scram_credentials(h.state, hd, body),
        request,
        0,
    )
    return response


def describe(h: Harness, users: list[str] | None) -> DescribeUserScramCredentialsResponse:
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [UserName(name=u) for u in users]
    )
    response: DescribeUserScramCredentialsResponse = h.through_router(
        DescribeUserScramCredentialsRequest.API_KEY,
        DESCRIBE_VERSIONS,
        lambda hd, body: handle_describe_user_scram_credentials(h.state, hd, body),
        request,
        0,
    )
    return response


def errors(response: AlterUserScramCredentialsResponse) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def authenticates(h: Harness, mechanism: scram.ScramMechanism, user: str, password: str) -> bool:
    """A whole SCRAM exchange against the credential the image holds."""

    def lookup(name: str) -> scram.ScramCredential | None:
        stored = h.image.scram_credentials.get((mechanism.kafka_type, name))
        if stored is None:
            return None
        return scram.ScramCredential(
            stored.salt, stored.stored_key, stored.server_key, stored.iterations
        )

    client = scram.ScramClient(mechanism, user, password)
    server = scram.ScramServer(mechanism, lookup)
    try:
        final = server.evaluate(client.final(server.evaluate(client.first())))
        client.verify(final)
    except scram.ScramError:
        return False
    return server.complete and server.username == user


# Alter ---------------------------------------------------------------------------


def test_an_upserted_password_authenticates_and_a_wrong_one_does_not() -> None:
    h = new_harness()
    response = alter(h, [upsert("alice", "alice-secret"), upsert("bob", "bob-secret", SHA256)])
    assert errors(response) == {"alice": (ErrorCode.NONE, None), "bob": (ErrorCode.NONE, None)}
    assert authenticates(h, SHA512, "alice", "alice-secret")
    assert authenticates(h, SHA256, "bob", "bob-secret")
    assert not authenticates(h, SHA512, "alice", "wrong")
    # A credential is per mechanism: alice has none for SCRAM-SHA-256.
    assert not authenticates(h, SHA256, "alice", "alice-secret")


def test_the_records_hold_derived_keys_never_the_salted_password() -> None:
    h = new_harness()
    upsertion = upsert("alice", "alice-secret", iterations=8192)
    alter(h, [upsertion])
    [[record]] = h.committed
    assert isinstance(record, UserScramCredentialRecord)
    expected = scram.credential_from_salted_password(SHA512, upsertion.salted_password, SALT, 8192)
    assert (record.name, record.mechanism, record.iterations) == ("alice", 2, 8192)
    assert (record.salt, record.stored_key, record.server_key) == (
        expected.salt,
        expected.stored_key,
        expected.server_key,
    )
    assert upsertion.salted_password not in (record.stored_key, record.server_key)


def test_a_new_password_replaces_the_old_one() -> None:
    h = new_harness()
    alter(h, [upsert("alice", "old")])
    alter(h, [upsert("alice", "new", salt=b"another-salt")])
    assert authenticates(h, SHA512, "alice", "new")
    assert not authenticates(h, SHA512, "alice", "old")


def test_a_deleted_credential_no_longer_authenticates_and_others_stay() -> None:
    h = new_harness()
    alter(h, [upsert("alice", "a")])
    alter(h, [upsert("alice", "a", SHA256)])
    response = alter(h, deletions=[delete("alice", SHA512.kafka_type)])
    assert errors(response) == {"alice": (ErrorCode.NONE, None)}
    assert h.committed[-1] == [RemoveUserScramCredentialRecord(name="alice", mechanism=2)]
    assert not authenticates(h, SHA512, "alice", "a")
    assert authenticates(h, SHA256, "alice", "a")


@pytest.mark.parametrize(
    ("upsertion", "code", "message"),
    [
        (upsert("alice", iterations=4095), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (
            upsert("alice", iterations=16385),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "Too many iterations",
        ),
        (upsert(""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        (upsert("alice", salt=b""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"),
        (
            upsert("alice", password=""),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "Salted password must not be empty",
        ),
        (
            ScramCredentialUpsertion(
                name="alice", mechanism=0, iterations=4096, salt=SALT, salted_password=b"x"
            ),
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "Unknown SCRAM mechanism",
        ),
    ],
    ids=["few-iterations", "many-iterations", "empty-user", "empty-salt", "empty-salted", "mech"],
)
def test_a_refused_upsertion_changes_nothing_and_says_why(
    upsertion: ScramCredentialUpsertion, code: int, message: str
) -> None:
    h = new_harness()
    outcome = handle_alter_user_scram_credentials(
        h.state,
        header(AlterUserScramCredentialsRequest.API_KEY, 0),
        AlterUserScramCredentialsRequest(upsertions=[upsertion]),
    )
    # Nothing to commit: the answer comes at once, and the image holds no credential.
    assert isinstance(outcome, Reply)
    assert errors(outcome.response) == {upsertion.name: (code, message)}
    assert h.image.scram_credentials == {}


def test_the_iteration_bounds_themselves_are_accepted() -> None:
    h = new_harness()
    response = alter(h, [upsert("low", iterations=4096), upsert("high", iterations=16384)])
    assert errors(response) == {"low": (ErrorCode.NONE, None), "high": (ErrorCode.NONE, None)}


def test_deleting_a_credential_that_does_not_exist_is_resource_not_found() -> None:
    h = new_harness()
    alter(h, [upsert("alice", mechanism=SHA256)])
    response = alter(h, deletions=[delete("alice", SHA512.kafka_type), delete("nobody")])
    message = "Attempt to delete a user credential that does not exist"
    assert errors(response) == {
        "alice": (ErrorCode.RESOURCE_NOT_FOUND, message),
        "nobody": (ErrorCode.RESOURCE_NOT_FOUND, message),
    }
    assert (SHA256.kafka_type, "alice") in h.image.scram_credentials


def test_a_user_altered_twice_in_one_request_is_refused_whole_and_others_go_on() -> None:
    h = new_harness()
    alter(h, [upsert("carol")])
    response = alter(
        h,
        # Kafka's controller counts a user, not a user and mechanism: a deletion and an
        # upsertion of one name, or two upsertions, refuse every alteration of that user.
        upsertions=[
            upsert("alice", "a"),
            upsert("alice", "a", SHA256),
            upsert("carol", "c2"),
            upsert("dave", "d"),
        ],
        deletions=[delete("carol")],
    )
    duplicate = (
        ErrorCode.DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    assert errors(response) == {
        "alice": duplicate,
        "carol": duplicate,
        "dave": (ErrorCode.NONE, None),
    }
    assert not authenticates(h, SHA512, "alice", "a")
    assert not authenticates(h, SHA256, "alice", "a")
    # carol's deletion did not happen and her old password still works.
    assert authenticates(h, SHA512, "carol", "secret")
    assert authenticates(h, SHA512, "dave", "d")


def test_one_commit_for_every_user_that_passed() -> None:
    h = new_harness()
    alter(h, [upsert("old")])
    outcome = handle_alter_user_scram_credentials(
        h.state,
        header(AlterUserScramCredentialsRequest.API_KEY, 0),
        AlterUserScramCredentialsRequest(
            upsertions=[upsert("new"), upsert("bad", iterations=1)], deletions=[delete("old")]
        ),
    )
    # The answer waits for the commit: a client that reads right after sees the change.
    assert isinstance(outcome, CommitRecords)
    assert [type(r) for r in outcome.records] == [
        RemoveUserScramCredentialRecord,
        UserScramCredentialRecord,
    ]
    assert h.image.scram_credentials.keys() == {(2, "old")}
    response = h.carry(outcome)
    assert h.image.scram_credentials.keys() == {(2, "new")}
    assert errors(response)["bad"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL


# Describe ------------------------------------------------------------------------


def test_describing_no_users_lists_everyone_with_a_credential() -> None:
    h = new_harness()
    alter(h, [upsert("bob", mechanism=SHA256, iterations=8192)])
    alter(h, [upsert("alice")])
    alter(h, [upsert("bob", mechanism=SHA512)])
    everyone: list[list[str] | None] = [None, []]
    for users in everyone:
        response = describe(h, users)
        assert response.error_code == ErrorCode.NONE
        listed = {
            r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results
        }
        assert listed == {
            "alice": (ErrorCode.NONE, [(2, 4096)]),
            "bob": (ErrorCode.NONE, [(1, 8192), (2, 4096)]),
        }


def test_describe_never_sends_salt_or_keys() -> None:
    h = new_harness()
    alter(h, [upsert("alice", "alice-secret")])
    credential = h.image.scram_credentials[2, "alice"]
    data = describe(h, ["alice"]).encode(0)
    for secret in (credential.salt, credential.stored_key, credential.server_key):
        assert secret not in data


def test_a_named_user_without_a_credential_or_named_twice_gets_its_own_error() -> None:
    h = new_harness()
    alter(h, [upsert("alice")])
    response = describe(h, ["alice", "nobody", "alice"])
    by_user = {r.user: r for r in response.results}
    assert len(response.results) == 2
    assert by_user["nobody"].error_code == ErrorCode.RESOURCE_NOT_FOUND
    assert by_user["nobody"].error_message == (
        "Attempt to describe a user credential that does not exist: nobody"
    )
    assert by_user["alice"].error_code == ErrorCode.DUPLICATE_RESOURCE
    assert by_user["alice"].error_message == (
        "Cannot describe SCRAM credentials for the same user twice in a single request: alice"
    )
    assert by_user["alice"].credential_infos == []
