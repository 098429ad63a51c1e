#!/bin/bash
# run.sh — run os-ken's OpenFlow Switch Test Tool (os_ken/tests/switch/tester.py)
# against gswitchd or Open vSwitch and print per-folder pass/fail counts.
#
# Usage (as root):
#   integration/switchtest/run.sh [--target gswitchd|ovs] [--gswitchd BIN]
#       [--root DIR] [--flow-cache] [--timeout SECONDS] [--log DIR] PATH...
#
# PATH: pattern folders or single pattern files (.json). A folder's own .json
# files are one "folder" of the report; its subfolders are folders of their
# own. Folder names are relative to --root (default: ../shared/data/ryu-of13
# from the repository root).
#
#   --target gswitchd   (default) the switch under test is gswitchd, datapath id 1,
#                       built from this tree unless --gswitchd names a binary.
#   --target ovs        the switch under test is an Open vSwitch bridge (netdev
#                       datapath), for comparison.
#   --flow-cache        leave Open vSwitch's datapath flow cache on. By default the
#                       harness sets other_config:flow-limit=0 (no datapath flow
#                       cache): with the cache, a barrier reply does not mean that
#                       OVS's forwarding uses the new flows, so the tester bridge
#                       (and an OVS target) may handle a test packet with a stale
#                       cached flow — the tester then counts the packet on its
#                       port 2 but sends no packet-in, and the tool reports
#                       "Receiving timeout: increment in rx_packets in tester"
#                       for a switch that forwarded right (see
#                       ../shared/notes/ryu-switch-test-tool.md). The tester is the
#                       instrument, so it runs without the cache; --flow-cache is
#                       for measuring Open vSwitch as shipped with --target ovs.
#   --no-flow-cache     the default; accepted for older command lines.
#   --timeout S         limit for the whole tool run (default 1800).
#   --log DIR           keep the tool's output (tester.log), the parsed results
#                       and the daemons' logs there.
#
# Set-up, all inside a private network namespace (removed on exit): three
# veth pairs tN <-> sN (IPv6 disabled), the target's port N on tN, the
# tester — an OVS bridge with datapath_type=netdev, datapath id 2 — port N
# on sN; ovsdb-server and ovs-vswitchd run with a private run directory;
# both switches connect to one osken-manager running the tool.
#
# Output: one line per folder
#   RESULT folder=<name> ok=<n> error=<m> total=<n+m>
# then "RESULT total ok=<n> error=<m> total=<t> complete=<yes|no>"
# (complete=no when the tool did not reach its "Test end"). Exit status 0
# when the tool ran to its end, 1 when it did not, 2 on a set-up error.
#
# Debian packages: openvswitch-switch (ovsdb-server, ovs-vswitchd,
# ovsdb-tool, ovs-vsctl), python3-os-ken (osken-manager, the tool),
# iproute2, and Go to build gswitchd.
set -u

target=gswitchd
gswitchd=
root=
flowcache=0
timeout=1800
logdir=
paths=()
while [ $# -gt 0 ]; do
	case "$1" in
	--target) target=$2; shift 2 ;;
	--gswitchd) gswitchd=$2; shift 2 ;;
	--root) root=$2; shift 2 ;;
	--flow-cache) flowcache=1; shift ;;
	--no-flow-cache) flowcache=0; shift ;;
	--timeout) timeout=$2; shift 2 ;;
	--log) logdir=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
	-*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	*) paths+=("$1"); shift ;;
	esac
done

die() { echo "run.sh: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ -n "$root" ] || root="$repo/../shared/data/ryu-of13"
[ -d "$root" ] || die "pattern root $root is missing (the OpenFlow 1.3 patterns, ../shared/data/ryu-of13)"
root=$(cd "$root" && pwd)
[ ${#paths[@]} -gt 0 ] || die "no pattern folder or file given (try $root/match)"
case "$target" in gswitchd|ovs) ;; *) die "--target must be gswitchd or ovs" ;; esac
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth pairs, AF_PACKET)"

