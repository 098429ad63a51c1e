// Command genlayout writes kernels/layout.h: the layout constants that the
// CUDA kernels (kernels/flow.cu, kernels/gamt.cu) share with the Go code
// that builds the images they read (package flow's device image, package
// lpm's GAMT entries) and with package gpu's device descriptors. The Go
// constants are the one source; the header is generated from them, so a
// layout change in Go reaches the kernels when the PTX is rebuilt (make
// kernels), and TestLayoutHeaderFresh fails while the checked-in header is
// stale.
//
// Usage (go generate ./kernels runs it from kernels/):
//
//	go run ./internal/genlayout [-o layout.h]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// def is one #define: its C name, its value, the Go expression it comes
// from and what it means.
type def struct {
	name string
	val  uint64
	src  string
	doc  string
	hexU bool // write as an unsigned hexadecimal literal (0x...u)
}

// group is a commented block of defines.
type group struct {
	doc  string
	defs []def
}

func d(name string, val uint64, src, doc string) def {
	return def{name: name, val: val, src: src, doc: doc}
}

// groups returns the header's contents, in order.
func groups() []group {
	return []group{
		{"Flow image: sizes (package flow).", []def{
			d("FLOW_KEYWORDS", flow.KeyWords, "flow.KeyWords", "words of a packet key; the widest projection P"),
			d("FLOW_HASHFUNCS", flow.HashFuncs, "flow.HashFuncs", "hash functions per family: the cuckoo ways, then two Bloom functions"),
			d("FLOW_HASHCOEFS", flow.HashCoefs, "flow.HashCoefs", "64-bit coefficients per function in the seeds region"),
			d("FLOW_WAYS", flow.CuckooWays, "flow.CuckooWays", "cuckoo subtables per class"),
			{name: "EMPTY_ID", val: uint64(flow.EmptyID), src: "flow.EmptyID", doc: "an empty entry or slot; also no match", hexU: true},
			d("FLOW_MAX_LOGB", flow.MaxLogB, "flow.MaxLogB", "largest log2 buckets of a class's subtable"),
			d("FLOW_MAX_LOGBITS", flow.MaxLogBits, "flow.MaxLogBits", "largest log2 bits of a class's Bloom filter"),
		}},
		{"Flow image: regions (package flow).", []def{
			d("R_HEADER", uint64(flow.RegionHeader), "flow.RegionHeader", ""),
			d("R_SEEDS", uint64(flow.RegionSeeds), "flow.RegionSeeds", ""),
			d("R_CLASSES", uint64(flow.RegionClasses), "flow.RegionClasses", ""),
			d("R_ORDER", uint64(flow.RegionOrder), "flow.RegionOrder", ""),
			d("R_ENTRIES", uint64(flow.RegionEntries), "flow.RegionEntries", ""),
			d("R_BLOOM", uint64(flow.RegionBloom), "flow.RegionBloom", ""),
		}},
		{"Flow image: header words (package flow).", []def{
			d("HDR_COUNT", flow.HdrCount, "flow.HdrCount", "linear: slot high-water mark; else classes in the order region"),
		}},
		{"Flow image: algorithms (flow.Algo).", []def{
			d("ALGO_LINEAR", uint64(flow.Linear), "flow.Linear", ""),
			d("ALGO_TUPLE", uint64(flow.Tuple), "flow.Tuple", ""),
			d("ALGO_BLOOM", uint64(flow.Bloom), "flow.Bloom", ""),
			d("ALGO_MERGE", uint64(flow.Merge), "flow.Merge", ""),
		}},
		{"Flow image: class descriptor words after the P mask words (package flow).", []def{
			d("C_FAMILY", flow.DescFamily, "flow.DescFamily", "hash family"),
			d("C_TABLE", flow.DescTable, "flow.DescTable", "word offset of the cuckoo table in the entries region"),
			d("C_LOGB", flow.DescLogB, "flow.DescLogB", "log2 buckets per subtable"),
			d("C_MAXPRIO", flow.DescMaxPrio, "flow.DescMaxPrio", "highest priority among the class's entries"),
			d("C_COUNT", flow.DescCount, "flow.DescCount", "entries in the class"),
			d("C_BLOOM", flow.DescBloom, "flow.DescBloom", "word offset of the Bloom filter in the bloom region"),
			d("C_LOGBITS", flow.DescLogBits, "flow.DescLogBits", "log2 Bloom filter bits"),
			d("C_SEL", flow.DescSel, "flow.DescSel", "prefilter selector"),
			d("C_PRE", flow.DescPre, "flow.DescPre", "prefilter bitmap, C_PREWORDS words"),
			d("C_PREWORDS", flow.PreWords, "flow.PreWords", ""),
			d("C_FIXED", flow.DescFixed, "flow.DescFixed", "descriptor words after the mask"),
		}},
		{"Flow image: cuckoo entry words after the P key words (package flow).", []def{
			d("E_ID", flow.EntID, "flow.EntID", "rule id"),
			d("E_PRIO", flow.EntPrio, "flow.EntPrio", "rule priority"),
			d("E_MASK", flow.EntMask, "flow.EntMask", "merge: first of the P mask words"),
			d("E_FIXED", flow.EntFixed, "flow.EntFixed", "entry words: P+E_FIXED, merge 2P+E_FIXED"),
		}},
		{"Flow image: linear slot words (package flow).", []def{
			d("S_PRIO", flow.SlotPrio, "flow.SlotPrio", "rule priority"),
			d("S_ID", flow.SlotID, "flow.SlotID", "rule id"),
			d("S_VALUE", flow.SlotValue, "flow.SlotValue", "first of the P value words; the P mask words follow"),
			d("S_FIXED", flow.SlotFixed, "flow.SlotFixed", "slot words: 2P+S_FIXED"),
		}},
		{"Flow kernel descriptor words (package gpu).", []def{
			d("FLOW_DESC", gpu.FlowDescWords, "gpu.FlowDescWords", "words of the descriptor"),
			d("D_BASE", gpu.FlowDescBase, "gpu.FlowDescBase", "6 words: each region's base word in the image buffer"),
			d("D_LEN", gpu.FlowDescLen, "gpu.FlowDescLen", "6 words: each region's length in words"),
			d("D_ALGO", gpu.FlowDescAlgo, "gpu.FlowDescAlgo", "ALGO_*"),
			d("D_P", gpu.FlowDescP, "gpu.FlowDescP", "projected key words"),
			d("D_K", gpu.FlowDescK, "gpu.FlowDescK", "hash families"),
			d("D_NSLOT", gpu.FlowDescNSlot, "gpu.FlowDescNSlot", "class slots, or linear rule slots"),
			d("D_STAGE", gpu.FlowDescStage, "gpu.FlowDescStage", "STAGE_* bits: what a block stages into shared memory"),
		}},
		{"Flow kernel staging bits (package gpu).", []def{
			d("STAGE_SEEDS", gpu.StageSeeds, "gpu.StageSeeds", "the coefficients P words use, compacted"),
			d("STAGE_CLASSES", gpu.StageClasses, "gpu.StageClasses", ""),
			d("STAGE_ORDER", gpu.StageOrder, "gpu.StageOrder", ""),
			d("STAGE_BLOOM", gpu.StageBloom, "gpu.StageBloom", ""),
		}},
		{"GAMT entries (package lpm): inf<<GAMT_JUMP_BITS | jump; jump 0 is a leaf.", []def{
			d("GAMT_JUMP_BITS", lpm.JumpBits, "lpm.JumpBits", ""),
			d("GAMT_JUMP_MASK", lpm.JumpMask, "lpm.JumpMask", ""),
		}},
		{"GAMT kernel level descriptors (package gpu).", []def{
			d("GAMT_MAX_LEVELS", gpu.MaxDeviceLevels, "gpu.MaxDeviceLevels", "levels a kernel handles (a power of two)"),
			d("GAMT_LEVEL_DESC", gpu.LevelDescWords, "gpu.LevelDescWords", "words per level"),
			d("GAMT_LD_BASE", gpu.LevelDescBase, "gpu.LevelDescBase", "the level's base word in the image buffer"),
			d("GAMT_LD_STRIDE", gpu.LevelDescStride, "gpu.LevelDescStride", "its stride"),
			d("GAMT_LD_OFF", gpu.LevelDescOff, "gpu.LevelDescOff", "its first address bit"),
		}},
	}
}

