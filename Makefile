# gswitch — build, test and benchmark.
#
#   make test    vet and every test (what CI runs)
#   make bench   the table benchmarks on ../shared/data, CPU backend, with --check
#   make fuzz    each fuzz target for FUZZTIME (default 20s)
#   make build   bin/gswitchctl

GO       ?= go
DATA     ?= ../shared/data
FUZZTIME ?= 20s
BENCHFLAGS ?= --check

.PHONY: all build test vet fuzz bench bench-lpm bench-classify bench-bart clean

all: build

build:
	$(GO) build -o bin/gswitchctl ./cmd/gswitchctl

vet:
	$(GO) vet ./...

test: vet
	$(GO) test -count=1 ./...

# Every Fuzz* function of every package, one after the other.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for fz in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$fz"; $(GO) test -run '^$$' -fuzz "^$$fz$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

bench: bench-lpm bench-classify bench-bart

bench-lpm: build
	bin/gswitchctl bench lpm --fib $(DATA)/fib/bgp-full-table.txt.gz --updates-per-sec 100000 $(BENCHFLAGS)

bench-classify: build
	bin/gswitchctl bench classify --classbench $(DATA)/classbench/acl1_20000.txt $(BENCHFLAGS)
	@for s in 256,1 1024,16 4096,64 16384,16 16384,256 65536,256 262144,1024; do \
	  bin/gswitchctl bench classify --synthetic $$s --algo tuple,bloom $(BENCHFLAGS) || exit 1; \
	done

# GAMT against github.com/gaissmai/bart on the same table and traffic.
bench-bart:
	$(GO) test -run '^$$' -bench 'Lookup|Build|Update' -benchmem -count 3 ./tables/lpm/

clean:
	rm -rf bin
