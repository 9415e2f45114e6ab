"""The `plasmacloud_pki` fixture: one DEVELOPMENT PlasmaCloud PKI per test session (CA, the service
doubles' serving certificate, the dev IAM key and a platform token), as an environment makes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.plasmacloud_auth import DevPki, ensure_dev_pki


@pytest.fixture(scope="session")
def plasmacloud_pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevPki]:
    yield ensure_dev_pki(Path(tmp_path_factory.mktemp("plasmacloud-pki")))
