"""PlasmaCloud gRPC credentials (common/plasmacloud_grpc.py) against a service double's TLS port and
IAM token check (nodeenv/plasmacloud_auth.py): real gRPC over TLS on loopback and on a unix socket.

Every refusal is shown to be the guard's: with the interceptor off (`open_server`) the same call is
answered."""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from common.plasmacloud_grpc import CredentialsError, PlasmaCloudAuth, add_flags, secure_channel
from nodeenv.lightningstor import FakeVolumeService
from nodeenv.plasmacloud_auth import AUDIENCE, DevPki, IamTokenCheck, ensure_dev_pki
from protos import lightningstor_pb2 as ls
from protos import lightningstor_pb2_grpc as ls_grpc
from webhook.devcerts import new_key, private_pem


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevPki:
    return ensure_dev_pki(tmp_path_factory.mktemp("pc-pki"))


@pytest.fixture
def endpoint(pki: DevPki, tmp_path: Path) -> Iterator[str]:
    server, _ = pki.server()
    ls_grpc.add_VolumeServiceServicer_to_server(FakeVolumeService(root=tmp_path, nodes=[]), server)
    port = pki.add_port(server, "127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def call(channel: grpc.Channel) -> grpc.StatusCode:
    with channel:
        try:
            ls_grpc.VolumeServiceStub(channel).ListVolumes(ls.ListVolumesRequest(page_size=1), timeout=5)
        except grpc.RpcError as e:
            call.details = e.details()  # type: ignore[attr-defined]
            return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def token_file(tmp_path: Path, token: str, name: str = "token") -> Path:
    path = tmp_path / name
    path.write_text(token + "\n")
    return path


def test_a_call_with_the_platform_token_is_answered(pki: DevPki, endpoint: str) -> None:
    assert call(secure_channel(endpoint, pki.client_auth())) == grpc.StatusCode.OK


def test_over_a_unix_socket_too(pki: DevPki, tmp_path: Path) -> None:
    server, _ = pki.server()
    ls_grpc.add_VolumeServiceServicer_to_server(FakeVolumeService(root=tmp_path, nodes=[]), server)
    sock = f"unix://{tmp_path / 'ls.sock'}"
    pki.add_port(server, sock)
    server.start()
    try:
        assert call(secure_channel(sock, pki.client_auth())) == grpc.StatusCode.OK
        assert call(grpc.insecure_channel(sock)) == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(None)


def test_a_plaintext_client_is_refused(endpoint: str) -> None:
    assert call(grpc.insecure_channel(endpoint)) == grpc.StatusCode.UNAVAILABLE


def test_a_server_the_pinned_ca_did_not_sign_is_refused(pki: DevPki, endpoint: str, tmp_path: Path) -> None:
    other = ensure_dev_pki(tmp_path / "other")
    auth = PlasmaCloudAuth(ca=other.ca, token_file=pki.token)
    assert call(secure_channel(endpoint, auth)) == grpc.StatusCode.UNAVAILABLE


def test_a_call_without_a_token_is_unauthenticated(pki: DevPki, endpoint: str) -> None:
    creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
    assert call(grpc.secure_channel(endpoint, creds)) == grpc.StatusCode.UNAUTHENTICATED
    assert "missing IAM token" in call.details  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("expired", "token expired"),
        ("wrong audience", f"not for audience {AUDIENCE}"),
        ("wrong signer", "unknown signing key"),
        ("wrong issuer", "wrong issuer"),
        ("garbage", "malformed token"),
    ],
)
def test_a_bad_token_is_unauthenticated(
    pki: DevPki, endpoint: str, tmp_path: Path, kind: str, reason: str
) -> None:
    if kind == "wrong signer":
        key = tmp_path / "other.key"
        key.write_bytes(private_pem(new_key("ES256")))
        token = pki.mint(key=key)
    else:
        token = {
            "expired": lambda: pki.mint(ttl=-120),
            "wrong audience": lambda: pki.mint(audience="k8shost"),
            "wrong issuer": lambda: pki.mint(issuer="https://evil.example"),
            "garbage": lambda: "not-a-jwt",
        }[kind]()
    auth = pki.client_auth(token_file(tmp_path, token))
    assert call(secure_channel(endpoint, auth)) == grpc.StatusCode.UNAUTHENTICATED
    assert reason in call.details  # type: ignore[attr-defined]
    assert token not in call.details  # type: ignore[attr-defined]


