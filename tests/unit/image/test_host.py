"""What `make image` takes from this machine (apt sources, apt settings, pip files) and how its store
is configured; the build itself is tests/image/ (make test-image)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nodeenv.image.build import ImageBuildError, base_image, build_argv, image_name
from nodeenv.image.host import (
    PIP_SECRETS,
    HostConfigError,
    Secret,
    apt_settings,
    debian_sources,
    host_codename,
    pip_secrets,
    read_sources,
    release_sources,
)
from nodeenv.image.store import ImageStore, containers_conf, has_cap_sys_resource, settable_ulimits

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://mirror.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://mirror.example/debian
Suites: bookworm-backports
Components: main
Enabled: no
"""
VENDOR = """Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
"""
ONE_LINE = """# the security archive
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://m.example/sec bookworm-security main
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
deb-src http://mirror.example/debian bookworm main
"""


def test_sources_keep_only_the_release_s_enabled_binary_suites() -> None:
    out = debian_sources(
        {"debian.sources": DEB822, "vendor.sources": VENDOR, "sources.list": ONE_LINE}, "bookworm"
    )
    stanzas = out.strip().split("\n\n")
    assert stanzas[0] == (
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    )
    assert stanzas[1] == (
        "Types: deb\nURIs: http://m.example/sec\nSuites: bookworm-security\n"
        "Components: main\nArchitectures: amd64\nSigned-By: /usr/share/keyrings/k.gpg"
    )
    assert len(stanzas) == 2  # deb-src, the disabled backports, nodistro and cloud-sdk-bookworm are left out


def test_sources_without_the_release_are_a_clear_error() -> None:
    with pytest.raises(HostConfigError, match=r"\(vendor.sources\) name no bookworm suite"):
        debian_sources({"vendor.sources": VENDOR}, "bookworm")


def test_release_sources_rename_the_hosts_suites_when_it_names_no_other() -> None:
    files = {
        "debian.sources": DEB822.replace(" trixie\n", "\n"),
        "vendor.sources": VENDOR,
        "sources.list": ONE_LINE,
    }
    assert release_sources(files, "bookworm", "bookworm") == debian_sources(files, "bookworm")
    renamed = release_sources(files, "trixie", "bookworm")
    assert renamed == debian_sources(files, "bookworm").replace("bookworm", "trixie")
    assert "Suites: trixie trixie-updates\n" in renamed and "Suites: trixie-security\n" in renamed
    # the machine's own entries of the release are used as they are
    assert release_sources({"debian.sources": DEB822}, "trixie", "bookworm") == debian_sources(
        {"debian.sources": DEB822}, "trixie"
    )
    with pytest.raises(HostConfigError, match="name no bookworm suite"):
        release_sources({"vendor.sources": VENDOR}, "trixie", "bookworm")
    with pytest.raises(HostConfigError, match="name no jessie suite"):  # not a release after bookworm
        release_sources(files, "jessie", "bookworm")


def test_host_codename_reads_os_release(tmp_path: Path) -> None:
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian"\nVERSION_CODENAME=bookworm\n')
    assert host_codename(tmp_path / "os-release") == "bookworm"
    (tmp_path / "os-release").write_text("ID=debian\n")
    with pytest.raises(HostConfigError, match="VERSION_CODENAME"):
        host_codename(tmp_path / "os-release")


