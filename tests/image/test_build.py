"""The build: no secret of this machine in any layer, a re-run with no change reuses every layer, and a
missing base is made from Debian's packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nodeenv.image.build import CONTAINERFILE, base_image, make_base
from nodeenv.image.host import CA_BUNDLE, HostConfigError, host_secrets
from nodeenv.image.layers import certificates, files, leaks, oci_layers
from nodeenv.image.store import ROOT, ImageStore
from nodeenv.kubelet.rootdir import mounts_under

# Where the Containerfile mounts secrets, and what mmdebstrap leaves of its bootstrap configuration.
SECRET_PATHS = ["run/secrets/*", "etc/pip.conf", "etc/xdg/pip/*", "etc/apt/apt.conf.d/99mmdebstrap"]


def test_no_layer_holds_this_machines_ca_apt_or_pip_configuration(
    store: ImageStore, image: str, tmp_path: Path
) -> None:
    saved = tmp_path / "oci"
    store("image", "save", "--format", "oci-dir", "-o", str(saved), image, timeout=300)
    layers = oci_layers(saved)
    image_bundle = b"".join(
        d for layer in layers for p, d in files(layer) if p == "etc/ssl/certs/ca-certificates.crt"
    )
    host_only = certificates(CA_BUNDLE.read_bytes()) - certificates(image_bundle)
    # this machine's own CAs (here a TLS-intercepting egress proxy's); with Debian's bundle alone: none
    forbidden = {f"host CA #{i}": cert for i, cert in enumerate(sorted(host_only))}
    work = tmp_path / "work"
    work.mkdir()
    secrets = [s for s in host_secrets(work) if s.id != "ca"]
    forbidden |= {s.id: s.source.read_bytes().strip() for s in secrets}
    assert {"apt.conf"} <= forbidden.keys()
    assert leaks(layers, SECRET_PATHS, forbidden) == []
    assert len(layers) == 4  # base, Debian packages, the dependencies' venv, the suite


def _make_image() -> str:
    proc = subprocess.run([sys.executable, "-m", "nodeenv.image", "build"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_rebuild_without_a_change_reuses_every_layer(store: ImageStore, image: str) -> None:
    _make_image()  # up to date with this checkout
    before = store("image", "inspect", "--format", "{{.Id}}", image)
    out = _make_image()
    assert store("image", "inspect", "--format", "{{.Id}}", image) == before
    steps = out.split("STEP")[1:]
    instructions = [ln for ln in CONTAINERFILE.read_text().splitlines() if ln[:1].isalpha()]
    assert len(steps) == len(instructions) and all(
        "Using cache" in step for step in steps if " RUN " in step or " COPY " in step
    ), out
    assert f"image: {image} in {store.base}" in out


def test_a_missing_base_is_made_from_debian_packages(tmp_path: Path) -> None:
    """What `make image` does first on a fresh machine, into a store of its own."""
    store = ImageStore(tmp_path / "podman")
    store.ensure()
    base = base_image(CONTAINERFILE.read_text())
    work = tmp_path / "work"
    work.mkdir()
    try:
        make_base(store, base, work)
        assert store.exists(base.name) and store.exists(f"localhost/{base.name}")
        script = (
            ". /etc/os-release; echo $VERSION_CODENAME; ls /etc/apt/apt.conf.d; wc -c < /etc/resolv.conf;"
            "find /usr/share/doc -type f ! -name copyright | wc -l; ls /usr/share/man | wc -l;"
            "dpkg -l usrmerge perl 2>/dev/null | grep -c ^ii;"
            "test -L /bin && test -L /lib && echo merged-usr"
        )
        out = store("run", "--rm", "--network=none", base.name, "sh", "-c", script).split()
        assert out == [base.codename, "01autoremove", "70debconf", "0", "0", "0", "0", "merged-usr"]
        assert store.size(base.name) < 100e6
    finally:
        store("rmi", "-af", check=False)
        for point in sorted(mounts_under(store.base), key=len, reverse=True):  # podman's overlay home
            subprocess.run(["umount", point], check=True)
        shutil.rmtree(store.base / "storage", ignore_errors=True)
    assert mounts_under(store.base) == []


def test_a_base_of_another_release_than_the_hosts_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HostConfigError, match="name no jessie suite"):
        make_base(ImageStore(tmp_path), base_image("FROM debian:jessie-slim\n"), tmp_path)
