#!/usr/bin/env bash
# Makes build/ovn-trixie/: Debian 13 (trixie)'s OVN 25.03 and OVS 3.5 tools, runnable on this
# Debian 12 host without a chroot, idempotently (`make ovs`). The node environment, the tests, the
# benches and the sandbox run only this tree's programs (nodeenv/ovn_tree.py, docs/ovn-version.md).
#
# 1. `mmdebstrap --variant=minbase` of trixie with ovn-central, ovn-host and openvswitch-switch,
#    from the mirror and apt settings this machine's apt uses (nodeenv/image/host.py, as
#    `make image` does). Package scripts run in the tree's chroot; no daemon is started.
# 2. build/ovn-trixie/bin/<tool> (beside the tree: the tree's own /bin is its /usr/bin): a copy of
#    each OVS/OVN program whose ELF interpreter and RPATH (the tree's patchelf) name the tree's own
#    dynamic loader and libraries, so it runs on this host without a chroot (host paths, run dirs
#    and netns stay as they are), and /proc/<pid>/cmdline and exe name the daemon as usual.
#    A program that is a symlink in the tree (trixie's /usr/sbin/ovs-vswitchd ->
#    /etc/alternatives/ovs-vswitchd -> /usr/lib/openvswitch-switch/ovs-vswitchd) is resolved inside
#    the tree, never on the host (where the same absolute paths lead to Debian 12's programs).
# 3. Each copied program's `--version` must be the tree's (OVN_SERIES for ovn-*, OVS_SERIES for
#    ovs-*/ovsdb-*): otherwise the script fails and TREE.txt is not written.
#    `scripts/ovn-trixie.sh --check DIR` runs only that check over DIR's programs.
#
# Output: build/ovn-trixie/root/ (the tree), build/ovn-trixie/bin/ (the patched programs), and TREE.txt with the
# versions and the recipe's hash. Nothing is done when the result is already there.
set -euo pipefail
recipe=$(sha256sum "$0" | cut -d' ' -f1)
check_dir=""
if [ "${1:-}" = "--check" ]; then
  check_dir=$(realpath "${2:?usage: ovn-trixie.sh --check DIR}")
fi
cd "$(dirname "$0")/.."
root=$PWD
OUT=build/ovn-trixie
WORK=build/ovn-trixie-work
PACKAGES=ovn-central,ovn-host,openvswitch-switch,openvswitch-common,patchelf
OVN_SERIES=25.03
OVS_SERIES=3.5

# Every program in $1 says the tree's version, e.g. "ovn-northd 25.03.0" or
# "ovs-vswitchd (Open vSwitch) 3.5.0"; prints each offender and fails when one does not.
check_versions() {
  local exe name first want bad=0
  for exe in "$1"/*; do
    name=$(basename "$exe")
    case $name in
      ovn-*) want=$OVN_SERIES ;;
      ovs-* | ovsdb-*) want=$OVS_SERIES ;;
      *) continue ;;
    esac
    first=$("$exe" --version 2>&1 | head -n1) || true
    case "$first " in
      *" $want".*) ;;
      *)
        echo "ovn-trixie: $exe --version says '$first', not $want.x: not the tree's program" >&2
        bad=1
        ;;
    esac
  done
  return "$bad"
}
if [ -n "$check_dir" ]; then
  check_versions "$check_dir" || exit 1
  exit 0
fi

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
# A path of the tree with its symlinks followed inside the tree: an absolute target is re-rooted
# under $tree, a relative one is taken from the link's directory; the result must be a file there.
resolve_in_tree() {
  local path=$1 target hops=0
  while [ -L "$path" ]; do
    target=$(readlink "$path")
    case $target in
      /*) path=$tree$target ;;
      *) path=$(dirname "$path")/$target ;;
    esac
    hops=$((hops + 1))
    [ "$hops" -le 20 ] || { echo "ovn-trixie: $1: more than 20 symlinks" >&2; return 1; }
  done
  case "$(readlink -f "$path")" in
    "$(readlink -f "$tree")"/*) [ -f "$path" ] || { echo "ovn-trixie: $1 -> $path: not a file" >&2; return 1; } ;;
    *) echo "ovn-trixie: $1 -> $path leaves the tree" >&2; return 1 ;;
  esac
  echo "$path"
}
mkdir -p "$OUT/bin"
for link in "$tree"/usr/bin/ov* "$tree"/usr/sbin/ov*; do
  name=$(basename "$link")
  exe=$(resolve_in_tree "$link")
  # only the ELF programs (ovs-docker, ovs-tcpdump ... are scripts for the host's interpreters)
  [ "$(head -c4 "$exe" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  cp "$exe" "$OUT/bin/$name"
  "$loader" --library-path "$libs" "$tree/usr/bin/patchelf" --set-interpreter "$loader" --force-rpath \
    --set-rpath "$libs" "$OUT/bin/$name"
  chmod 0755 "$OUT/bin/$name"
done
check_versions "$OUT/bin" || { echo "ovn-trixie: refusing the tree (see above); $OUT/TREE.txt not written" >&2; exit 1; }
elapsed=$(($(date +%s) - start))
{
  echo "$("$OUT/bin/ovn-northd" --version | head -n1)"
  echo "$("$OUT/bin/ovsdb-server" --version | head -n1)"
  echo "$("$OUT/bin/ovs-vswitchd" --version | head -n1)"
  echo "packages $PACKAGES from $(grep -m1 '^URIs:' "$WORK/trixie.sources" | cut -d' ' -f2) trixie"
  echo "made in ${elapsed} s"
  echo "recipe $recipe"
} >"$OUT/TREE.txt"
echo "ovn-trixie: $(head -n1 "$OUT/TREE.txt") made in ${elapsed} s -> $OUT"
