"""Secrets are 0600 from the moment they exist and are never written through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from common import secretfile
from common.secretfile import write_secret
from nodeenv.kubeapi.devpki import write_kubeconfig
from webhook.devcerts import issue_ca, write_pair


def test_written_0600_without_a_chmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.umask(0o022)
    monkeypatch.setattr(os, "chmod", _forbidden)
    monkeypatch.setattr(Path, "chmod", _forbidden)
    path = write_secret(tmp_path / "k.key", b"secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes() == b"secret"
    kc = write_kubeconfig(
        tmp_path / "admin.kubeconfig", "https://127.0.0.1:1", tmp_path / "ca", "admin", "t0k"
    )
    assert stat.S_IMODE(kc.stat().st_mode) == 0o600
    _, key = write_pair(tmp_path, "ca", *issue_ca())
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_planted_symlink_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    (tmp_path / "admin.kubeconfig").symlink_to(victim)
    write_kubeconfig(tmp_path / "admin.kubeconfig", "https://127.0.0.1:1", tmp_path / "ca", "admin", "t0k")
    assert victim.read_bytes() == b"untouched"
    assert not (tmp_path / "admin.kubeconfig").is_symlink()


def test_the_temporary_name_is_created_exclusively(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags: list[int] = []
    real_open = os.open

    def spy(path: object, flag: int, mode: int = 0o777) -> int:
        flags.append(flag)
        assert mode == 0o600
        return real_open(path, flag, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(secretfile.os, "open", spy)
    write_secret(tmp_path / "s", b"x")
    assert flags and all(f & os.O_EXCL and f & os.O_NOFOLLOW and f & os.O_CREAT for f in flags)
    assert [p.name for p in tmp_path.iterdir()] == ["s"]


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("a secret must be created 0600, not chmod-ed after writing")


def test_the_plasmacloud_dev_pki_writes_no_secret_through_a_symlink(tmp_path: Path) -> None:
    from nodeenv.plasmacloud_auth import DevPki, ensure_dev_pki

    out, victim = tmp_path / "pki", tmp_path / "victim"
    out.mkdir()
    victim.write_bytes(b"untouched")
    DevPki(out).signing_key.symlink_to(victim)
    pki = ensure_dev_pki(out)
    assert victim.read_bytes() == b"untouched" and not pki.signing_key.is_symlink()
    assert stat.S_IMODE(pki.signing_key.stat().st_mode) == stat.S_IMODE(pki.token.stat().st_mode) == 0o600
