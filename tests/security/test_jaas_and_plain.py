"""JAAS login-module values as Kafka writes them, and SASL/PLAIN against their users."""

from __future__ import annotations

import pytest

from odradek.core.errors import ConfigError
from odradek.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from odradek.security.plain import PlainError, PlainServer, plain_token, plain_users

KAFKA_DOC_EXAMPLE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def test_kafkas_documented_plain_config_parses() -> None:
    module = parse_jaas_config(KAFKA_DOC_EXAMPLE, "k")
    assert module.class_name == PLAIN_LOGIN_MODULE and module.flag == "required"
    assert module.options["username"] == "admin"
    assert plain_users(module.options) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_quoted_values_may_hold_spaces_semicolons_and_escaped_quotes() -> None:
    module = parse_jaas_config('a.B optional user_x="p a;s\\"s" flag=true \n  other = "="  ;', "k")
    assert module.flag == "optional"
    assert module.options == {"user_x": 'p a;s"s', "flag": "true", "other": "="}


def test_the_options_never_show_in_a_repr() -> None:
    assert "admin-secret" not in repr(parse_jaas_config(KAFKA_DOC_EXAMPLE, "k"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a login module"),
        ("a.B required", "expected a login module"),
        ("a.B sometimes;", "invalid control flag"),
        ('a.B required user="x"', "must end with ';'"),
        ("a.B required user=;", "has no value"),
        ('a.B required "x";', "option=value"),
        ("a.B required; c.D required;", "exactly one login module"),
        ('a.B required user="x" #;', "unexpected character"),
    ],
)
def test_bad_jaas_values_are_refused_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        parse_jaas_config(text, "listener.name.x.plain.sasl.jaas.config")
    assert str(refused.value).startswith("listener.name.x.plain.sasl.jaas.config")


def test_plain_accepts_a_known_user_with_the_right_password() -> None:
    server = PlainServer({"alice": "secret"})
    assert server.evaluate(plain_token("alice", "secret")) == b""
    assert server.complete and server.username == "alice"


def test_plain_accepts_an_authorization_id_equal_to_the_user() -> None:
    server = PlainServer({"alice": "secret"})
    server.evaluate(b"alice\0alice\0secret")
    assert server.username == "alice"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (plain_token("alice", "wrong"), "Invalid username or password"),
        (plain_token("bob", "secret"), "Invalid username or password"),
        (plain_token("alice", "secre"), "Invalid username or password"),
        (plain_token("", "secret"), "username not specified"),
        (plain_token("alice", ""), "password not specified"),
        (b"bob\0alice\0secret", "authorization id"),
        (b"alice\0secret", "expected 3 tokens"),
        (b"\0alice\0se\0cret", "expected 3 tokens"),
        (b"\0\xff\0secret", "not UTF-8"),
    ],
)
def test_plain_refusals(token: bytes, message: str) -> None:
    server = PlainServer({"alice": "secret"})
    with pytest.raises(PlainError, match=message):
        server.evaluate(token)
    assert not server.complete and server.username is None
