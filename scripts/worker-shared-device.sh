#!/bin/bash
# worker-shared-device.sh: the device run of the datapath workers' shared
# batches (--worker-shared, gpu.Gatherer), for the H100/H200 machine (no Go
# there). Build on a development machine first, in the repository root (the
# device run carries bin/):
#
#   export CGO_CFLAGS="-I$PWD/gpu/cudacompat -I$PWD/.cuda/include" CGO_LDFLAGS="-L$PWD/.cuda/lib"
#   go build -tags cuda -ldflags='-s -w' -o bin/gswitchd-cuda ./cmd/gswitchd
#   go build -ldflags='-s -w' -o bin/gswitchctl ./cmd/gswitchctl
#   go test -c -tags cuda -ldflags='-s -w' -o bin/gpu.test ./gpu
#   go test -c -tags cuda -ldflags='-s -w' -o bin/datapath_pipeline.test ./datapath/pipeline
#   xz -T2 -1 bin/*                                  # the carry limit is 64 MiB
#
# then run "bash scripts/worker-shared-device.sh tests" and, in a call of
# its own (each takes most of a call's 10 minutes), "... bench" there with
# carry ["bin"]; or "... quick" (five minutes): the Gatherer's tests, the
# floor and two rounds of the workers' own and shared batches; or "... ab"
# (seven minutes): the floor, own and shared batches alternated; or
# "... gather" (nine minutes): one slot, waiting for a slot, --min-batch 1;
# "... resident" (six minutes): kernels/flow.cu and resident.cu compiled
# with nvcc there (GSWITCH_PTX_DIR; the PTX comes back in ptx.tar.xz), the
# resident lookups' tests and memcheck, then the workers' lookups through
# the resident kernel against their own batches; "... resbench": resident.cu
# compiled, its tests, and the same against the floor; "... eager" (eight
# minutes): the committed PTX checked against nvcc's, the resident tests
# and memcheck, then the workers' eager close (+eager) with resident
# lookups against their runs closed at the deadline; "... reslat" (eight
# minutes): resident.cu compiled, its tests, BenchmarkCUDAResidentLatency,
# then the floor, workers with 2 runs in flight closed at the deadline,
# and eager workers, synchronous and with 1 and 2 runs in flight,
# alternated; "... latency" (six minutes): the resident tests, then the
# floor, eager workers with resident lookups and the CPU backend's; "...
# rate" (seven minutes): the lossless rates to 4.5 M of the floor, the
# default datapath and eager workers with resident lookups; "... flag"
# (four minutes): the same eager workers by --resident-lookups; "...
# flagab" (five minutes): the flag against the environment's setting;
# "... rounds" (five minutes): plain and the defaults on block rings, three
# rounds on a finer grid; "... blockw" (six minutes): the same grid to
# 5.5 M for plain, the defaults and eager workers with resident lookups
# on block rings; "... blockw2" (five minutes): to 6 M, plain against
# those workers in batches of 64 with 2 and 4 runs in flight; "... wprof"
# (five minutes): their CPU profile at 5 M, then two rounds of plain,
# them and the defaults; "... profs" (two minutes): CPU profiles of
# plain, them and the defaults at 5 M; "... plainbatch" (two minutes, no CUDA test):
# plain sending 256 frames a call against 64; "... wrounds" (five minutes): three rounds of
# plain against them; "... pause" (five minutes): them with the resident wait that pauses
# between reads against the one that yields, alternated with plain; "... diag" (four minutes):
# CPU profiles and perf of plain, them and them with that wait, three steps at 5 M each; "... confirm" (four minutes): the latency
# setting by the flag against the floor, three rounds. Each
# but plainbatch begins with a CUDA test: on a machine just started the first process to
# open the device waits about 30 s for the driver. tests runs the CUDA tests of the Gatherer and of the
# workers' runs in flight, compute-sanitizer memcheck over them and the
# host side of shared lookups (BenchmarkCUDASharedLookups); bench
# runs bench forward on 8 switch
# cores (the bench on 8-15), 8 pairs, 131,072 rules in 512 classes, frame
# rings, 3 s steps with a step at half the lossless rate: the per-queue
# datapath, 8 workers with 2 runs in flight, and the same with their lookups
# in shared batches (2 in flight), three rounds alternated. Raw JSON, logs
# and test output go to $OUT.
cd "$(dirname "$0")/.."
for f in bin/*.xz; do [ -e "$f" ] && xz -df "$f"; done
chmod +x bin/*
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
  lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))'
  echo "thread siblings: $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -u | tr '\n' ' ')"
} > "$OUT/machine.txt" 2>&1
san=/usr/local/cuda/bin/compute-sanitizer
tests() {
( cd gpu
  gt='TestCUDAGatherer|TestCUDAFlowRandom'; [ -n "$QUICK" ] && gt=TestCUDAGatherer
  echo "== gpu"; timeout 120 ../bin/gpu.test -test.run "$gt" -test.count=${QUICK:+2}${QUICK:-1} -test.v 2>&1 | grep -E '^(--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'
  echo "== gpu memcheck"; timeout 120 $san --tool memcheck ../bin/gpu.test -test.run 'TestCUDAGatherer' -test.count=1 2>&1 | tail -2
  [ -z "$QUICK" ] && echo "== gpu bench" && timeout 100 ../bin/gpu.test -test.run XXX -test.bench 'CUDASharedLookups' -test.benchtime 1s -test.count 2 2>&1 | grep -E '^(Benchmark|ok|FAIL)'
  cd ../datapath/pipeline
  echo "== pipeline"; timeout 120 ../../bin/datapath_pipeline.test -test.run 'TestCUDAWorkerRunsInFlight|Worker|Gather' -test.count=1 -test.v 2>&1 | grep -E '^(--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'
  echo "== pipeline memcheck"; timeout 120 $san --tool memcheck ../../bin/datapath_pipeline.test -test.run 'TestCUDAWorkerRunsInFlight' -test.count=1 2>&1 | tail -2
) > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
}
# bench TARGET...: one bench forward per target, in order. A target may
# begin with slot: (gswitchd with GSWITCH_GATHER_WAIT=slot: a worker that
# waits for its shared batch retires the one in flight first) and mb1:
# (--min-batch 1: every first-table batch to the device, where 32 sends
# the workers' runs of fewer keys to the CPU), recorded as
# "gather_wait":"slot" and "min_batch":1 (every line records its
# "min_batch"), res: (GSWITCH_CUDA_RESIDENT=on: small lookups through the
# resident kernel, gpu/resident_cuda.go), recorded as "resident":"on",
# rl: (the same by gswitchd's --resident-lookups 64, recorded in
# "gswitchd_flags"), b64: (--batch-size 64, recorded there too: a
# worker's run then fits a resident lookup), prof: (gswitchd's or the
# plain forwarder's --cpuprofile, written to $OUT/cpu-N.pprof for the Nth
# target), pb64: (the plain forwarder's --batch-size 64, recorded in
# "plain_flags"), pz: (GSWITCH_CUDA_RESIDENT_PAUSE=$PZ, 16 by default: the
# resident wait pauses between reads and yields at every fourth, recorded
# as "resident_pause") and md30:
# (--max-delay 30us; the bound is then 130 µs; every line records its
# "max_delay").
bench() {
: "${i:=0}" # call_round numbers the targets across the bench calls of one run
for t in "$@"; do
  i=$((i+1))
  env=() tag= mb=32 md=50us gf= pf= sw=()
  while :; do
    case $t in
    slot:*) t=${t#slot:} env+=(GSWITCH_GATHER_WAIT=slot) tag="$tag\"gather_wait\":\"slot\"," ;;
    res:*) t=${t#res:} env+=(GSWITCH_CUDA_RESIDENT=on) tag="$tag\"resident\":\"on\"," ;;
    rl:*) t=${t#rl:} gf="$gf --resident-lookups 64" ;;
    pz:*) t=${t#pz:} env+=(GSWITCH_CUDA_RESIDENT_PAUSE=${PZ:-16}) tag="$tag\"resident_pause\":${PZ:-16}," ;;
    b64:*) t=${t#b64:} gf="$gf --batch-size 64" ;;
    pb64:*) t=${t#pb64:} pf="$pf --batch-size 64" ;;
    prof:*) t=${t#prof:} gf="$gf --cpuprofile $OUT/cpu-$i.pprof" pf="$pf --cpuprofile $OUT/cpu-$i.pprof" ;;
    md30:*) t=${t#md30:} md=30us ;;
    mb1:*) t=${t#mb1:} mb=1 ;;
    *) break ;;
    esac
  done
  tag="$tag\"min_batch\":$mb,"
  [ -n "$gf" ] && sw=(--gswitchd-flags "${gf# }")
  [ -n "$pf" ] && sw+=(--plain-flags "${pf# }")
  set=(--ruleset synthetic:131072,512 --pairs 8 --min-batch $mb --max-delay $md --flowmods 0 --json --duration 3s --switch-cpus 0-7)
  [ -z "$NOHALF" ] && set+=(--latency-step)
  [ -n "$PERF" ] && { $PERFCMD record -a -C 0-7 -F 999 -g -o /tmp/perf-$i.data > /tmp/perf-$i.log 2>&1 & pp=$!; sleep 1; }
  timeout 100 env "${env[@]}" bin/gswitchctl bench forward --gswitchd bin/gswitchd-cuda "${set[@]}" "${sw[@]}" --rates "${RATES:-1M,1.5M,2M}" --targets "$t" \
    2>> "$OUT/forward.log" | sed "s/^{/{\"call_round\":$i,$tag/" >> "$OUT/forward.jsonl"
  echo "$tag$t rc $?" >> "$OUT/machine.txt"
  [ -n "$PERF" ] && { kill -INT $pp; wait $pp; perfreport $i; }
done
date -u >> "$OUT/machine.txt"
cat "$OUT/machine.txt"
}
# perf (Linux's, Debian 12's 6.1 with the libraries it needs, not in the
# device's image): on the development machine, once,
#   mkdir -p /tmp/perfpkg/lib && cp /usr/bin/perf /tmp/perfpkg/ && for l in $(ldd /usr/bin/perf | awk '/=>/{print $3}'); do
#     case ${l##*/} in libc.so.6|libm.so.6|libstdc++.so.6|libgcc_s.so.1|libz.so.1|liblzma.so.5|libzstd.so.1|libcrypt.so.1) ;;
#     *) cp -L $l /tmp/perfpkg/lib/ ;; esac; done && tar -C /tmp -cJf bin/perf.tar.xz perfpkg
# (6 MB). perfcheck unpacks it and says in machine.txt whether perf can
# sample here (PERF stays empty if not); with PERF set, bench runs perf
# record on the switch's cores 0-7 (999 Hz, call graphs) around each
# target, and perfreport N writes $OUT/perf-N.txt: the samples by process
# and object (the kernel or the binary), then each forwarder's symbols,
# inclusive (--children: sendmmsg and what it calls) and by leaf.
# bundle packs the profiles and reports into $OUT/diag.tar.xz (a run
# brings back 8 files at most).
PERFCMD="env LD_LIBRARY_PATH=/tmp/perfpkg/lib /tmp/perfpkg/perf"
perfcheck() {
  PERF=
  [ -e bin/perf.tar ] && tar -C /tmp -xf bin/perf.tar
  if $PERFCMD record -a -C 0 -F 999 -g -o /tmp/perf-check.data -- sleep 0.2 > /tmp/perf-check.log 2>&1; then
    PERF=1; echo "perf: samples" >> "$OUT/machine.txt"
    $PERFCMD stat -a -C 0 -e cycles,instructions -- sleep 0.2 2>&1 | grep -E 'cycles|instructions' >> "$OUT/machine.txt"
  else
    echo "perf: cannot sample here: $(tail -1 /tmp/perf-check.log)" >> "$OUT/machine.txt"
  fi
}
perfreport() {
  d=/tmp/perf-$1.data
  { echo "## samples by process and object"
    $PERFCMD report -i $d --stdio --no-children --sort comm,dso -g none 2>/dev/null | grep -Ev '^$|^#$|^# [^S]' | head -30
    for c in gswitchd-cuda gswitchctl; do
      echo "## $c, inclusive (children)"
      $PERFCMD report -i $d --stdio --children --comm $c --sort sym -g none --percent-limit 0.4 2>/dev/null | grep -Ev '^$|^#$|^# [^S]' | head -70
      echo "## $c, by leaf"
      $PERFCMD report -i $d --stdio --no-children --comm $c --sort sym -g none --percent-limit 0.4 2>/dev/null | grep -Ev '^$|^#$|^# [^S]' | head -50
    done; } > "$OUT/perf-$1.txt"
  rm -f $d
}
bundle() {
  (cd "$OUT" && ls cpu-*.pprof perf-*.txt 2>/dev/null | xargs -r tar -cJf diag.tar.xz && ls cpu-*.pprof perf-*.txt 2>/dev/null | xargs -r rm -f)
}
# The resident lookups' checks. ptx KERNEL...: kernels/KERNEL.cu compiled
# with nvcc into /tmp/ptx (the committed PTX copied there first) for sm_90
# and compute_80, nvcc's output in $OUT/nvcc.txt and the PTX in
# $OUT/ptx.tar.xz; it fails when nvcc does. same_ptx KERNEL...: whether
# the committed PTX is nvcc's (after ptx). gtest RUN [SECONDS]: the gpu
# package's tests RUN; memcheck RUN: the same under compute-sanitizer;
# ptest: the pipeline's CUDA tests with resident lookups on.
keep='^(--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'
ptx() {
  mkdir -p /tmp/ptx; cp kernels/*.ptx /tmp/ptx/
  for k in "$@"; do for a in sm_90:sm90 compute_80:compute80; do
    (cd kernels && /usr/local/cuda/bin/nvcc -ptx -arch=${a%%:*} -o "/tmp/ptx/${k}_${a##*:}.ptx" $k.cu) > "/tmp/nvcc-$k-${a##*:}.txt" 2>&1 &
  done; done; wait
  cat /tmp/nvcc-*.txt > "$OUT/nvcc.txt"; cat "$OUT/nvcc.txt"
  (cd /tmp/ptx && tar -cJf "$OUT/ptx.tar.xz" $(for k in "$@"; do echo ${k}_sm90.ptx ${k}_compute80.ptx; done))
  ! grep -q ' error' "$OUT/nvcc.txt"
}
same_ptx() {
  for k in "$@"; do for f in ${k}_sm90 ${k}_compute80; do
    cmp -s "/tmp/ptx/$f.ptx" "kernels/$f.ptx" && echo "ptx $f: the committed file is nvcc's" || echo "ptx $f: DIFFERS from nvcc's"
  done; done
}
gtest() { (cd gpu && timeout ${2:-150} ../bin/gpu.test -test.run "$1" -test.count=1 -test.v 2>&1 | grep -E "$keep"); }
memcheck() {
  (cd gpu && timeout 120 $san --tool memcheck ../bin/gpu.test -test.run "$1" -test.count=1 > "$OUT/memcheck.txt" 2>&1)
  grep -vE '^=========\s+Host Frame' "$OUT/memcheck.txt" | tail -25
}
ptest() {
  (cd datapath/pipeline && GSWITCH_CUDA_RESIDENT=on timeout 120 ../../bin/datapath_pipeline.test \
    -test.run 'TestCUDAWorkerRunsInFlight|TestCUDAAsyncSameFates|TestCUDAProcessPartsSameFates' -test.count=1 -test.v 2>&1 | grep -E "$keep")
}
# conform: the resident lookups' conformance test (TestCUDAResidentFlowRandom),
# which also waits out the driver's first opening, into $OUT/tests.txt.
conform() { gtest TestCUDAResidentFlowRandom > "$OUT/tests.txt" 2>&1; cat "$OUT/tests.txt"; }
# W: the throughput setting's workers on block rings (batches of 64, two
# runs in flight, eager close, resident lookups); TOP: the rates to 6 M.
W=mb1:rl:b64:gswitchd-auto@block+w8+f2+eager TOP=4.5M,5M,5.25M,5.5M,5.75M,6M
case $1 in
tests) tests ;;
bench)
  bench gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2+s2 gswitchd-auto@frame \
        gswitchd-auto@frame gswitchd-auto@frame+w8+f2+s2 gswitchd-auto@frame+w8+f2 \
        gswitchd-auto@frame+w8+f2+s2 gswitchd-auto@frame+w8+f2 gswitchd-auto@frame ;;
quick) # the tests (without the flow conformance and the benchmark), the floor, then two rounds of
       # three targets: runs in flight, and their lookups in shared batches, 2 and 4 in flight
  QUICK=1 tests
  bench plain@frame gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2+s2 gswitchd-auto@frame+w8+f2+s4 \
        gswitchd-auto@frame+w8+f2+s4 gswitchd-auto@frame+w8+f2+s2 gswitchd-auto@frame+w8+f2 ;;
ab) # the floor and the workers' own batches and shared batches with 4 in flight, alternated
  (cd gpu && timeout 120 ../bin/gpu.test -test.run TestCUDAGatherer -test.count=1 -test.v 2>&1 | grep -E '^(--- |ok|FAIL)') > "$OUT/tests.txt"
  bench plain@frame gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2+s4 \
        gswitchd-auto@frame+w8+f2+s4 gswitchd-auto@frame+w8+f2 plain@frame \
        gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2+s4 ;;
gather) # one device slot, a waiting run retiring the batch in flight, every batch to the device
  (cd gpu && timeout 120 ../bin/gpu.test -test.run TestCUDAGatherer -test.count=1 -test.v 2>&1 | grep -E '^(--- |ok|FAIL)') > "$OUT/tests.txt"
  bench gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2+s1 slot:gswitchd-auto@frame+w8+f2+s1 \
        mb1:gswitchd-auto@frame+w8+f2 mb1:slot:gswitchd-auto@frame+w8+f2+s1 \
        mb1:slot:gswitchd-auto@frame+w8+f2+s1 mb1:gswitchd-auto@frame+w8+f2 \
        slot:gswitchd-auto@frame+w8+f2+s1 gswitchd-auto@frame+w8+f2+s1 gswitchd-auto@frame+w8+f2 ;;
resident) # kernels/flow.cu and resident.cu compiled here (the binaries embed what was committed),
          # the tests with that PTX, then the workers' lookups through the resident kernel
          # against the workers' own batches
  ptx flow resident || exit 1
  export GSWITCH_PTX_DIR=/tmp/ptx
  { echo "== gpu"; gtest 'TestCUDAResident|TestCUDAGatherer|TestCUDAFlowRandom' 200
    echo "== gpu memcheck"; memcheck TestCUDAResidentGatherer
    echo "== pipeline"; ptest; } > "$OUT/tests.txt" 2>&1
  cat "$OUT/tests.txt"
  [ -n "$NOBENCH" ] && exit 0
  if grep -qE 'FAIL|panic' "$OUT/tests.txt"; then echo "tests failed: no bench"; exit 1; fi
  bench gswitchd-auto@frame+w8+f2 res:mb1:gswitchd-auto@frame+w8+f2 res:mb1:gswitchd-auto@frame+w8 \
        res:mb1:gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2 ;;
resbench) # resident.cu compiled here, its tests with that PTX, then the floor, resident and own
          # batches alternated
  ptx resident || exit 1
  export GSWITCH_PTX_DIR=/tmp/ptx
  { echo "== gpu"; gtest TestCUDAResident; echo "== gpu memcheck"; memcheck TestCUDAResidentGatherer; } > "$OUT/tests.txt" 2>&1
  cat "$OUT/tests.txt"
  bench plain@frame res:mb1:gswitchd-auto@frame+w8+f2 gswitchd-auto@frame+w8+f2 \
        res:mb1:gswitchd-auto@frame+w8+f2 plain@frame ;;
eager) # the resident lookups' checks (the committed PTX against nvcc's, their tests, memcheck),
       # then the workers' eager close (+eager, --worker-close eager) with resident lookups:
       # synchronous runs, one and two in flight, against two in flight closed at the deadline
  { echo "== gpu"; gtest TestCUDAResident
    echo "== gpu memcheck"; memcheck 'TestCUDAResidentGatherer|TestCUDAResidentClose'
    echo "== pipeline"; ptest; } > "$OUT/tests.txt" 2>&1
  ptx flow resident && same_ptx flow resident >> "$OUT/tests.txt"
  cat "$OUT/tests.txt"
  [ -n "$NOBENCH" ] && exit 0
  bench plain@frame res:mb1:gswitchd-auto@frame+w8+f2 res:mb1:gswitchd-auto@frame+w8+f1+eager \
        res:mb1:gswitchd-auto@frame+w8+f2+eager res:mb1:gswitchd-auto@frame+w8+eager \
        res:mb1:gswitchd-auto@frame+w8+eager res:mb1:gswitchd-auto@frame+w8+f2+eager \
        res:mb1:gswitchd-auto@frame+w8+f1+eager res:mb1:gswitchd-auto@frame+w8+f2 ;;
reslat) # resident.cu compiled here (its PTX back in ptx.tar.xz), its tests, the resident lookups'
        # latency (BenchmarkCUDAResidentLatency), then the floor and eager workers (synchronous, 1 and 2 runs in flight)
  ptx resident || exit 1
  export GSWITCH_PTX_DIR=/tmp/ptx
  { echo "== gpu"; gtest TestCUDAResident
    echo "== gpu memcheck"; memcheck TestCUDAResidentGatherer
    echo "== gpu bench"; (cd gpu && timeout 200 ../bin/gpu.test -test.run XXX -test.bench 'CUDAResidentLatency' -test.benchtime 1x 2>&1 | grep -E '^(Benchmark|ok|FAIL|panic|\s+\S+_test.go)'); } > "$OUT/tests.txt" 2>&1
  cat "$OUT/tests.txt"
  [ -n "$NOBENCH" ] && exit 0
  bench plain@frame res:mb1:gswitchd-auto@frame+w8+f2 res:mb1:gswitchd-auto@frame+w8+eager \
        res:mb1:gswitchd-auto@frame+w8+f1+eager res:mb1:gswitchd-auto@frame+w8+f2+eager \
        res:mb1:gswitchd-auto@frame+w8+f2+eager res:mb1:gswitchd-auto@frame+w8+f1+eager \
        res:mb1:gswitchd-auto@frame+w8+eager res:mb1:gswitchd-auto@frame+w8+f2 plain@frame ;;
latency) # the resident tests with the committed PTX, then the latency at half the lossless rate:
         # the floor, eager workers with resident lookups (one run in flight, and synchronous),
         # and the CPU backend's eager workers
  { echo "== gpu"; gtest TestCUDAResident; echo "== pipeline"; ptest; } > "$OUT/tests.txt" 2>&1
  cat "$OUT/tests.txt"
  bench plain@frame res:mb1:gswitchd-auto@frame+w8+f1+eager res:mb1:gswitchd-auto@frame+w8+eager \
        gswitchd-cpu@frame+w8+eager res:mb1:gswitchd-auto@frame+w8+f1+eager \
        res:mb1:gswitchd-auto@frame+w8+eager res:mb1:gswitchd-auto@frame+w8+f1+eager plain@frame ;;
rate) # the lossless rates up to 4.5 M: the floor on block and frame rings, the default datapath
      # (block rings) and eager workers with resident lookups (frame rings), two rounds
  RATES=2M,2.5M,3M,3.5M,4M,4.5M NOHALF=1 bench plain@block gswitchd-auto@block res:mb1:gswitchd-auto@frame+w8+f1+eager plain@frame \
        plain@frame res:mb1:gswitchd-auto@frame+w8+f1+eager gswitchd-auto@block plain@block ;;
rounds) # the issue's throughput measure: plain and the defaults on block rings, three rounds
        # alternated on a finer grid of rates
  RATES=3.5M,3.75M,4M,4.25M,4.5M,4.75M NOHALF=1 bench plain@block gswitchd-auto@block gswitchd-auto@block \
        plain@block plain@block gswitchd-auto@block ;;
blockw) # the lossless rates on block rings to 5.5 M: plain, the defaults, and eager workers with
        # resident lookups (batches of 256, and of 64, which fit a resident lookup; 1 and 2 in flight)
  conform
  RATES=${RATES:-4M,4.25M,4.5M,4.75M,5M,5.25M,5.5M} NOHALF=1 bench plain@block gswitchd-auto@block \
        mb1:rl:gswitchd-auto@block+w8+f1+eager mb1:rl:b64:gswitchd-auto@block+w8+f1+eager \
        $W plain@block $W \
        mb1:rl:b64:gswitchd-auto@block+w8+f1+eager ;;
blockw2) # the same to 6 M: plain against eager workers with resident lookups in batches of 64, two
         # and four runs in flight, and the defaults once
  conform
  RATES=${RATES:-$TOP} NOHALF=1 bench plain@block $W \
        mb1:rl:b64:gswitchd-auto@block+w8+f4+eager plain@block mb1:rl:b64:gswitchd-auto@block+w8+f4+eager \
        $W gswitchd-auto@block plain@block ;;
wprof) # a CPU profile of those workers (batches of 64, two runs in flight) at 5 M, then plain, the
       # workers and the defaults alternated to 6 M
  conform
  RATES=5M NOHALF=1 bench prof:$W
  RATES=${RATES:-$TOP} NOHALF=1 bench plain@block $W \
        gswitchd-auto@block gswitchd-auto@block $W plain@block ;;
profs) # CPU profiles at 5 M of plain, the throughput setting's workers and the defaults, one host
  conform
  RATES=5M NOHALF=1 bench prof:plain@block prof:$W prof:gswitchd-auto@block ;;
plainbatch) # the plain forwarder sending 256 frames a call (its default) against 64, with CPU profiles
  RATES=${RATES:-5M,5.5M,6M} NOHALF=1 bench prof:plain@block prof:pb64:plain@block pb64:plain@block plain@block ;;
wrounds) # the throughput setting against plain, three rounds alternated to 6 M
  conform
  RATES=${RATES:-$TOP} NOHALF=1 bench plain@block $W \
        $W plain@block plain@block $W ;;
pause) # the resident wait that pauses between reads (pz:) against the one that yields at each,
       # the throughput setting, alternated with plain to 6 M
  conform
  RATES=${RATES:-$TOP} NOHALF=1 bench plain@block $W pz:$W \
        pz:$W $W plain@block ;;
diag) # where a frame's CPU goes at 5 M: the host's own work on the GPU path on one of the
      # host's cores (BenchmarkPerFrame path=ahead, and path=direct for the CPU's), then plain, the
      # throughput setting, and it with the pausing wait, each for three 3 s steps at 5 M with its
      # CPU profile and, where perf can sample, perf record of the switch's cores
  conform
  perfcheck
  (cd datapath/pipeline && taskset -c 0 timeout 120 ../../bin/datapath_pipeline.test -test.run XXX \
    -test.bench 'PerFrame/path=(ahead|direct)/set=wide/batch=256' -test.benchtime 20000x -test.count 2 2>&1 | grep -E '^(Benchmark|ok|FAIL)') >> "$OUT/tests.txt"
  RATES=${RATES:-5M,5M,5M} NOHALF=1 bench prof:plain@block prof:$W prof:pz:$W
  bundle ;;
flag) # --resident-lookups: the CUDA tests of the resident lookups, then the floor and eager
      # workers with the flag, twice
  { echo "== gpu"; gtest TestCUDAResident; } > "$OUT/tests.txt" 2>&1
  cat "$OUT/tests.txt"
  bench plain@frame mb1:rl:gswitchd-auto@frame+w8+f1+eager mb1:rl:gswitchd-auto@frame+w8+f1+eager plain@frame ;;
confirm) # the latency setting by the flag against the floor, three rounds alternated
  bench plain@frame mb1:rl:gswitchd-auto@frame+w8+f1+eager mb1:rl:gswitchd-auto@frame+w8+f1+eager plain@frame \
        plain@frame mb1:rl:gswitchd-auto@frame+w8+f1+eager ;;
flagab) # the flag against the environment's setting, alternated, with the floor
  bench plain@frame mb1:rl:gswitchd-auto@frame+w8+f1+eager res:mb1:gswitchd-auto@frame+w8+f1+eager \
        res:mb1:gswitchd-auto@frame+w8+f1+eager mb1:rl:gswitchd-auto@frame+w8+f1+eager plain@frame ;;
*) echo "usage: $0 tests|bench|quick|ab|gather|resident|resbench|eager|reslat|latency|rate|rounds|blockw|blockw2|wprof|profs|plainbatch|wrounds|pause|diag|flag|flagab|confirm" >&2; exit 2 ;;
esac
