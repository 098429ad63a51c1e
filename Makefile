# gswitch — build, test and benchmark.
#
#   make test    go mod tidy -diff, vet and every test, with the race detector (what CI runs), then
#                the allocation tests without it (the detector allocates where the code does not)
#   make bench   the table benchmarks on ../shared/data, CPU backend, with --check
#   make fuzz    each fuzz target for FUZZTIME (default 20s); fails if any finds a crasher
#   make soak    gswitchd under flow churn, route churn and traffic for SOAK (default 1h); fails on growth,
#                a lookup disagreeing or a restart (root; CI runs a 3-minute version within make test)
#   make build   bin/gswitchd and bin/gswitchctl (stamped with the VCS revision: --version)
#   make demo    gswitchd on two namespaces: a ping through it, gswitchctl's view, clean-up (root)
#   make bench-forward  frames/s through gswitchd, Open vSwitch and the Linux bridge; FLOW_MODs/s (root)

GO       ?= go
DATA     ?= ../shared/data
FUZZTIME ?= 20s
BENCHFLAGS ?= --check --json
# Stamp binaries with the VCS revision (gswitchd --version), whatever
# GOFLAGS says.
BUILDFLAGS ?= -buildvcs=true

.PHONY: all build test tidy vet fuzz soak demo bench bench-lpm bench-classify bench-bart bench-routes bench-forward clean

all: build

build:
	$(GO) build $(BUILDFLAGS) -o bin/gswitchctl ./cmd/gswitchctl
	$(GO) build $(BUILDFLAGS) -o bin/gswitchd ./cmd/gswitchd

demo:
	scripts/demo.sh

vet:
	$(GO) vet ./...

test: tidy vet
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -run 'Alloc' ./datapath/... ./gpu/ ./tables/...

# go.mod and go.sum as go mod tidy would write them (Go 1.23+: -diff prints
# the difference and fails).
tidy:
	$(GO) mod tidy -diff

# Every Fuzz* function of every package, one after the other, FUZZTIME
# each; a target that finds a crasher (written to its package's
# testdata/fuzz/<FuzzName>/) does not stop the others: the run fails at the
# end with the list of failed targets. FUZZFLAGS adds flags (-parallel 1 on
# a busy machine).
FUZZFLAGS ?=
fuzz:
	@failed=""; for pkg in $$($(GO) list ./...); do \
	  for fz in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$fz"; \
	    $(GO) test -run '^$$' -fuzz "^$$fz$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg || failed="$$failed $$pkg.$$fz"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashers in:$$failed" >&2; exit 1; fi; echo "fuzz: nothing found"

# integration's TestFxSoak for SOAK (a Go duration): gswitchd built from
# this tree, FLOW_MOD and kernel route churn, steady traffic through veth
# pairs; resident memory and goroutines sampled from its metrics page.
# Needs root. Under make test it runs for 3 minutes when CI=true (.ci/run)
# and is skipped otherwise.
SOAK ?= 1h
soak:
	GSWITCH_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 -v -run '^TestFxSoak$$' ./integration/

bench: bench-lpm bench-classify bench-bart

bench-lpm: build
	bin/gswitchctl bench lpm --fib $(DATA)/fib/bgp-full-table.txt.gz --updates-per-sec 100000 --duration 500ms --rounds 9 $(BENCHFLAGS)

# ClassBench acl1 with all three classifiers, then the GSwitch §6 sweep:
# N rules in C classes, tuple and Bloom search (linear search too up to 4K
# rules); fewer packets per round where many classes make a lookup slow.
SWEEP_RULES   ?= 256 1024 4096 16384 65536 262144
SWEEP_CLASSES ?= 1 4 16 64 256 1024
bench-classify: build
	bin/gswitchctl bench classify --classbench $(DATA)/classbench/acl1_20000.txt $(BENCHFLAGS)
	@set -e; for n in $(SWEEP_RULES); do for c in $(SWEEP_CLASSES); do \
	  [ $$c -le $$n ] || continue; \
	  algo=tuple,bloom; [ $$n -le 4096 ] && algo=linear,tuple,bloom; \
	  lookups=$$(( 2000000 / c )); [ $$lookups -gt 200000 ] && lookups=200000; [ $$lookups -lt 2000 ] && lookups=2000; \
	  bin/gswitchctl bench classify --synthetic $$n,$$c --algo $$algo --lookups $$lookups --rounds 3 $(BENCHFLAGS); \
	done; done

# GAMT against github.com/gaissmai/bart on the same table and traffic.
bench-bart:
	$(GO) test -run '^$$' -bench 'Lookup|Build|Update' -benchmem -count 3 ./tables/lpm/

