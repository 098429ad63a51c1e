#!/bin/bash
# demo.sh — gswitchd on a small namespace topology, in one command
# (`make demo`, as root): two hosts, h1 (10.0.0.1) and h2 (10.0.0.2), each
# linked by a veth pair to gswitchd, which runs in a namespace of its own
# with the embedded default configuration, its two ports given as flags and
# the standalone fail mode (with no controller, an L2 learning switch).
# It pings h2 from h1, shows what gswitchctl reports (ports, flows,
# backend, statistics) and removes everything it made, also on failure.
#
# Environment: GSWITCHD and GSWITCHCTL name prebuilt binaries (default:
# built from this tree into bin/ with go build).
# Debian packages: iproute2, iputils-ping; Go to build.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "demo: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth pairs, AF_PACKET): sudo make demo"
command -v ip >/dev/null || die "ip is not installed: apt-get install iproute2"
command -v ping >/dev/null || die "ping is not installed: apt-get install iputils-ping"

gswitchd=${GSWITCHD:-}
gswitchctl=${GSWITCHCTL:-}
if [ -z "$gswitchd" ] || [ -z "$gswitchctl" ]; then
	command -v go >/dev/null || die "go is not installed (needed to build gswitchd and gswitchctl)"
	echo "== building gswitchd and gswitchctl into bin/"
	(cd "$repo" && go build -o bin/gswitchd ./cmd/gswitchd && go build -o bin/gswitchctl ./cmd/gswitchctl)
	gswitchd=$repo/bin/gswitchd gswitchctl=$repo/bin/gswitchctl
fi

id=$$
sw=gsdemo-sw-$id h1=gsdemo-h1-$id h2=gsdemo-h2-$id
work=$(mktemp -d /tmp/gswitch-demo.XXXXXX)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	for ns in "$sw" "$h1" "$h2"; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$work"
	echo "== cleaned up (namespaces $sw $h1 $h2, gswitchd)"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

echo "== topology: $h1 (10.0.0.1) -- swp1 [gswitchd in $sw] swp2 -- $h2 (10.0.0.2)"
ip netns add "$sw"
ip -n "$sw" link set lo up
i=0
for h in "$h1" "$h2"; do
	i=$((i + 1))
	ip netns add "$h"
	ip netns exec "$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$sw" link add "swp$i" type veth peer name eth0 netns "$h"
	ip -n "$h" addr add "10.0.0.$i/24" dev eth0
	ip -n "$h" link set eth0 up
	ip -n "$h" link set lo up
	ip -n "$sw" link set "swp$i" up
done

sock=$work/gswitchd.sock
echo "== starting gswitchd (embedded default configuration; --port 1=swp1 --port 2=swp2 --fail-mode standalone)"
ip netns exec "$sw" "$gswitchd" --port 1=swp1 --port 2=swp2 --fail-mode standalone \
	--ctl-socket "$sock" --p4rt-listen off >"$work/gswitchd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if ! [ -S "$sock" ]; then
	cat "$work/gswitchd.log" >&2
	die "gswitchd did not start"
fi

echo "== ping from h1 to h2 through gswitchd"
ip netns exec "$h1" ping -n -c 3 -i 0.2 -W 2 10.0.0.2
ctl() { ip netns exec "$sw" "$gswitchctl" show "$@" --socket "$sock"; }
echo "== gswitchctl show ports"
ctl ports
echo "== gswitchctl show flows (standalone: no flow entries; the learning table forwards)"
ctl flows
echo "== gswitchctl show backend"
ctl backend
echo "== gswitchctl show stats"
ctl stats
echo "== gswitchd log"
sed 's/^/   /' "$work/gswitchd.log"
echo "== demo passed: traffic went through gswitchd"
