#!/usr/bin/env bash
# OVN central alone, A/B: ovn-northd's CPU and `ovn-nbctl --wait=sb lsp-add` latency per port added
# to one switch, with the OVN/OVS tools of /usr (Debian 12, OVN 23.03) or of a tree
# (scripts/ovn-trixie.sh: OVN 25.03). NB/SB ovsdb-servers and northd on unix sockets in a private
# temp dir (no datapath, no ports, no lock needed); stopped by their pidfiles at the end.
# usage: scripts/ovn-northd-ab.sh LABEL BIN_DIR_OR_EMPTY SHARE_DIR PORTS
#   e.g. scripts/ovn-northd-ab.sh 23.03 "" /usr/share 300
#        scripts/ovn-northd-ab.sh 25.03 build/ovn-trixie/bin build/ovn-trixie/root/usr/share 300
set -euo pipefail
if [ "${1:-}" = --help ] || [ $# -ne 4 ]; then sed -n '2,8p' "$0" | cut -c3-; exit 0; fi
label=$1 bindir=$2 share=$3 n=$4
[ -n "$bindir" ] && export PATH=$(realpath "$bindir"):$PATH
d=$(mktemp -d /tmp/ovn-northd-ab.XXXX)
export OVS_RUNDIR=$d OVS_LOGDIR=$d OVS_DBDIR=$d
ovsdb-tool create $d/nb.db $share/ovn/ovn-nb.ovsschema
ovsdb-tool create $d/sb.db $share/ovn/ovn-sb.ovsschema
for k in nb sb; do
  ovsdb-server $d/$k.db --remote=punix:$d/$k.sock --unixctl=$d/$k.ctl --pidfile=$d/$k.pid --log-file=$d/$k.log --detach --no-chdir 2>/dev/null
done
ovn-northd --ovnnb-db=unix:$d/nb.sock --ovnsb-db=unix:$d/sb.sock --unixctl=$d/northd.ctl --pidfile=$d/northd.pid --log-file=$d/northd.log --detach --no-chdir 2>/dev/null
nb="ovn-nbctl --db=unix:$d/nb.sock"
$nb --wait=sb ls-add sw0
$nb --wait=sb lr-add lr0 -- lrp-add lr0 lrp0 00:00:00:00:ff:01 10.0.0.1/16 -- lsp-add sw0 rp0 -- lsp-set-type rp0 router -- lsp-set-addresses rp0 router -- lsp-set-options rp0 router-port=lrp0
ticks() { awk '{print $14+$15}' /proc/$(cat $d/northd.pid)/stat; }
t0=$(ticks); ms=()
for i in $(seq 1 $n); do
  a=$(date +%s%N)
  $nb --wait=sb lsp-add sw0 p$i -- lsp-set-addresses p$i "0a:00:00:00:$(printf %02x $((i/256))):$(printf %02x $((i%256))) 10.0.$((i/256)).$((i%256+2))"
  b=$(date +%s%N); ms+=($(( (b-a)/1000 )))
done
t1=$(ticks)
sorted=$(printf '%s\n' "${ms[@]}" | sort -n)
med=$(echo "$sorted" | awk -v n=$n 'NR==int(n/2)+1')
p99=$(echo "$sorted" | awk -v n=$n 'NR==int(n*0.99)')
echo "$label $(ovn-northd --version | head -1) ports=$n lsp-add --wait=sb median=${med}us p99=${p99}us northd_cpu=$(( (t1-t0)*10 ))ms total, $(( (t1-t0)*10000/n ))us/change"
for k in northd nb sb; do kill $(cat $d/$k.pid); done
sleep 0.5; rm -rf $d
