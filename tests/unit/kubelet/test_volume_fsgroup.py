"""Secret and configMap volume files as kubelet writes them: `defaultMode`, and with the pod's
fsGroup owned by that group and group-readable (a non-root container reads a 0400 key)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nodeenv.kubelet.volumes import _write, fs_group


def test_default_mode_without_fs_group(tmp_path: Path) -> None:
    _write(tmp_path, {"tls.key": b"k"}, 0o400)
    st = (tmp_path / "tls.key").stat()
    assert stat.S_IMODE(st.st_mode) == 0o400 and st.st_gid == os.getgid()


def test_fs_group_owns_the_files_and_may_read_them(tmp_path: Path) -> None:
    pod = {"spec": {"securityContext": {"fsGroup": 65534}}}
    _write(tmp_path, {"tls.key": b"k", "sub/ca.crt": b"c"}, 0o400, fs_group(pod))
    for rel in ("tls.key", "sub/ca.crt"):
        st = (tmp_path / rel).stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o440, 65534), rel
    assert fs_group({"spec": {}}) is None
