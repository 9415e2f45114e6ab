"""`make image`: the suite's one image, built from the Containerfile with podman and no registry.

1. The base the Containerfile's FROM names (debian:trixie-slim), when the store lacks it, is made
   here from Debian's packages: `mmdebstrap --variant=minbase` from this machine's apt sources
   (its own release's entries with the suites renamed when they name no other, host.release_sources),
   slimmed as Debian's -slim images are (no docs, man pages, locales), `podman import`ed under
   that name (short names resolve to localhost/ first).
2. `podman build --pull=never`, with this machine's CA bundle, apt settings and pip configuration
   as build secrets; the layer cache rebuilds only what changed.
3. The image's name is the one the k3s overlay's manifests use (daemonsets/overlays/k3s), and its
   size is printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.image.host import (
    HostConfigError,
    Secret,
    apt_settings,
    host_codename,
    host_secrets,
    read_sources,
    release_sources,
)
from nodeenv.image.store import ROOT, ImageStore, PodmanError

CONTAINERFILE = ROOT / "Containerfile"
OVERLAY = ROOT / "daemonsets" / "overlays" / "k3s" / "kustomization.yaml"
WORK = ROOT / "build" / "image"

# Debian's -slim images leave these out (debuerreotype's slimify list); kept in the base's dpkg
# configuration so the packages the Containerfile installs leave them out too.
SLIM_DPKG = """path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/groff/*
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/linda/*
"""
# The bootstrap's own settings and this machine's files mmdebstrap copies in: not the image's.
CLEAN_HOOK = 'rm -f "$1/etc/apt/apt.conf.d/99mmdebstrap" && : > "$1/etc/resolv.conf" && : > "$1/etc/hostname"'
# merged-/usr set up by mmdebstrap's hook instead of the usrmerge package (and the perl it pulls in)
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"


class ImageBuildError(RuntimeError):
    """`make image` cannot go on; the message says which step and why."""


@dataclass(frozen=True, slots=True)
class BaseImage:
    name: str
    codename: str


def base_image(recipe: str) -> BaseImage:
    """The one base every stage of the recipe starts FROM (a Debian `<codename>[-slim]` tag)."""
    bases = {m.group(1) for m in re.finditer(r"^FROM\s+(\S+)", recipe, re.M)}
    if len(bases) != 1:
        raise ImageBuildError(f"the Containerfile must start every stage FROM one base; it names {bases}")
    name = bases.pop()
    repo, _, tag = name.partition(":")
    if repo.rsplit("/", 1)[-1] != "debian" or not tag:
        raise ImageBuildError(f"FROM {name}: the base is made from Debian packages; name debian:<codename>")
    return BaseImage(name, tag.split("-")[0])


def image_name(overlay: Path = OVERLAY) -> str:
    """The image the k3s overlay's manifests run (kustomize's `images:` entry for `k8shost`)."""
    doc = yaml.safe_load(overlay.read_text())
    [entry] = [i for i in doc["images"] if i["name"] == "k8shost"]
    return f"{entry['newName']}:{entry['newTag']}"


def make_base(store: ImageStore, base: BaseImage, work: Path) -> None:
    """mmdebstrap a minbase of the codename from this machine's sources into the store."""
    sources = work / "base.sources"
    sources.write_text(release_sources(read_sources(), base.codename, host_codename()))
    apt_conf, dpkg_cfg = work / "base-apt.conf", work / "base-dpkg.cfg"
    apt_conf.write_text(apt_settings())
    dpkg_cfg.write_text(SLIM_DPKG)
    print(f"image: making {base.name} with mmdebstrap --variant=minbase from {sources}", flush=True)
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError("no mmdebstrap to make the base with: run `make setup` (scripts/setup.sh)")
    mmdebstrap = subprocess.Popen(
        ["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
         f"--aptopt={apt_conf}", f"--dpkgopt={dpkg_cfg}", f"--hook-dir={MERGED_USR_HOOKS}",
         f"--customize-hook={CLEAN_HOOK}",
         base.codename, "-", str(sources)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert mmdebstrap.stdout is not None
    with mmdebstrap.stdout:
        try:
            store("import", "--message", f"mmdebstrap --variant=minbase {base.codename}", "-", base.name,
                  stdin=mmdebstrap.stdout, timeout=900)  # fmt: skip
        except PodmanError:
            mmdebstrap.kill()
            raise
    if mmdebstrap.wait() != 0:
        store("rmi", "-f", base.name, check=False)
        raise ImageBuildError(f"mmdebstrap failed (exit {mmdebstrap.returncode}); see its output above")


def build_argv(store: ImageStore, name: str, secrets: list[Secret]) -> list[str]:
    """podman build: no pull (the base is local), the layer cache, the host's network for the RUN
    steps (no bridge of podman's own), this machine's configuration as secrets."""
    return store.command("build", "--pull=never", "--layers", "--network=host", "-f", str(CONTAINERFILE),
                         "-t", name, *(f"--secret=id={s.id},src={s.source}" for s in secrets),
                         str(ROOT))  # fmt: skip


def build(store: ImageStore, name: str, work: Path) -> None:
    argv = build_argv(store, name, host_secrets(work))
    if subprocess.run(argv, env=store.run_env()).returncode:
        raise ImageBuildError(f"podman build failed: {' '.join(argv)}")


def main() -> int:
    started = time.monotonic()
    store = ImageStore.from_env(os.environ)
    store.ensure()
    WORK.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if shutil.which("podman") is None:
            raise ImageBuildError("no podman: run `make setup` (scripts/setup.sh installs Debian's podman)")
        base = base_image(CONTAINERFILE.read_text())
        if not store.exists(base.name):
            make_base(store, base, WORK)
        name = image_name()
        before = store("image", "inspect", "--format", "{{.Id}}", name) if store.exists(name) else None
        build(store, name, WORK)
        size = store.size(name)
        if before and before != store("image", "inspect", "--format", "{{.Id}}", name):
            # the image it replaced (now untagged): its own layers go, the build cache stays
            store("rmi", before, check=False)
    except (ImageBuildError, HostConfigError, PodmanError, OSError) as e:
        print(f"image: {e}", file=sys.stderr)
        return 1
    print(f"image: {name} in {store.base} ({size / 1e6:.0f} MB) built in {time.monotonic() - started:.0f} s")
    return 0
