"""The layer scan showing no build secret is baked into the image (tests/image runs it on the built one)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from nodeenv.image.layers import certificates, leaks

CERT = b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\nQUJDREVGR0hJSktMTU5P\n-----END CERTIFICATE-----\n"


def _layer(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_secret_at_its_path_or_inside_any_file_is_found(tmp_path: Path) -> None:
    clean = _layer(tmp_path / "clean", {"./usr/bin/x": b"\x7fELF...", "./etc/ssl/certs/other.pem": b"x"})
    dirty = _layer(
        tmp_path / "dirty",
        {
            "./etc/pip.conf": b"",  # an empty mount point left behind
            "./opt/app/bundle.pem": b"junk\n" + CERT.replace(b"\n", b"\r\n"),  # re-wrapped copy
            "./opt/app/settings.txt": b'Acquire::http::Proxy "http://p:3128";\n',
        },
    )
    forbidden = {
        "the CA": next(iter(certificates(CERT))),
        "apt settings": b'Acquire::http::Proxy "http://p:3128";',
    }
    assert leaks([clean], ["etc/pip.conf", "run/secrets/*"], forbidden) == []
    assert leaks([clean, dirty], ["etc/pip.conf", "run/secrets/*"], forbidden) == [
        "dirty: etc/pip.conf (path etc/pip.conf)",
        "dirty: opt/app/bundle.pem holds the CA",
        "dirty: opt/app/settings.txt holds apt settings",
    ]


def test_certificates_are_compared_without_line_breaks() -> None:
    assert (
        certificates(CERT)
        == certificates(CERT.replace(b"\n", b"\r\n"))
        == {b"MIIBszCCAVmgAwIBAgIUQUJDREVGR0hJSktMTU5P"}
    )