# Routes through a private namespace's kernel table (netlink, kernelfib) and
# directly into the route table, into the engine; needs root.
bench-routes: build
	bin/gswitchctl bench routes --fib $(DATA)/fib/bgp-full-table.txt.gz --via netlink --updates-per-sec 100000 --rounds 7 $(BENCHFLAGS)
	bin/gswitchctl bench routes --fib $(DATA)/fib/bgp-full-table.txt.gz --via direct --updates-per-sec 100000 --rounds 7 $(BENCHFLAGS)

# Frames/s forwarded between two namespaces through gswitchd (this tree's),
# Open vSwitch's userspace datapath and the Linux bridge with 1K and 10K
# rules, loss per offered load; FLOW_MODs/s and barrier latency. Needs
# root and openvswitch-switch (FWD_TARGETS=gswitchd,bridge,plain without it).
FWD_TARGETS ?= gswitchd,ovs,bridge,plain
FWD_RATES   ?= 100k,250k,400k,500k,750k,1M,1.5M,2M,max
FWD_FLAGS   ?= --json
bench-forward: build
	$(GO) build $(BUILDFLAGS) -o bin/gswitchd ./cmd/gswitchd
	bin/gswitchctl bench forward --gswitchd bin/gswitchd --targets $(FWD_TARGETS) --rates $(FWD_RATES) $(FWD_FLAGS)

clean:
	rm -rf bin

# The cuda build (GPU backend): needs cuda.h and libcuda.so (the driver API;
# the stub library is enough to link). CUDA_INC / CUDA_LIB override the
# folders under CUDA.
CUDA ?= /usr/local/cuda
CUDA_INC ?= $(CUDA)/include
CUDA_LIB ?= $(CUDA)/lib64/stubs
CUDA_ENV = CGO_CFLAGS="-I$(CURDIR)/gpu/cudacompat -I$(CUDA_INC)" CGO_LDFLAGS="-L$(CUDA_LIB)"
.PHONY: gpu
gpu:
	$(CUDA_ENV) $(GO) build -tags cuda -o bin/gswitchctl-cuda ./cmd/gswitchctl
	$(CUDA_ENV) $(GO) build -tags cuda -o bin/gswitchd-cuda ./cmd/gswitchd
	$(CUDA_ENV) $(GO) test -c -tags cuda -o bin/gpu.test ./gpu

# The CUDA test binaries for scripts/device-check.sh (run there, on the
# device machine, with .cuda carried), built on a machine without CUDA from
# NVIDIA's cuda.h and stub libcuda.so kept in the git-ignored .cuda/
# (copied from the device machine's /usr/local/cuda; never committed):
#   make cuda-tests CUDA_INC=$PWD/.cuda/include CUDA_LIB=$PWD/.cuda/lib
.PHONY: cuda-tests
cuda-tests:
	@mkdir -p .cuda/bin
	@set -e; for pkg in $$(grep -rl '^//go:build cuda' --include='*_test.go' . | xargs -n1 dirname | sort -u); do \
	  name=$$(echo $${pkg#./} | tr / _); echo "== $$pkg -> .cuda/bin/$$name.test"; \
	  $(CUDA_ENV) $(GO) test -c -tags cuda -ldflags='-s -w' -o .cuda/bin/$$name.test $$pkg; \
	done

# The CUDA kernels' PTX, embedded by package kernels. Run on a machine with
# nvcc (CUDA 13; the device machine), then commit kernels/*.ptx;
# TestCUDAEmbeddedPTX (-tags cuda, GSWITCH_PTX_DIR=dir of fresh PTX) fails
# when they are stale. sm_90 for H100/H200, compute_80 for JIT elsewhere.
# The constants both .cu files share are kernels/layout.h, generated from
# the Go layout (go generate ./kernels). scripts/device-check.sh runs these
# same commands on the device machine and compares the PTX.
NVCC ?= nvcc
.PHONY: kernels
kernels:
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o gamt_sm90.ptx gamt.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o gamt_compute80.ptx gamt.cu
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o flow_sm90.ptx flow.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o flow_compute80.ptx flow.cu
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o resident_sm90.ptx resident.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o resident_compute80.ptx resident.cu
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o rabin_sm90.ptx rabin.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o rabin_compute80.ptx rabin.cu
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o pubsub_sm90.ptx pubsub.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o pubsub_compute80.ptx pubsub.cu
	cd kernels && $(NVCC) -ptx -arch=sm_90 -o filter_sm90.ptx filter.cu
	cd kernels && $(NVCC) -ptx -arch=compute_80 -o filter_compute80.ptx filter.cu
