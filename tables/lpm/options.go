package lpm

import (
	"fmt"
	"math"
)

// Options tune a table's layout. The zero value chooses everything
// automatically; a negative HeadRoom, MinFree or GarbageThreshold means 0.
type Options struct {
	// Levels is the number of trie levels; 0 takes the family's default
	// (DefaultLevels4, DefaultLevels6), raised if MaxStride needs more.
	Levels int
	// Strides fixes the strides instead of choosing them with Algorithm 3
	// (also at rebuilds). They must each be 1..MaxStride and sum to the
	// address width; Levels, if set, must equal their count.
	Strides []int
	// MaxStride bounds every stride: 1..24, 0 means 24.
	MaxStride int
	// HeadRoom is the fraction of extra nodes each level is allocated with
	// (0 means 0.10).
	HeadRoom float64
	// MinFree is the least number of free nodes each level below the root is
	// allocated with (0 means 64).
	MinFree int
	// GarbageThreshold: a delete that leaves a level with more garbage nodes
	// than this fraction of its nodes, and at least MinFree of them (one at
	// least), rebuilds the table (0 means 0.25).
	GarbageThreshold float64
}

// Default layout parameters. The level counts come from the study recorded
// in doc.go.
const (
	DefaultLevels4          = 3
	DefaultLevels6          = 13
	DefaultMaxStride        = maxStride
	DefaultHeadRoom         = 0.10
	DefaultMinFree          = 64
	DefaultGarbageThreshold = 0.25
)

// normalize checks o for family fam and fills in the defaults.
func (o Options) normalize(fam Family) (Options, error) {
	w := fam.Width()
	if w == 0 {
		return o, fmt.Errorf("lpm: %w: %v", ErrFamily, fam)
	}
	if o.MaxStride == 0 {
		o.MaxStride = DefaultMaxStride
	}
	if o.MaxStride < 1 || o.MaxStride > maxStride {
		return o, fmt.Errorf("lpm: MaxStride %d not in 1..%d: %w", o.MaxStride, maxStride, ErrOptions)
	}
	var err error
	if o.HeadRoom, err = fraction("HeadRoom", o.HeadRoom, DefaultHeadRoom); err != nil {
		return o, err
	}
	if o.GarbageThreshold, err = fraction("GarbageThreshold", o.GarbageThreshold, DefaultGarbageThreshold); err != nil {
		return o, err
	}
	switch {
	case o.MinFree == 0:
		o.MinFree = DefaultMinFree
	case o.MinFree < 0:
		o.MinFree = 0
	}
	if len(o.Strides) > 0 {
		return o.checkStrides(w)
	}
	return o.chooseLevels(fam)
}

// fraction validates a non-negative finite option, defaulting 0 and clamping
// negatives to 0.
func fraction(name string, v, def float64) (float64, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v > 1e6:
		return 0, fmt.Errorf("lpm: %s %v: %w", name, v, ErrOptions)
	case v == 0:
		return def, nil
	case v < 0:
		return 0, nil
	}
	return v, nil
}

func (o Options) checkStrides(width int) (Options, error) {
	if o.Levels != 0 && o.Levels != len(o.Strides) {
		return o, fmt.Errorf("lpm: Levels %d but %d strides: %w", o.Levels, len(o.Strides), ErrOptions)
	}
	sum := 0
	for _, s := range o.Strides {
		if s < 1 || s > o.MaxStride {
			return o, fmt.Errorf("lpm: stride %d not in 1..%d: %w", s, o.MaxStride, ErrOptions)
		}
		sum += s
	}
	if sum != width || len(o.Strides) > maxLevels {
		return o, fmt.Errorf("lpm: strides %v do not sum to %d: %w", o.Strides, width, ErrOptions)
	}
	o.Strides = append([]int(nil), o.Strides...)
	o.Levels = len(o.Strides)
	return o, nil
}

func (o Options) chooseLevels(fam Family) (Options, error) {
	w := fam.Width()
	least := (w + o.MaxStride - 1) / o.MaxStride
	if o.Levels == 0 {
		o.Levels = DefaultLevels4
		if fam == IPv6 {
			o.Levels = DefaultLevels6
		}
		o.Levels = max(o.Levels, least)
	}
	if o.Levels < least || o.Levels > w {
		return o, fmt.Errorf("lpm: %d levels of at most %d bits cannot cover %d bits: %w", o.Levels, o.MaxStride, w, ErrOptions)
	}
	return o, nil
}

// capacity returns the nodes a level with nodes in use is allocated with.
func (o Options) capacity(nodes int) int {
	return nodes + max(int(math.Ceil(float64(nodes)*o.HeadRoom)), o.MinFree)
}

// compact reports whether a level with this many nodes and garbage nodes is
// due for a rebuild.
func (o Options) compact(nodes, garbage int) bool {
	return garbage > 0 && garbage >= o.MinFree && float64(garbage) > o.GarbageThreshold*float64(nodes)
}
