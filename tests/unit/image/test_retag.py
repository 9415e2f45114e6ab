"""The second tag for rolling upgrades: the same build (and cache) as `make image`, under the overlay's
repository with another tag, plus the version label that changes the image ID."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.image.retag import VERSION_LABEL, main, retag_argv, tagged
from nodeenv.image.store import ImageStore


def test_the_new_tag_is_the_overlays_repository_with_a_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nodeenv.image.retag.host_secrets", lambda work: [])
    assert tagged("0.1.1", "registry.plasmacloud.io/k8shost:0.1.0") == "registry.plasmacloud.io/k8shost:0.1.1"
    argv = retag_argv(ImageStore(tmp_path), "0.1.1")
    assert argv[argv.index("-t") + 1] == tagged("0.1.1")
    assert argv[argv.index("--label") + 1] == f"{VERSION_LABEL}=0.1.1"
    assert {"--pull=never", "--layers"} <= set(argv)  # the build cache: every layer a hit
    assert argv[-1] == str(Path(__file__).resolve().parents[3])  # the build context stays last


@pytest.mark.parametrize("bad", ["", "-rc1", "a b", "x" * 129, "1:2"])
def test_a_bad_tag_is_refused_before_anything_runs(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(bad) == 2
    assert "is not an image tag" in capsys.readouterr().err
