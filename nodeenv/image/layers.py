"""What an image's layers hold, read from `podman image save --format oci-dir`: used to show that the
build secrets (CA bundle, apt settings, pip configuration) left nothing behind in any layer."""

from __future__ import annotations

import fnmatch
import json
import re
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s+(.*?)\s+-----END CERTIFICATE-----", re.S)


def oci_layers(oci_dir: Path) -> list[Path]:
    """The layer blobs of a saved OCI image directory, base first."""
    [entry] = json.loads((oci_dir / "index.json").read_text())["manifests"]
    manifest = json.loads(_blob(oci_dir, entry["digest"]).read_text())
    return [_blob(oci_dir, layer["digest"]) for layer in manifest["layers"]]


def _blob(oci_dir: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return oci_dir / "blobs" / algorithm / hexdigest


def files(layer: Path) -> Iterator[tuple[str, bytes]]:
    """(path, content) of each regular file in a layer tar (any compression)."""
    with tarfile.open(layer, "r:*") as tar:
        for member in tar:
            if member.isfile():
                extracted = tar.extractfile(member)
                yield member.name.removeprefix("./"), extracted.read() if extracted else b""


def certificates(bundle: bytes) -> set[bytes]:
    """The certificates of a PEM bundle (their base64 bodies, whitespace removed)."""
    return {re.sub(rb"\s", b"", body) for body in PEM.findall(bundle)}


def leaks(
    layers: Iterable[Path], forbidden_paths: Iterable[str], forbidden_content: Mapping[str, bytes]
) -> list[str]:
    """Each file of the layers at a forbidden path (fnmatch patterns) or holding a forbidden content
    (name -> bytes; a PEM certificate body matches with or without its line breaks)."""
    patterns = list(forbidden_paths)
    needles = {name: content for name, content in forbidden_content.items() if content.strip()}
    found = []
    for layer in layers:
        for path, data in files(layer):
            found += [f"{layer.name[:12]}: {path} (path {p})" for p in patterns if fnmatch.fnmatch(path, p)]
            flat = re.sub(rb"\s", b"", data) if b"-----BEGIN" in data else data
            found += [
                f"{layer.name[:12]}: {path} holds {name}"
                for name, needle in needles.items()
                if needle in data or needle in flat
            ]
    return found
