#!/usr/bin/env bash
# device-check.sh: the CUDA checks, on a machine with nvcc and a GPU (the
# device machine), from the repository root (or ROOT):
#
#   1. PTX: rebuild kernels/*.cu with nvcc exactly as make kernels does, into
#      $PTX_DIR, and compare each file with the committed kernels/*.ptx.
#   2. Tests: run each CUDA test binary in $BIN (built elsewhere with
#      go test -c -tags cuda; see below) in its package's folder, with
#      GSWITCH_PTX_DIR set to the fresh PTX (TestCUDAEmbeddedPTX compares
#      it with the embedded copy) and the data sets from $DATA.
#   3. compute-sanitizer memcheck, synccheck and racecheck on the tests of
#      gpu.test named by SANITIZER_RUN (default the flow tests and the
#      markers, matching and filter tests: TestCUDAFlowRejects|TestCUDAFlowACL1|
#      TestCUDARabinMarkers|TestCUDAPubsubRandom|TestCUDAFilterCaptures|
#      TestCUDAPubsubSmall|TestCUDAMarkerPipeline), with -test.short.
#
# It ends with a summary table and exits non-zero if any step failed. Where
# OUT is set (the device tool), it leaves there device-check.log and
# device-check.tgz: every log and the fresh PTX.
#
# The test binaries are built where Go is (the device machine has none),
# named after the package's folder with / turned into _:
#
#   CGO_CFLAGS="-I$PWD/gpu/cudacompat -I$PWD/.cuda/include" \
#   CGO_LDFLAGS="-L$PWD/.cuda/lib" \
#   go test -c -tags cuda -ldflags='-s -w' -o .cuda/bin/gpu.test ./gpu
#   (likewise .cuda/bin/datapath_pipeline.test ./datapath/pipeline)
#
# and the data sets copied to .cuda/data (bgp-full-table.txt.gz,
# acl1_20000.txt); .cuda/ is git-ignored and travels with carry.
#
# Environment: ROOT (default .), BIN (.cuda/bin), DATA (.cuda/data),
# PTX_DIR (a temporary folder), NVCC (nvcc),
# RUN_<name> (the -test.run pattern for binary <name>, default all; the
# pipeline's CPU tests need ../shared/data, so RUN_datapath_pipeline
# defaults to CUDA), TEST_TIMEOUT (10m), SANITIZE (1; 0 skips step 3),
# SANITIZER_TIMEOUT (400 seconds), SANITIZER_RUN (the tests of step 3),
# SANITIZER_TOOLS (memcheck synccheck racecheck).
set -u
cd "${ROOT:-.}" || exit 2
BIN=${BIN:-.cuda/bin}
DATA=${DATA:-.cuda/data}
NVCC=${NVCC:-nvcc}
TEST_TIMEOUT=${TEST_TIMEOUT:-10m}
SANITIZE=${SANITIZE:-1}
WORK=$(mktemp -d)
PTX_DIR=${PTX_DIR:-$WORK/ptx}
mkdir -p "$PTX_DIR"
PTX_DIR=$(cd "$PTX_DIR" && pwd)
[ -d "$BIN" ] && BIN=$(cd "$BIN" && pwd)
LOG=$WORK/device-check.log
: >"$LOG"
summary=()
fail=0
note() { summary+=("$1"); echo "== $1" | tee -a "$LOG"; }

