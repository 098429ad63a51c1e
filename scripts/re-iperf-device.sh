#!/bin/bash
# re-iperf-device.sh: issue 21's iperf3 RE on/off A/B (integration's
# TestRedundancyEliminationThroughput) on the device machine, which has no
# Go, no iproute2 and no iperf3. Build on a development machine first, in
# the repository root, into a folder the device run carries (DIR):
#
#   env CGO_CFLAGS="-I$PWD/gpu/cudacompat -I$PWD/.cuda/include" CGO_LDFLAGS="-L$PWD/.cuda/lib" \
#     go build -tags cuda -ldflags='-s -w' -o DIR/gswitchd-cuda ./cmd/gswitchd
#   go test -c -ldflags='-s -w' -o DIR/integration.test ./integration/
#   go build -ldflags='-s -w' -o DIR/ipshim ./integration/ipshim
#   cp /usr/bin/iperf3 /lib/x86_64-linux-gnu/{libiperf.so.0,libsctp.so.1,libcrypto.so.3} DIR/
#   gzip DIR/gswitchd-cuda DIR/integration.test DIR/ipshim DIR/libcrypto.so.3
#   cp scripts/re-iperf-device.sh DIR/run.sh
#
# (iperf3 3.12 of Debian bookworm and its libraries need glibc 2.34; the
# device machine has 2.39), then run "bash DIR/run.sh" there with carry
# [DIR]. The test runs once per backend of MODES (default "cpu gpu": its
# --backend cpu, then --backend gpu, a wrapper rewriting the flag) and per
# value of PIPELINES (default "on"; e.g. PIPELINES="on off" for an A/B of
# the RE goroutines, the YAML re.pipeline, passed through the test's
# GSWITCH_RE_YAML), alternating the pipelines ROUNDS_AB times (default 1);
# ROUNDS (default 8) iperf3 rounds a run. Output goes to $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D"
for f in *.gz; do gunzip -f "$f"; done
mkdir -p bin lib
mv -f iperf3 libiperf.so.0 libsctp.so.1 libcrypto.so.3 lib/
chmod +x gswitchd-cuda integration.test ipshim lib/iperf3
ln -sf "$D/ipshim" bin/ip
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/lib/iperf3 "$@"\n' "$D" "$D" > bin/iperf3
# go build -o OUT .../cmd/gswitchd (the tests build gswitchd): copy $GSW_BIN.
printf '#!/bin/sh\n[ "$1" = build ] && [ "$2" = -o ] || { echo "fake go: $*" >&2; exit 1; }\ncase "$4" in */cmd/gswitchd) cp "$GSW_BIN" "$3";; *) echo "fake go: no $4" >&2; exit 1;; esac\n' > bin/go
# gswitchd with --backend gpu in place of the test's --backend cpu.
printf '#!/bin/bash\na=("$@"); for i in "${!a[@]}"; do [ "${a[$i]}" = --backend ] && a[$((i+1))]=gpu; done\nexec %s/gswitchd-cuda "${a[@]}"\n' "$D" > bin/gswitchd-gpu
chmod +x bin/*
export PATH=$D/bin:$PATH
command -v curl >/dev/null || printf '#!/bin/sh\necho "no curl here" >&2; exit 1\n' > bin/curl
chmod +x bin/*
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; uname -r; grep -m1 "model name" /proc/cpuinfo
  for t in ping sysctl curl python3 nsenter; do echo "$t: $(command -v $t)"; done
  iperf3 --version | head -1; LD_LIBRARY_PATH=$D/lib ldd lib/iperf3 | grep -iE "not found|crypto|iperf"; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
for mode in ${MODES:-cpu gpu}; do
  bin=$D/gswitchd-cuda; [ $mode = gpu ] && bin=$D/bin/gswitchd-gpu
  for ab in $(seq 1 "${ROUNDS_AB:-1}"); do
    for pipe in ${PIPELINES:-on}; do
      echo "## $mode pipeline $pipe run $ab $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/throughput.txt"
      GSW_BIN=$bin GSWITCH_RE_YAML="pipeline: $pipe" GSWITCH_RE_IPERF_ROUNDS=${ROUNDS:-8} timeout 110 ./integration.test \
        -test.run '^TestRedundancyEliminationThroughput$' -test.v -test.count=1 >> "$OUT/throughput.txt" 2>&1
      echo "rc $?" >> "$OUT/throughput.txt"
    done
  done
done
grep -E "^##|RESULT|RE on:|rc |FAIL|fatal|Error" "$OUT/throughput.txt" | cut -c1-300