def test_this_machines_sources_give_a_bootstrappable_list(tmp_path: Path) -> None:
    """apt itself reads what debian_sources wrote (the file mmdebstrap gets)."""
    sources = tmp_path / "etc/apt/sources.list.d/base.sources"
    sources.parent.mkdir(parents=True)
    sources.write_text(debian_sources(read_sources(), "bookworm"))
    (tmp_path / "etc/apt/sources.list").touch()
    proc = subprocess.run(
        ["apt-get", "indextargets", "-o", f"Dir::Etc={tmp_path}/etc/apt",
         "-o", f"Dir::State::Lists={tmp_path}", "--format", "$(RELEASE)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stderr == ""
    assert "bookworm" in subprocess.run(
        ["apt-get", "-o", f"Dir::Etc={tmp_path}/etc/apt", "--print-uris", "update"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_apt_settings_are_the_hosts_acquire_options_in_apt_syntax(tmp_path: Path) -> None:
    settings = apt_settings()
    assert all(line.startswith("Acquire::") and line.endswith(";") for line in settings.splitlines())
    conf = tmp_path / "apt.conf"
    conf.write_text(settings + 'Acquire::http::Proxy "http://proxy.example:3128";\n')
    dumped = subprocess.run(["apt-config", "-c", str(conf), "dump", "Acquire::http::Proxy"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert 'Acquire::http::Proxy "http://proxy.example:3128";' in dumped  # apt parses the file


def test_pip_files_become_secrets_and_an_unknown_one_is_refused() -> None:
    known = sorted(PIP_SECRETS)
    assert [s.id for s in pip_secrets(known)] == [PIP_SECRETS[p] for p in known]
    with pytest.raises(HostConfigError, match=r"/etc/xdg/pip/extra-index\.txt"):
        pip_secrets([*known, Path("/etc/xdg/pip/extra-index.txt")])


def test_every_secret_is_mounted_by_the_containerfile() -> None:
    recipe = (Path(__file__).resolve().parents[3] / "Containerfile").read_text()
    for secret_id in ["ca", "apt.conf", *PIP_SECRETS.values()]:
        assert f"type=secret,id={secret_id}" in recipe, secret_id
    for path, secret_id in PIP_SECRETS.items():
        assert f"id={secret_id},target={path},required=false" in recipe


def test_base_is_the_one_debian_image_every_stage_names() -> None:
    base = base_image("FROM debian:bookworm-slim AS build\nRUN true\nFROM debian:bookworm-slim\n")
    assert (base.name, base.codename) == ("debian:bookworm-slim", "bookworm")
    with pytest.raises(ImageBuildError, match="one base"):
        base_image("FROM debian:bookworm-slim AS build\nFROM debian:trixie-slim\n")
    with pytest.raises(ImageBuildError, match="debian:<codename>"):
        base_image("FROM alpine:3.20\n")


def test_image_name_is_the_one_the_k3s_overlay_runs() -> None:
    assert image_name() == "registry.plasmacloud.io/k8shost:0.1.0"


def test_build_pulls_nothing_and_runs_steps_on_the_host_network(tmp_path: Path) -> None:
    argv = build_argv(ImageStore(tmp_path), "x:1", [Secret("ca", Path("/etc/ssl/certs/ca-certificates.crt"))])
    assert argv[:2] == ["podman", "build"] and {"--pull=never", "--layers", "--network=host"} <= set(argv)
    assert "--secret=id=ca,src=/etc/ssl/certs/ca-certificates.crt" in argv


def test_store_limits_are_ones_this_process_may_set(tmp_path: Path) -> None:
    status = "Name:\tx\nCapEff:\t000001fffeffffff\n"  # all but CAP_SYS_RESOURCE (bit 24)
    assert not has_cap_sys_resource(status) and has_cap_sys_resource("CapEff:\t0000000001000000\n")
    nofile, nproc = settable_ulimits()
    hard = int(subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout)
    assert (nofile, nproc) == (f"nofile={hard}:{hard}", "nproc=4096:4096")
    assert 'default_ulimits = ["nofile=' in containers_conf(tmp_path, settable_ulimits())
    # and no network of podman's own: nothing on the host's links, iptables or /etc/cni
    assert 'netns = "none"' in containers_conf(tmp_path, None)
    assert f'network_config_dir = "{tmp_path}/cni"' in containers_conf(tmp_path, None)
    assert "default_ulimits" not in containers_conf(tmp_path, None)  # podman's defaults where it may


def test_store_configuration_is_written_once_and_named_by_podman_variables(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "podman")
    store.ensure()
    conf = store.base / "containers.conf"
    before = conf.stat().st_mtime_ns
    store.ensure()
    assert conf.stat().st_mtime_ns == before
    assert store.env() == {
        "CONTAINERS_CONF": str(conf),
        "CONTAINERS_STORAGE_CONF": str(store.base / "storage.conf"),
    }
    assert f'graphroot = "{store.base}/storage"' in (store.base / "storage.conf").read_text()
