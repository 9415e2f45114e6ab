"""A second build of the suite's image under another tag, for rolling upgrades (docs/upgrade.md):

    python -m nodeenv.image retag 0.1.1

The same Containerfile and build cache as `make image` (every layer a cache hit, seconds), plus one
label, `org.opencontainers.image.version=<tag>`, which changes the image's configuration and so its
ID: the runner and podman see a different image, as a registry's new release would be, while the
content is the same. It is built from the checkout as it is now: a change since `make image` is in
the new tag only (layers from the first changed COPY on rebuilt), as a real new release would be.
Run `make image` first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from nodeenv.image.build import WORK, build_argv, image_name
from nodeenv.image.host import HostConfigError, host_secrets
from nodeenv.image.store import ImageStore, PodmanError

VERSION_LABEL = "org.opencontainers.image.version"
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A tag as the OCI distribution spec allows it."""


def tagged(tag: str, name: str | None = None) -> str:
    """The overlay's image under `tag`: registry.plasmacloud.io/k8shost:<tag>."""
    repo = (name or image_name()).rpartition(":")[0]
    return f"{repo}:{tag}"


def retag_argv(store: ImageStore, tag: str) -> list[str]:
    argv = build_argv(store, tagged(tag), host_secrets(WORK))
    return [*argv[:-1], "--quiet", "--label", f"{VERSION_LABEL}={tag}", argv[-1]]  # prints the image ID


def image_id(store: ImageStore, name: str) -> str:
    return store("image", "inspect", "--format", "{{.Id}}", name)


def main(tag: str) -> int:
    if not TAG.fullmatch(tag):
        print(f"retag: {tag!r} is not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})", file=sys.stderr)
        return 2
    store = ImageStore.from_env(os.environ)
    store.ensure()
    if not store.exists(image_name()):
        print(f"retag: no {image_name()} in {store.base}: run `make image` first", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        WORK.mkdir(parents=True, exist_ok=True, mode=0o700)
        argv = retag_argv(store, tag)
        if subprocess.run(argv, env=store.run_env()).returncode:
            raise PodmanError(f"podman build failed: {' '.join(argv)}")
        old, new = image_id(store, image_name()), image_id(store, tagged(tag))
    except (HostConfigError, PodmanError, OSError) as e:
        print(f"retag: {e}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(f"retag: {tagged(tag)} (image {new[:12]}; {image_name()} is {old[:12]}) in {took:.0f} s")
    return 0 if old != new else 1
