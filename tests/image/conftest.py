"""The image `make image` built, in its store (build/podman, or K8SHOST_IMAGE_STORE): `make test-image`
builds it first; run alone, a missing image fails loudly."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import pytest

from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def store() -> ImageStore:
    store = ImageStore.from_env(os.environ)
    store.ensure()
    return store


@pytest.fixture(scope="session")
def image(store: ImageStore) -> str:
    name = image_name()
    if not store.exists(name):
        pytest.fail(f"{name} is not in {store.base}: run `make image` (or `make test-image`)")
    return name


@pytest.fixture(scope="session")
def run(store: ImageStore, image: str) -> Run:
    """`podman run --rm <image> argv...` as a container of the image would start: (exit, output)."""

    def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        flags = ["--network=none", *(f"--env={k}={v}" for k, v in (env or {}).items())]
        return subprocess.run(store.command("run", "--rm", *flags, image, *argv), env=store.run_env(),
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    return run
