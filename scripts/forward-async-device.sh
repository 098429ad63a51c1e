#!/bin/bash
# forward-async-device.sh: issue 18's device run of bench forward with the
# asynchronous datapath (shared device batches, gpu.Coalescer), for the
# H100 machine (no Go there). Build on a development machine into a
# git-ignored folder D of the checkout that the device tool sends
# (default .cuda/basync), with the CUDA headers and stub of .cuda:
#
#   export CGO_CFLAGS="-I$PWD/gpu/cudacompat -I$PWD/.cuda/include" CGO_LDFLAGS="-L$PWD/.cuda/lib"
#   go build -tags cuda -ldflags='-s -w' -o $D/gswitchd-cuda ./cmd/gswitchd
#   go build -ldflags='-s -w' -o $D/gswitchctl ./cmd/gswitchctl
#   go test -c -tags cuda -ldflags='-s -w' -o $D/datapath_pipeline.test ./datapath/pipeline
#   go test -c -tags cuda -ldflags='-s -w' -o $D/gpu.test ./gpu
#   cp ../shared/data/classbench/acl1_20000.txt $D/; cp scripts/forward-async-device.sh $D/run.sh
#   gzip -f $D/gswitchd-cuda $D/gswitchctl $D/*.test     # the carry limit is 64 MiB
#
# then run "bash $D/run.sh" there with carry [D]. It runs the CUDA tests of
# datapath/pipeline and gpu and compute-sanitizer memcheck on the
# Coalescer's CUDA test (first: they also fill the driver's cache of
# compiled PTX, without which the first gswitchd-gpu can take longer to
# start than bench forward waits), then bench forward with 8 pairs over
# the GSwitch synthetic set (131,072 rules in 512 classes) and acl1:
# TARGETS (default plain, gswitchd-cpu (merge), gswitchd-gpu and
# gswitchd-auto, interleaved in one run; a gswitchd target may end in
# @block or @frame, its --rx-ring), the switch held to cores 0-3. Raw JSON
# and logs go to $OUT, gswitchd's own logs (info level: the placement
# decisions, "gpu: table calibrated") into gswitchd-logs.tgz there.
# MINBATCH (default 32) is gswitchd's
# --min-batch; RULESETS (default both) the sets to run; RATES, ROUNDS and
# BENCH_TIMEOUT (seconds per set) bench forward's; SKIPTESTS=1 skips the
# tests, GPUTESTS is the gpu tests' -test.run, MEMCHECK=0 skips memcheck.
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../.." || exit 2
for f in "$D"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$D"/gswitchctl "$D"/gswitchd-cuda "$D"/*.test
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u; } > "$OUT/machine.txt" 2>&1
export GSWITCH_ACL1=$D/acl1_20000.txt
if [ ! -e ../shared/data ]; then
  mkdir -p ../shared/data/classbench && ln -sf "$D/acl1_20000.txt" ../shared/data/classbench/
fi
[ "${SKIPTESTS:-0}" = 1 ] || {
  (cd datapath/pipeline && timeout 60 "$D"/datapath_pipeline.test -test.count=1 -test.v -test.run 'CUDA|Async' -test.skip 'LPMShape'; echo "pipeline rc $?")
  (cd gpu && timeout 100 "$D"/gpu.test -test.count=1 -test.v -test.run "${GPUTESTS:-CUDA}" -test.skip 'BGP|Bench4'; echo "gpu rc $?")
  [ "${MEMCHECK:-1}" = 1 ] && (cd gpu && timeout 45 compute-sanitizer --tool memcheck --error-exitcode 3 "$D"/gpu.test -test.count=1 -test.run 'TestCUDACoalescer$'; echo "memcheck rc $?")
} > "$OUT/cuda-tests.txt" 2>&1
LOGS=$(mktemp -d)
for rs in ${RULESETS:-synthetic:131072,512 classbench:$D/acl1_20000.txt}; do
  tag=${rs%%:*}
  timeout "${BENCH_TIMEOUT:-250}" taskset -c 4-15 "$D"/gswitchctl bench forward --targets "${TARGETS:-plain,gswitchd-cpu,gswitchd-gpu,gswitchd-auto}" --gswitchd "$D"/gswitchd-cuda \
    --pairs 8 --ruleset "$rs" --switch-cpus 0-3 --min-batch "${MINBATCH:-32}" --rates "${RATES:-500k,1M,1.5M,2M,2.5M,3M}" --rounds "${ROUNDS:-1}" --duration 2s \
    --flowmods 0 --latency-step --log-dir "$LOGS/$tag" --json > "$OUT/forward-async-$tag.jsonl" 2> "$OUT/forward-async-$tag.log"
  echo "$rs rc $?" >> "$OUT/machine.txt"
  grep -E "round 1|median" "$OUT/forward-async-$tag.log" | cut -c1-330
done
tar czf "$OUT/gswitchd-logs.tgz" -C "$LOGS" .
grep -rh "table calibrated" "$LOGS" | cut -c1-300 | head -20
grep -E "^(--- FAIL|ok|FAIL|PASS)|rc [0-9]|ERROR SUMMARY" "$OUT/cuda-tests.txt" | head -40
cat "$OUT/machine.txt"