need() { command -v "$1" >/dev/null 2>&1 || die "$1 is not installed: apt-get install $2"; }
need ip iproute2
need ovsdb-server openvswitch-switch
need ovs-vswitchd openvswitch-switch
need ovsdb-tool openvswitch-switch
need ovs-vsctl openvswitch-switch
need osken-manager python3-os-ken
tester=/usr/lib/python3/dist-packages/os_ken/tests/switch/tester.py
[ -f "$tester" ] || die "$tester is missing: apt-get install python3-os-ken"
schema=/usr/share/openvswitch/vswitch.ovsschema
[ -f "$schema" ] || die "$schema is missing: apt-get install openvswitch-switch"

work=$(mktemp -d /tmp/switchtest.XXXXXX)
ns=swtest-$$
pids=()
cleanup() {
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		for _ in $(seq 50); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "${pids[i]}" 2>/dev/null
		wait "${pids[i]}" 2>/dev/null
	done
	if [ -n "$logdir" ]; then
		mkdir -p "$logdir" && cp -f "$work"/*.log "$work"/results.txt "$logdir"/ 2>/dev/null
	fi
	ip netns del "$ns" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Stage the patterns: $work/patterns/<folder>/<file>.json (symlinks), and
# map each file's description (its first element) to its folder.
stage() { # file
	local f=$1 dir rel
	dir=$(cd "$(dirname "$f")" && pwd)
	rel=${dir#"$root"}; rel=${rel#/}; [ -n "$rel" ] || rel=.
	case "$dir" in "$root"|"$root"/*) ;; *) rel=$(basename "$dir") ;; esac
	mkdir -p "$work/patterns/$rel" && ln -sf "$dir/$(basename "$f")" "$work/patterns/$rel/"
}
for p in "${paths[@]}"; do
	if [ -d "$p" ]; then
		while IFS= read -r f; do stage "$f"; done < <(find "$p" -name '*.json' | sort)
	elif [ -f "$p" ]; then
		stage "$p"
	else
		die "$p: no such pattern folder or file"
	fi
done
[ -d "$work/patterns" ] || die "no .json patterns under ${paths[*]}"
/usr/bin/python3 - "$work/patterns" >"$work/descmap" <<'EOF' || die "cannot read the patterns"
import json, os, sys
top = sys.argv[1]
for d, _, files in sorted(os.walk(top)):
    for f in sorted(files):
        if f.endswith('.json'):
            j = json.load(open(os.path.join(d, f)))
            desc = next((x for x in j if isinstance(x, str)), f)
            print('%s\t%s' % (desc, os.path.relpath(d, top)))
EOF

# The namespace and its links.
ip netns add "$ns" || die "ip netns add failed"
nsx() { ip netns exec "$ns" "$@"; }
nsx sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
nsx ip link set lo up
for i in 1 2 3; do
	nsx ip link add "t$i" type veth peer name "s$i" || die "veth t$i"
	nsx sysctl -qw "net.ipv6.conf.t$i.disable_ipv6=1" "net.ipv6.conf.s$i.disable_ipv6=1"
	nsx ip link set "t$i" up && nsx ip link set "s$i" up
done

# Open vSwitch with a private database and run directory.
export OVS_RUNDIR=$work/run OVS_LOGDIR=$work OVS_DBDIR=$work/db OVS_SYSCONFDIR=$work/etc
mkdir -p "$OVS_RUNDIR" "$OVS_DBDIR" "$OVS_SYSCONFDIR/openvswitch"
ovsdb-tool create "$OVS_DBDIR/conf.db" "$schema" >/dev/null || die "ovsdb-tool create"
db=unix:$OVS_RUNDIR/db.sock
ip netns exec "$ns" ovsdb-server "$OVS_DBDIR/conf.db" --remote=punix:"$OVS_RUNDIR/db.sock" \
	--pidfile="$OVS_RUNDIR/ovsdb-server.pid" --unixctl="$OVS_RUNDIR/ovsdb-server.ctl" \
	--log-file="$work/ovsdb-server.log" </dev/null >>"$work/ovsdb-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$OVS_RUNDIR/db.sock" ] && break; sleep 0.1; done
vsctl() { ovs-vsctl --db="$db" --timeout=20 "$@"; }
vsctl --no-wait init || die "ovs-vsctl init"
if [ "$flowcache" = 0 ]; then
	vsctl --no-wait set Open_vSwitch . other_config:flow-limit=0
fi
ip netns exec "$ns" ovs-vswitchd "$db" --pidfile="$OVS_RUNDIR/ovs-vswitchd.pid" \
	--unixctl="$OVS_RUNDIR/ovs-vswitchd.ctl" --log-file="$work/ovs-vswitchd.log" \
	</dev/null >>"$work/ovs-vswitchd.log" 2>&1 &
pids+=($!)

port=$((16000 + RANDOM % 20000))
ctrl=tcp:127.0.0.1:$port
bridge() { # name dpid iface-prefix
	vsctl add-br "$1" -- set bridge "$1" datapath_type=netdev protocols=OpenFlow13 \
		fail_mode=secure other-config:datapath-id="$2" other-config:disable-in-band=true \
		-- add-port "$1" "${3}1" -- set interface "${3}1" ofport_request=1 \
		-- add-port "$1" "${3}2" -- set interface "${3}2" ofport_request=2 \
		-- add-port "$1" "${3}3" -- set interface "${3}3" ofport_request=3 \
		-- set-controller "$1" "$ctrl" \
		-- set controller "$1" connection-mode=out-of-band max_backoff=1000 ||
		die "ovs-vsctl add-br $1 (see $work/ovs-vswitchd.log)"
	nsx ip link set "$1" down 2>/dev/null
}
bridge br-tester 0000000000000002 s

# Daemons start as simple commands (not through nsx) so that $! is the
# daemon itself (ip netns exec execs it) and cleanup stops it.
# The tool (osken-manager) first, then the target, which connects to it.
: >"$work/tester.log"
ip netns exec "$ns" timeout --signal=TERM --kill-after=10 "$timeout" osken-manager --ofp-tcp-listen-port "$port" \
	--test-switch-dir "$work/patterns" --test-switch-target 0000000000000001 \
	--test-switch-tester 0000000000000002 "$tester" </dev/null >>"$work/tester.log" 2>&1 &
toolpid=$!
pids+=($toolpid)

case "$target" in
gswitchd)
	if [ -z "$gswitchd" ]; then
		command -v go >/dev/null || die "go is not installed (needed to build gswitchd)"
		gswitchd=$work/gswitchd
		(cd "$repo" && go build -o "$gswitchd" ./cmd/gswitchd) || die "go build ./cmd/gswitchd"
	fi
	ip netns exec "$ns" "$gswitchd" --port 1=t1 --port 2=t2 --port 3=t3 --datapath-id 1 --controller "$ctrl" \
		--fail-mode secure --backend cpu --max-delay 50us --ctl-socket "$work/gswitchd.sock" \
		</dev/null >>"$work/gswitchd.log" 2>&1 &
	pids+=($!)
	;;
ovs)
	bridge br-target 0000000000000001 t
	;;
esac

echo "switchtest: target=$target patterns=${paths[*]} flow-cache=$([ $flowcache = 1 ] && echo on || echo off) (log: ${logdir:-not kept})" >&2
wait "$toolpid"
wait_rc=$?

# Parse: a line holding a file's description starts that file; an
# indented "<test description> OK|ERROR" line is one test of it.
awk -F'\t' -v complete="$(grep -q -- '---  Test end  ---' "$work/tester.log" && echo yes || echo no)" '
FNR == NR { folder[$1] = $2; order[++n] = $2; next }
{ line = $0; sub(/\r$/, "", line) }
(line in folder) { cur = folder[line]; next }
line ~ /^    [^ ].* (OK|ERROR)$/ && cur != "" {
	if (line ~ / OK$/) ok[cur]++; else err[cur]++
}
END {
	for (i = 1; i <= n; i++) {
		f = order[i]
		if (seen[f]++) continue
		o = ok[f] + 0; e = err[f] + 0
		printf "RESULT folder=%s ok=%d error=%d total=%d\n", f, o, e, o + e
		to += o; te += e
	}
	printf "RESULT total ok=%d error=%d total=%d complete=%s\n", to, te, to + te, complete
}' "$work/descmap" "$work/tester.log" | tee "$work/results.txt"
grep -q -- '---  Test end  ---' "$work/tester.log" || {
	echo "switchtest: the tool did not finish (exit $wait_rc); its last lines:" >&2
	tail -n 20 "$work/tester.log" >&2
	exit 1
}
exit 0
