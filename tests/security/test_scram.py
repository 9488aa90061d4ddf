"""SCRAM-SHA-256/512: RFC 7677's worked example, both sides against each other, and
every way a client can get a login wrong."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.security.scram import (
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_password,
    mechanism_by_type,
    salted_password,
)

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _store(*users: tuple[str, str]) -> dict[str, ScramCredential]:
    return {name: credential_from_password(SCRAM_SHA_256, pw, salt=RFC_SALT) for name, pw in users}


def test_the_server_side_reproduces_rfc_7677s_exchange() -> None:
    store = _store(("user", "pencil"))
    server = ScramServer(SCRAM_SHA_256, store.get, nonce=RFC_SERVER_NONCE)
    first = server.evaluate(b"n,,n=user,r=" + RFC_CLIENT_NONCE.encode())
    assert (
        first
        == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_the_client_side_reproduces_rfc_7677s_exchange() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert client.final(server_first) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@given(
    user=st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=20),
    password=st.text(max_size=20),
)
def test_client_and_server_agree_for_any_user_and_password(
    name: str, user: str, password: str
) -> None:
    mechanism = MECHANISMS[name]
    store = {user: credential_from_password(mechanism, password)}
    server = ScramServer(mechanism, store.get)
    client = ScramClient(mechanism, user, password)
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.username == user


def _run(server: ScramServer, user: str, password: str) -> None:
    client = ScramClient(server.mechanism, user, password)
    server.evaluate(client.final(server.evaluate(client.first())))


def test_a_wrong_password_and_an_unknown_user_fail_the_same_way() -> None:
    store = _store(("alice", "right"))
    errors = []
    for user, password in [("alice", "wrong"), ("mallory", "right")]:
        server = ScramServer(SCRAM_SHA_256, store.get)
        with pytest.raises(ScramError) as failed:
            _run(server, user, password)
        errors.append(str(failed.value))
        assert not server.complete and server.username is None
    assert errors[0] == errors[1] == "invalid credentials"


def test_an_unknown_users_salt_is_stable_so_probing_twice_tells_nothing() -> None:
    def salt_of(user: str) -> bytes:
        nobody: dict[str, ScramCredential] = {}
        first = ScramServer(SCRAM_SHA_256, nobody.get).evaluate(f"n,,n={user},r=abc".encode())
        return dict(item.split("=", 1) for item in first.decode().split(","))["s"].encode()

    assert salt_of("ghost") == salt_of("ghost")


def test_the_mechanisms_must_match() -> None:
    store = {"alice": credential_from_password(SCRAM_SHA_512, "pw")}
    server = ScramServer(SCRAM_SHA_256, store.get)
    with pytest.raises(ScramError):
        _run(server, "alice", "pw")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff\xfe",
        b"p=tls-unique,,n=a,r=b",
        b"n,,r=b,n=a",
        b"n,,n=a",
        b"n,,n=,r=abc",
        b"n,,n=a=2X,r=abc",
        b"n,,n=a,r=abc,m=ext",
        b"n,,n=a,r=abc,tokenauth=true",
        b"n,a=bob,n=alice,r=abc",
        b"x,,n=a,r=abc",
    ],
)
def test_malformed_or_unsupported_client_first_messages_are_refused(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer(SCRAM_SHA_256, _store(("a", "pw")).get).evaluate(message)


@pytest.mark.parametrize(
    "final",
    [
        b"c=biws,r=WRONG,p=AAAA",
        b"c=eSws,r={nonce},p=AAAA",
        b"c=biws,r={nonce}",
        b"c=biws,r={nonce},p=not base64!",
        b"garbage",
    ],
)
def test_malformed_client_final_messages_are_refused(final: bytes) -> None:
    server = ScramServer(SCRAM_SHA_256, _store(("a", "pw")).get, nonce="SERVER")
    server.evaluate(b"n,,n=a,r=CLIENT")
    with pytest.raises(ScramError):
        server.evaluate(final.replace(b"{nonce}", b"CLIENTSERVER"))
    assert not server.complete


def test_a_nonce_with_the_client_nonce_repeated_in_front_is_accepted_as_kafka_does() -> None:
    # librdkafka 2.0 (kcat 1.7.1) writes r= as its own nonce followed by server-first's
    # r value; its proof covers the message as it wrote it. Kafka accepts that.
    m = SCRAM_SHA_256
    store = _store(("user", "pencil"))
    server = ScramServer(m, store.get, nonce="SERVER")
    server_first = server.evaluate(b"n,,n=user,r=CLIENT").decode()
    without_proof = "c=biws,r=CLIENTCLIENTSERVER"
    auth = f"n=user,r=CLIENT,{server_first},{without_proof}".encode()
    salted = salted_password(m, "pencil", RFC_SALT, 4096)
    client_key = m.hmac(salted, b"Client Key")
    signature = m.hmac(m.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    assert server.evaluate(final).startswith(b"v=")
    assert server.username == "user"


def test_user_names_with_commas_and_equals_signs_are_escaped_both_ways() -> None:
    store = {"a,b=c": credential_from_password(SCRAM_SHA_256, "pw")}
    client = ScramClient(SCRAM_SHA_256, "a,b=c", "pw")
    assert b"n=a=2Cb=3Dc," in client.first()
    server = ScramServer(SCRAM_SHA_256, store.get)
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.username == "a,b=c"


def test_kafka_mechanism_ids() -> None:
    assert mechanism_by_type(1) is SCRAM_SHA_256
    assert mechanism_by_type(2) is SCRAM_SHA_512
    assert mechanism_by_type(3) is None
