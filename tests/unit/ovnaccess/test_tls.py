"""ovnaccess.tls: the three paths as flags with OVN_SSL_* fallbacks, checked before use, and an
`ssl:` remote refused early when no client identity is set."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ovnaccess import tls
from ovnaccess.tls import InsecureKey, OvnTls, TlsNotConfigured


def parse(argv: list[str], env: dict[str, str]) -> OvnTls | None:
    p = argparse.ArgumentParser()
    tls.add_arguments(p, env)
    return OvnTls.from_args(p.parse_args(argv))


def files(tmp_path: Path, key_mode: int = 0o600) -> OvnTls:
    out = OvnTls(private_key=tmp_path / "a.key", certificate=tmp_path / "a.crt", ca_cert=tmp_path / "ca.crt")
    for path in (out.private_key, out.certificate, out.ca_cert):
        path.write_text("x")
    out.private_key.chmod(key_mode)
    return out


def test_flags_fall_back_to_the_shared_environment_variables() -> None:
    env = {"OVN_SSL_PRIVATE_KEY": "/k", "OVN_SSL_CERTIFICATE": "/c", "OVN_SSL_CA_CERT": "/ca"}
    assert parse([], env) == OvnTls(private_key=Path("/k"), certificate=Path("/c"), ca_cert=Path("/ca"))
    assert parse(["--ovn-ssl-private-key", "/k2"], env).private_key == Path("/k2")  # type: ignore[union-attr]
    assert parse([], {}) is None, "no TLS for unix:/tcp: remotes"
    assert OvnTls.from_env(env) == parse([], env)
    assert OvnTls.from_env(env).env() == env  # type: ignore[union-attr]


def test_some_but_not_all_paths_is_an_error_naming_the_missing_flags() -> None:
    with pytest.raises(ValueError, match="--ovn-ssl-certificate, --ovn-ssl-ca-cert"):
        parse(["--ovn-ssl-private-key", "/k"], {})


def test_the_cli_flags_are_those_ovs_and_ovn_programs_take(tmp_path: Path) -> None:
    f = files(tmp_path)
    assert f.ctl_flags() == [f"--private-key={f.private_key}", f"--certificate={f.certificate}",
                             f"--ca-cert={f.ca_cert}"]  # fmt: skip


@pytest.mark.parametrize("mode", [0o604, 0o644, 0o660, 0o606, 0o620])
def test_a_key_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(InsecureKey, match=f"{mode:04o}"):
        files(tmp_path, mode).check()


def test_a_0600_key_with_its_certificate_and_ca_passes(tmp_path: Path) -> None:
    files(tmp_path).check()
    files(tmp_path, 0o400).check()
    files(tmp_path, 0o440).check()  # a Secret as kubelet gives it to a non-root container (fsGroup)


def test_missing_files_are_named(tmp_path: Path) -> None:
    f = files(tmp_path)
    f.ca_cert.unlink()
    with pytest.raises(FileNotFoundError, match=r"ca\.crt"):
        f.check()
    f.private_key.unlink()
    with pytest.raises(InsecureKey, match="does not exist"):
        f.check()


def test_an_ssl_remote_without_a_client_identity_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tls, "_applied", None)
    tls.require_for(["unix:/run/nb.sock", "tcp:10.0.0.1:6641"])
    with pytest.raises(TlsNotConfigured, match=r"ssl:10\.0\.0\.1:6641.*OVN_SSL_PRIVATE_KEY"):
        tls.require_for(["unix:/run/nb.sock", "ssl:10.0.0.1:6641"])