# 1. PTX.
"$NVCC" --version | tail -2 | tee -a "$LOG"
ptx_ok=1
for k in gamt flow resident rabin pubsub filter; do
	for arch in sm_90:sm90 compute_80:compute80; do
		a=${arch%%:*} f=${k}_${arch##*:}.ptx
		if ! (cd kernels && "$NVCC" -ptx -arch="$a" -o "$PTX_DIR/$f" "$k.cu") >>"$LOG" 2>&1; then
			note "ptx $f: nvcc FAILED"
			ptx_ok=0 fail=1
			continue
		fi
		if cmp -s "$PTX_DIR/$f" "kernels/$f"; then
			note "ptx $f: identical to the committed file"
		else
			note "ptx $f: DIFFERS from the committed file ($(diff "kernels/$f" "$PTX_DIR/$f" | grep -c '^[<>]') lines)"
			diff "kernels/$f" "$PTX_DIR/$f" | head -40 >>"$LOG"
			ptx_ok=0 fail=1
		fi
	done
done

# 2. Test binaries.
export GSWITCH_PTX_DIR=$PTX_DIR
[ -f "$DATA/bgp-full-table.txt.gz" ] && export GSWITCH_BGP=$PWD/$DATA/bgp-full-table.txt.gz
[ -f "$DATA/acl1_20000.txt" ] && export GSWITCH_ACL1=$PWD/$DATA/acl1_20000.txt
: "${RUN_datapath_pipeline:=CUDA}"
: "${RUN_cmd_gswitchctl:=CUDA}"
# Tests without an override read the data sets through shareddata.Path:
# ../shared/data beside the checkout (found by go.mod), which does not
# travel to the device machine; link DATA's copies there when it is missing.
if [ ! -e ../shared/data ] && [ -f go.mod ] && [ -d "$DATA" ]; then
	mkdir -p ../shared/data/fib ../shared/data/classbench
	[ -f "$DATA/bgp-full-table.txt.gz" ] && ln -sf "$PWD/$DATA/bgp-full-table.txt.gz" ../shared/data/fib/
	[ -f "$DATA/acl1_20000.txt" ] && ln -sf "$PWD/$DATA/acl1_20000.txt" ../shared/data/classbench/
	note "data: linked $DATA's copies into ../shared/data"
fi
shopt -s nullglob
bins=("$BIN"/*.test)
[ ${#bins[@]} -gt 0 ] || note "tests: no binaries in $BIN"
for b in "${bins[@]}"; do
	name=$(basename "$b" .test)
	dir=${name//_//}
	mkdir -p "$dir"
	var=RUN_$name
	pat=${!var:-.}
	t0=$(date +%s)
	(cd "$dir" && "$b" -test.v -test.count=1 -test.timeout "$TEST_TIMEOUT" -test.run "$pat") >"${LOG%.log}-$name.log" 2>&1
	rc=$?
	pass=$(grep -c '^--- PASS' "${LOG%.log}-$name.log")
	skip=$(grep -c '^--- SKIP' "${LOG%.log}-$name.log")
	nfail=$(grep -c '^--- FAIL' "${LOG%.log}-$name.log")
	[ $rc -eq 0 ] || fail=1
	note "test $name (-test.run '$pat'): rc=$rc pass=$pass fail=$nfail skip=$skip ($(($(date +%s) - t0))s)"
	grep -E '^(--- FAIL|panic|FAIL)' "${LOG%.log}-$name.log" | head -20 | tee -a "$LOG"
done

# 3. compute-sanitizer on the flow, markers, matching and filter tests
# (-test.short: the tests that have one take their smaller sizes).
# The three tools run at once (one process each), each within
# SANITIZER_TIMEOUT seconds (default 400).
if [ "$SANITIZE" = 1 ] && [ -x "$BIN/gpu.test" ]; then
	t0=$(date +%s)
	tools=${SANITIZER_TOOLS:-memcheck synccheck racecheck}
	for tool in $tools; do
		(
			cd gpu && timeout "${SANITIZER_TIMEOUT:-400}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
				"$BIN/gpu.test" -test.count=1 -test.v -test.short \
				-test.run "${SANITIZER_RUN:-TestCUDAFlowRejects|TestCUDAFlowACL1|TestCUDARabinMarkers|TestCUDAPubsubRandom|TestCUDAFilterCaptures|TestCUDAPubsubSmall|TestCUDAMarkerPipeline}"
			echo "rc=$?"
		) >"${LOG%.log}-sanitizer-$tool.log" 2>&1 &
	done
	wait
	for tool in $tools; do
		l=${LOG%.log}-sanitizer-$tool.log
		rc=$(sed -n 's/^rc=//p' "$l" | tail -1)
		[ "$rc" = 0 ] || fail=1
		note "sanitizer $tool: rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$l" | tail -1) (all three $(($(date +%s) - t0))s)"
	done
fi

echo
echo "device-check summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)):"
printf '  %s\n' "${summary[@]}"
[ $ptx_ok = 1 ] || echo "  fresh PTX in $PTX_DIR"
if [ -n "${OUT:-}" ]; then
	cp "$LOG" "$OUT/"
	case $PTX_DIR in
	"$WORK"/*) tar czf "$OUT/device-check.tgz" -C "$WORK" . ;;
	*) tar czf "$OUT/device-check.tgz" -C "$WORK" . -C "$PTX_DIR" . ;;
	esac
fi
exit $fail
