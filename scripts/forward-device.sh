#!/bin/bash
# forward-device.sh: issue 18's device run of bench forward, for the H100
# machine (no Go there). Build on a development machine first, in the
# repository root (the device run carries bin/):
#
#   env CGO_CFLAGS="-I$PWD/gpu/cudacompat -I$PWD/.cuda/include" CGO_LDFLAGS="-L$PWD/.cuda/lib" \
#     go build -tags cuda -ldflags='-s -w' -o bin/gswitchd-cuda ./cmd/gswitchd
#   go build -ldflags='-s -w' -o bin/gswitchctl ./cmd/gswitchctl
#   env CGO_CFLAGS=... CGO_LDFLAGS=... go test -c -tags cuda -ldflags='-s -w' \
#     -o bin/datapath_pipeline.test ./datapath/pipeline
#   cp ../shared/data/classbench/acl1_20000.txt bin/
#   gzip -f bin/gswitchd-cuda bin/gswitchctl bin/datapath_pipeline.test   # the carry limit is 64 MiB
#
# then run "bash scripts/forward-device.sh" there with carry ["bin"]. It
# runs the pipeline's cuda test binary, then bench forward with 8 pairs over
# the GSwitch synthetic set (131,072 rules in 512 classes) and acl1: plain,
# plain@frame (the latency floor of these ports: frame rings, no batch, no
# table), gswitchd-cpu and gswitchd-gpu, the switch held to cores 0-3 (taskset), the
# bench's generators and sinks on 4-15. Raw JSON and logs go to $OUT.
cd "$(dirname "$0")/.."
for f in bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x bin/gswitchctl bin/gswitchd-cuda bin/datapath_pipeline.test
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } > "$OUT/machine.txt" 2>&1
(cd datapath/pipeline && timeout 150 ../../bin/datapath_pipeline.test -test.count=1 > "$OUT/cuda-tests-pipeline.txt" 2>&1; echo "rc $?" >> "$OUT/cuda-tests-pipeline.txt")
tail -3 "$OUT/cuda-tests-pipeline.txt"
for rs in synthetic:131072,512 classbench:bin/acl1_20000.txt; do
  tag=${rs%%:*}
  timeout 260 taskset -c 4-15 bin/gswitchctl bench forward --targets plain,plain@frame,gswitchd-cpu,gswitchd-gpu --gswitchd bin/gswitchd-cuda \
    --pairs 8 --ruleset "$rs" --switch-cpus 0-3 --min-batch 128 --rates 500k,1M,2M,3M,4M,max --duration 2s \
    --flowmods 0 --latency-step --json > "$OUT/forward-$tag.jsonl" 2> "$OUT/forward-$tag.log"
  echo "$rs rc $?" >> "$OUT/machine.txt"
  grep "round 1" "$OUT/forward-$tag.log" | cut -c1-250
  tail -2 "$OUT/forward-$tag.log"
done
cat "$OUT/machine.txt"
