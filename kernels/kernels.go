// Package kernels holds gswitch's CUDA kernels: the CUDA C sources (*.cu) and
// the PTX that nvcc builds from them (make kernels, on a machine with nvcc),
// embedded so that the binary needs no compiler at run time. It has no cgo and
// is always built; package gpu loads the PTX under the build tag cuda.
//
// gamt.cu: gamt_lookup4, gamt_lookup6 (GAMT trie lookups, one thread per
// address) and bubble_scatter (applies one update's write bubbles). Its header
// comment gives the ABI.
//
// flow.cu: flow_lookup, flow_lookup_w8, flow_lookup_w16 (flow table
// classification: linear, tuple-space, Bloom and merged tuple search over
// package flow's device image; a lane per packet, refilled when its packet
// is done, and class tests deferred until half the warp holds one), and
// flow_lookup_split with flow_ranks (the comparison: several threads per
// packet). Its header comment gives the ABI.
//
// rabin.cu: rabin_markers and rabin_markers_w16/w32/w48/w64 (Rabin
// fingerprint markers of packed payloads, a thread per payload segment),
// rabin_gather and rabin_gather16 (payloads read out of registered host
// memory into the packed buffer, a warp per payload); pubsub.cu:
// pubsub_match (CCM counting, a block per event); filter.cu: gpf_walk (gPF's
// filters walked in their control-flow form for the packets an index lists
// them under, the pairs queued per warp), gpf_walk_v1 (its earlier form) and
// gpf_filter (gPF's criteria, sub-predicate and filter stages fused, a
// thread per packet). Each
// header comment gives the ABI; package gpu loads these modules on first
// use.
//
// layout.h: the layout constants both read (regions, header, descriptor and
// entry words of package flow's image, package lpm's entry encoding, package
// gpu's device descriptors), generated from the Go constants by
// internal/genlayout (go generate ./kernels); its test fails while the
// checked-in header is stale. A layout change in Go is: go generate
// ./kernels, make kernels on a machine with nvcc (scripts/device-check.sh
// rebuilds and compares the PTX there), commit the header and the PTX.
package kernels

//go:generate go run ./internal/genlayout -o layout.h

import _ "embed"

// LayoutHeader is layout.h, which both sources include.
//
//go:embed layout.h
var LayoutHeader string

// GAMTSource is the CUDA C source the PTX below was built from.
//
//go:embed gamt.cu
var GAMTSource string

// GAMTsm90 is gamt.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed gamt_sm90.ptx
var GAMTsm90 string

// GAMTcompute80 is gamt.cu compiled with nvcc -ptx -arch=compute_80, which the
// driver JIT-compiles for any GPU of compute capability 8.0 or later.
//
//go:embed gamt_compute80.ptx
var GAMTcompute80 string

// FlowSource is the CUDA C source of the flow classification kernel.
//
//go:embed flow.cu
var FlowSource string

// Flowsm90 is flow.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed flow_sm90.ptx
var Flowsm90 string

// Flowcompute80 is flow.cu compiled with nvcc -ptx -arch=compute_80.
//
//go:embed flow_compute80.ptx
var Flowcompute80 string

// ResidentSource is the CUDA C source of the resident flow lookups (it
// includes flow.cu).
//
//go:embed resident.cu
var ResidentSource string

// Residentsm90 is resident.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed resident_sm90.ptx
var Residentsm90 string

// Residentcompute80 is resident.cu compiled with nvcc -ptx -arch=compute_80.
//
//go:embed resident_compute80.ptx
var Residentcompute80 string

// RabinSource is the CUDA C source of the Rabin markers kernels.
//
//go:embed rabin.cu
var RabinSource string

// Rabinsm90 is rabin.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed rabin_sm90.ptx
var Rabinsm90 string

// Rabincompute80 is rabin.cu compiled with nvcc -ptx -arch=compute_80.
//
//go:embed rabin_compute80.ptx
var Rabincompute80 string

// PubsubSource is the CUDA C source of the CCM matching kernels.
//
//go:embed pubsub.cu
var PubsubSource string

// Pubsubsm90 is pubsub.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed pubsub_sm90.ptx
var Pubsubsm90 string

// Pubsubcompute80 is pubsub.cu compiled with nvcc -ptx -arch=compute_80.
//
//go:embed pubsub_compute80.ptx
var Pubsubcompute80 string

// FilterSource is the CUDA C source of the gPF filter kernel.
//
//go:embed filter.cu
var FilterSource string

// Filtersm90 is filter.cu compiled with nvcc -ptx -arch=sm_90 (H100, H200).
//
//go:embed filter_sm90.ptx
var Filtersm90 string

// Filtercompute80 is filter.cu compiled with nvcc -ptx -arch=compute_80.
//
//go:embed filter_compute80.ptx
var Filtercompute80 string
