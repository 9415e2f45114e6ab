from __future__ import annotations

import os
from pathlib import Path

from webhook.filestamp import file_stamp


def test_symlink_swap_with_identical_mtime_and_size_is_a_change(tmp_path: Path) -> None:
    # How kubelet updates a mounted Secret: new file in a new dir, then a symlink swap.
    old, new = tmp_path / "v1", tmp_path / "v2"
    old.mkdir(), new.mkdir()
    (old / "tls.crt").write_text("AAAA")
    (new / "tls.crt").write_text("BBBB")
    st = (old / "tls.crt").stat()
    os.utime(new / "tls.crt", ns=(st.st_atime_ns, st.st_mtime_ns))
    link = tmp_path / "tls.crt"
    link.symlink_to(old / "tls.crt")
    before = file_stamp([link])
    tmp = tmp_path / "tmp-link"
    tmp.symlink_to(new / "tls.crt")
    tmp.replace(link)
    assert file_stamp([link]) != before


def test_missing_file_then_present_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "keys.pem"
    missing = file_stamp([path])
    assert missing == ((0, 0, 0),)
    path.write_text("k")
    assert file_stamp([path]) != missing
    assert file_stamp([path]) == file_stamp([path])