def test_a_rotated_token_file_is_picked_up_without_a_new_channel(
    pki: DevPki, endpoint: str, tmp_path: Path
) -> None:
    path = token_file(tmp_path, pki.mint(ttl=-120))
    channel = secure_channel(endpoint, pki.client_auth(path))
    stub = ls_grpc.VolumeServiceStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.ListVolumes(ls.ListVolumesRequest(page_size=1), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # kubelet renews a mounted token by swapping a symlink to a new file
    new = token_file(tmp_path, pki.mint(), "token.new")
    path.unlink()
    os.symlink(new, path)
    stub.ListVolumes(ls.ListVolumesRequest(page_size=1), timeout=5)
    channel.close()


def test_an_unreadable_token_file_fails_the_call_naming_the_file_and_logs_no_token(
    pki: DevPki, endpoint: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "nope"
    caplog.set_level(logging.DEBUG)
    assert call(secure_channel(endpoint, pki.client_auth(missing))) == grpc.StatusCode.UNAVAILABLE
    assert str(missing) in call.details  # type: ignore[attr-defined]
    assert call(secure_channel(endpoint, pki.client_auth())) == grpc.StatusCode.OK
    assert pki.token.read_text().strip() not in caplog.text


def test_the_guard_is_what_refuses(pki: DevPki, tmp_path: Path) -> None:
    """The same token-less call, answered by the double without its interceptor."""
    server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(2))
    ls_grpc.add_VolumeServiceServicer_to_server(FakeVolumeService(root=tmp_path, nodes=[]), server)
    port = pki.add_port(server, "127.0.0.1:0")
    server.start()
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
        assert call(grpc.secure_channel(f"127.0.0.1:{port}", creds)) == grpc.StatusCode.OK
    finally:
        server.stop(None)


def test_settings_come_from_flags_or_the_environment(pki: DevPki) -> None:
    p = argparse.ArgumentParser()
    add_flags(p, {"PLASMACLOUD_CA": str(pki.ca), "PLASMACLOUD_TOKEN_FILE": str(pki.token)})
    auth = PlasmaCloudAuth.from_args(p.parse_args(["--plasmacloud-server-name", "x.internal"]))
    assert (auth.ca, auth.token_file, auth.server_name) == (pki.ca, pki.token, "x.internal")
    assert PlasmaCloudAuth.from_env(pki.client_env()) == PlasmaCloudAuth(ca=pki.ca, token_file=pki.token)
    with pytest.raises(CredentialsError, match="TLS with an IAM token only"):
        PlasmaCloudAuth.from_env({"PLASMACLOUD_CA": str(pki.ca)})
    with pytest.raises(CredentialsError, match="go together"):
        PlasmaCloudAuth.from_env({**pki.client_env(), "PLASMACLOUD_CLIENT_CERT": "/x"})


def test_the_dev_pki_keeps_its_secrets_0600(pki: DevPki) -> None:
    for path in (pki.server_key, pki.signing_key, pki.token):
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert not (pki.dir / "ca.key").exists()


def test_a_remembered_token_is_refused_once_it_expires_and_when_the_keys_change(
    pki: DevPki, tmp_path: Path
) -> None:
    now = [time.time()]
    check = IamTokenCheck(pki.rules(), clock=lambda: now[0])
    md = [("authorization", f"Bearer {pki.mint(ttl=60)}")]
    assert check.reason(md) == ""
    now[0] += 60 + 31  # past exp and the 30 s leeway
    assert check.reason(md) == "IAM token rejected: token expired"
    now[0] -= 91
    assert check.reason(md) == ""
    other = ensure_dev_pki(tmp_path / "rotated")
    pki_pub = pki.signing_pub.read_bytes()
    try:
        pki.signing_pub.write_bytes(other.signing_pub.read_bytes())  # IAM rotated its signing key
        assert check.reason(md) == "IAM token rejected: unknown signing key"
    finally:
        pki.signing_pub.write_bytes(pki_pub)
