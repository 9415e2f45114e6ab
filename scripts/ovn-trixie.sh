#!/usr/bin/env bash
# Makes build/ovn-trixie/: Debian 13 (trixie)'s OVN 25.03 and OVS 3.5 tools, runnable on this
# Debian 12 host without a chroot, idempotently. Used only when K8SHOST_OVN_TREE names it
# (nodeenv/ovn_tree.py, docs/ovn-version.md); the default stays Debian 12's OVN 23.03 from /usr.
#
# 1. `mmdebstrap --variant=minbase` of trixie with ovn-central, ovn-host and openvswitch-switch,
#    from the mirror and apt settings this machine's apt uses (nodeenv/image/host.py, as
#    `make image` does). Package scripts run in the tree's chroot; no daemon is started.
# 2. build/ovn-trixie/bin/<tool> (beside the tree: the tree's own /bin is its /usr/bin): a copy of
#    each OVS/OVN program whose ELF interpreter and RPATH (the tree's patchelf) name the tree's own
#    dynamic loader and libraries, so it runs on this host without a chroot (host paths, run dirs
#    and netns stay as they are), and /proc/<pid>/cmdline and exe name the daemon as usual.
#
# Output: build/ovn-trixie/root/ (the tree), build/ovn-trixie/bin/ (the patched programs), and TREE.txt with the
# versions and the recipe's hash. Nothing is done when the result is already there.
set -euo pipefail
recipe=$(sha256sum "$0" | cut -d' ' -f1)
cd "$(dirname "$0")/.."
root=$PWD
OUT=build/ovn-trixie
WORK=build/ovn-trixie-work
PACKAGES=ovn-central,ovn-host,openvswitch-switch,openvswitch-common,patchelf

if [ -x "$OUT/bin/ovn-northd" ] && grep -qx "recipe $recipe" "$OUT/TREE.txt" 2>/dev/null; then
  exit 0
fi
for tool in mmdebstrap sha256sum; do
  command -v "$tool" >/dev/null || { echo "ovn-trixie: $tool missing (run scripts/setup.sh)" >&2; exit 1; }
done
[ -x .venv/bin/python ] || { echo "ovn-trixie: no .venv (run make setup)" >&2; exit 1; }
start=$(date +%s)
mkdir -p "$WORK"
# This machine's bookworm main-archive entry with the suite swapped to trixie (the same mirror and
# keyring: bookworm's debian-archive-keyring has trixie's release key), and its Acquire:: settings.
.venv/bin/python - "$WORK" <<'EOF'
import sys
from pathlib import Path

from nodeenv.image.host import apt_settings, debian_sources, read_sources

work = Path(sys.argv[1])
main = debian_sources(read_sources(), "bookworm").split("\n\n")[0]
lines = [("Suites: trixie" if line.startswith("Suites:") else line) for line in main.splitlines()]
(work / "trixie.sources").write_text("\n".join(lines) + "\n")
(work / "apt.conf").write_text(apt_settings())
EOF

rm -rf "$OUT" && mkdir -p "$OUT"
echo "ovn-trixie: mmdebstrap --variant=minbase trixie with $PACKAGES -> $OUT"
mmdebstrap --variant=minbase --quiet --aptopt="$WORK/apt.conf" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$PACKAGES" \
  trixie "$OUT/root" "$WORK/trixie.sources" >"$WORK/mmdebstrap.log" 2>&1 ||
  { tail -n 20 "$WORK/mmdebstrap.log" >&2; echo "ovn-trixie: mmdebstrap failed ($WORK/mmdebstrap.log)" >&2; exit 1; }

tree=$root/$OUT/root
loader=$tree/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2  # the file itself, not lib64/ symlink
libs=$tree/usr/lib/x86_64-linux-gnu
mkdir -p "$OUT/bin"
for exe in "$tree"/usr/bin/ov* "$tree"/usr/sbin/ov*; do
  name=$(basename "$exe")
  # only the ELF programs (ovs-docker, ovs-tcpdump ... are scripts for the host's interpreters)
  [ "$(head -c4 "$exe" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  cp "$exe" "$OUT/bin/$name"
  "$loader" --library-path "$libs" "$tree/usr/bin/patchelf" --set-interpreter "$loader" --force-rpath \
    --set-rpath "$libs" "$OUT/bin/$name"
  chmod 0755 "$OUT/bin/$name"
done
elapsed=$(($(date +%s) - start))
{
  echo "$("$OUT/bin/ovn-northd" --version | head -n1)"
  echo "$("$OUT/bin/ovsdb-server" --version | head -n1)"
  echo "packages $PACKAGES from $(grep -m1 '^URIs:' "$WORK/trixie.sources" | cut -d' ' -f2) trixie"
  echo "made in ${elapsed} s"
  echo "recipe $recipe"
} >"$OUT/TREE.txt"
echo "ovn-trixie: $(head -n1 "$OUT/TREE.txt") made in ${elapsed} s -> $OUT"