// Header is the prologue of layout.h.
const header = `// Code generated by go run ./internal/genlayout; DO NOT EDIT.

// Layout constants shared by the CUDA kernels and the Go code that lays out
// what they read: package flow's device image, package lpm's GAMT entries
// and package gpu's device descriptors. The Go constants named beside each
// are the source; after a change there, run go generate ./kernels, then
// make kernels (nvcc) and commit the PTX.
#ifndef GSWITCH_LAYOUT_H
#define GSWITCH_LAYOUT_H
`

// Generate returns the contents of layout.h.
func Generate() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	for _, g := range groups() {
		fmt.Fprintf(&b, "\n// %s\n", g.doc)
		for _, x := range g.defs {
			v := fmt.Sprint(x.val)
			if x.hexU {
				v = fmt.Sprintf("0x%Xu", x.val)
			}
			c := x.src
			if x.doc != "" {
				c += ": " + x.doc
			}
			fmt.Fprintf(&b, "#define %s %s // %s\n", x.name, v, c)
		}
	}
	b.WriteString("\n#endif // GSWITCH_LAYOUT_H\n")
	return b.Bytes()
}

func main() {
	out := flag.String("o", "layout.h", "the header to write")
	flag.Parse()
	if err := os.WriteFile(*out, Generate(), 0o644); err != nil {
		log.Fatal(err)
	}
}
