#!/usr/bin/env bash
# Builds ovs-vswitchd 3.5.0 from Debian 13's source into build/ovs-3.5.0/, idempotently.
#
# Why: Debian 12's ovs-vswitchd 3.1.0 aborts in its userspace conntrack under TCP connection
# churn through an OVN load balancer (docs/troubleshooting.md; fixed upstream in 3.1.3).
# Only the daemon and its database schema are built; Debian 12's ovsdb-server, ovs-vsctl,
# ovs-appctl and OVN 23.03 keep working with them (tests/integration/nodeenv/test_lb_conntrack_churn.py).
#
# The source: Debian's `openvswitch-source` binary package (an unpacked, configured source
# tree), fetched from the Debian mirror this machine's apt uses and checked against the
# SHA-256 in trixie's Packages index. (The orig tarball is in the same pool directory, but
# this machine's mirror does not serve source tarballs of that package.)
#
# Output: build/ovs-3.5.0/ovs-vswitchd, build/ovs-3.5.0/vswitch.ovsschema, and BUILD.txt with
# the version and the build time. Nothing is done when the result is already there.
# Build dependencies (gcc, make, libssl-dev, python3) come from scripts/setup.sh's apt list.
set -euo pipefail
recipe=$(sha256sum "$0" | cut -d' ' -f1)
cd "$(dirname "$0")/.."

VERSION=3.5.0
DEB=openvswitch-source_${VERSION}-1_all.deb
DEB_SHA256=aca60ac8c4ad49a6908c9d8201b97bd75898c54357f880ad50540b0461461bb9
OUT=build/ovs-${VERSION}
WORK=build/ovs-src

# The result records the hash of this script ($recipe): a changed recipe builds again.
if [ -x "$OUT/ovs-vswitchd" ] && [ -f "$OUT/vswitch.ovsschema" ] && grep -qx "recipe $recipe" "$OUT/BUILD.txt" 2>/dev/null; then
  exit 0
fi
for tool in gcc make python3 dpkg-deb sha256sum /usr/lib/apt/apt-helper; do
  command -v "$tool" >/dev/null || { echo "build-ovs: $tool missing (run scripts/setup.sh)" >&2; exit 1; }
done
start=$(date +%s)
mkdir -p "$WORK"

# The mirror of this machine's apt sources (the one serving the main archive), else Debian's CDN.
mirror=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -v -- '-security/' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian/}
if ! echo "$DEB_SHA256  $WORK/$DEB" | sha256sum -c --status 2>/dev/null; then
  echo "build-ovs: downloading ${mirror}pool/main/o/openvswitch/$DEB"
  # apt's own downloader: this machine's apt settings (proxy, CA), and it checks the SHA-256
  /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file \
    "${mirror}pool/main/o/openvswitch/$DEB" "$WORK/$DEB" "SHA256:$DEB_SHA256"
fi

src=$WORK/usr/src/openvswitch
rm -rf "$WORK/usr"
dpkg-deb -x "$WORK/$DEB" "$WORK"
cd "$src"
# Debian's layout (so built-in defaults such as /var/run/openvswitch match Debian's tools);
# static libopenvswitch (the default): the daemon needs only libc and libssl at run time.
# No AF_XDP, no libcap-ng (--user is not used), no USDT probes, no DPDK.
./configure -q --prefix=/usr --localstatedir=/var --sysconfdir=/etc \
  --disable-afxdp --disable-libcapng --enable-silent-rules \
  --disable-dependency-tracking --with-version-suffix=-k8shost CFLAGS="-O2 -g0"
# Only ovs-vswitchd: first the generated headers `make all` would make (BUILT_SOURCES), then it.
printf 'print-built:\n\t@echo $(BUILT_SOURCES)\n' >print-built.mk
built=$(make -s -f Makefile -f print-built.mk print-built)
# shellcheck disable=SC2086  # a list of file names
make -s -j"$(nproc)" $built
make -s -j"$(nproc)" vswitchd/ovs-vswitchd
cd - >/dev/null

mkdir -p "$OUT"
install -m 0755 "$src/vswitchd/ovs-vswitchd" "$OUT/ovs-vswitchd.new"
install -m 0644 "$src/vswitchd/vswitch.ovsschema" "$OUT/vswitch.ovsschema"
mv "$OUT/ovs-vswitchd.new" "$OUT/ovs-vswitchd"
rm -rf "$WORK/usr"
elapsed=$(($(date +%s) - start))
{
  echo "ovs-vswitchd $("$OUT/ovs-vswitchd" --version | head -n1 | awk '{print $NF}')"
  echo "source ${mirror}pool/main/o/openvswitch/$DEB sha256 $DEB_SHA256"
  echo "built in ${elapsed} s with $(nproc) cores"
  echo "recipe $recipe"
} >"$OUT/BUILD.txt"
echo "build-ovs: $(head -n1 "$OUT/BUILD.txt") built in ${elapsed} s -> $OUT"
