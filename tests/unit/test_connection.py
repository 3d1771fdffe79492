"""``forkgate.connection``: flags over environment over defaults; contradictions refused early."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from forkgate import Connection, InvalidRequestError
from forkgate.connection import add_connection_flags, connection_from_args, split_addresses


def parse(argv: list[str], default: str | None = "127.0.0.1:50051") -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_flags(p, default=default)
    return p.parse_args(argv)


def test_addresses_split_on_commas_and_repeats() -> None:
    assert split_addresses(["a:1,b:2", " c:3 "]) == ("a:1", "b:2", "c:3")
    assert Connection("a:1,b:2").addresses == ("a:1", "b:2")
    with pytest.raises(InvalidRequestError, match="at least one"):
        Connection(",")


def test_flags_win_over_the_environment(tmp_path: Path) -> None:
    env = {"FORKGATE_SERVER": "10.0.0.1:1,10.0.0.2:1", "FORKGATE_TLS_CA": "env-ca.crt"}
    conn = connection_from_args(parse([]), env={**env, "FORKGATE_TLS_CA": ""})
    assert conn is not None and conn.addresses == ("10.0.0.1:1", "10.0.0.2:1")
    args = parse(["--server", "10.0.0.9:1", "--server", "10.0.0.8:1"])
    conn = Connection.from_env(env, addresses=split_addresses(args.server), tls_ca="flag-ca")
    assert conn.addresses == ("10.0.0.9:1", "10.0.0.8:1") and conn.tls_ca == "flag-ca"
    assert connection_from_args(parse([], default=None), env={}) is None


def test_contradictions_are_refused_before_connecting(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="needs TLS"):
        Connection(token="t")
    with pytest.raises(InvalidRequestError, match="server name needs TLS"):
        Connection(tls_server_name="certd.test")
    with pytest.raises(InvalidRequestError, match="both tls_cert and tls_key"):
        Connection(tls_ca="ca", tls_cert="c")
    with pytest.raises(InvalidRequestError, match="or a token file"):
        Connection(tls_ca="ca", token="t", token_file="f")
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    with pytest.raises(InvalidRequestError, match="empty"):
        Connection(tls_ca="ca", token_file=str(empty)).read_token()
    args = parse(["--tls-ca", str(tmp_path / "missing.crt")])
    with pytest.raises(InvalidRequestError, match="cannot read"):
        connection_from_args(args, env={})


def test_the_token_never_shows_in_repr() -> None:
    assert "s3cret" not in repr(Connection(tls_ca="ca", token="s3cret"))


def test_the_environment_token_yields_to_a_token_file_flag(tmp_path: Path) -> None:
    f = tmp_path / "t.token"
    f.write_text("from-file\n")
    env = {"FORKGATE_TOKEN": "from-env", "FORKGATE_TLS_CA": "ca"}
    assert Connection.from_env(env).read_token() == "from-env"
    assert Connection.from_env(env, token_file=str(f)).read_token() == "from-file"
