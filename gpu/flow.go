package gpu

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
)

// Words of the flow kernel's descriptor (FlowDescWords words, uploaded next
// to the image; see kernels/flow.cu, which reads them through
// kernels/layout.h, generated from these constants).
const (
	FlowDescBase  = 0  // 6 words: the word offset of each region in the flat buffer
	FlowDescLen   = 6  // 6 words: the length of each region in words
	FlowDescAlgo  = 12 // flow.Algo
	FlowDescP     = 13 // projected key words
	FlowDescK     = 14 // hash families (tuple, bloom)
	FlowDescNSlot = 15 // class slots (tuple, bloom) or rule slots (linear)
	FlowDescStage = 16 // what the kernel stages into shared memory (Stage* bits)

	// FlowDescWords is the size of a flow table's device descriptor.
	FlowDescWords = 20
	flowRegions   = 6
)

// flowLayout describes a checked flow image: what flow.NewView caches (the
// algorithm, the projection width, the hash families, the slot count) and
// where each region sits when all are laid end to end in one word buffer.
type flowLayout struct {
	gen   uint64
	algo  flow.Algo
	p, k  int
	nslot int
	regions
}

// newFlowLayout checks im as a flow table image (flow.NewView does the full
// check: header, projection, seeds, every class descriptor in the order) and
// returns its layout and a View of it.
func newFlowLayout(im *bubble.Image) (*flowLayout, *flow.View, error) {
	v, err := flow.NewView(im)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadUpdate, err)
	}
	if len(im.Words) != flowRegions {
		return nil, nil, fmt.Errorf("%w: flow image of %d regions", ErrBadUpdate, len(im.Words))
	}
	h := im.Words[flow.RegionHeader]
	l := &flowLayout{gen: im.Generation, algo: v.Algo(), p: len(v.Words())}
	if l.algo == flow.Linear {
		l.nslot = len(im.Words[flow.RegionEntries]) / flow.SlotWords(l.p)
	} else {
		l.k = int(h[flow.HdrFamily])
		l.nslot = len(im.Words[flow.RegionOrder])
	}
	if l.regions, err = layRegions(im); err != nil {
		return nil, nil, err
	}
	return l, v, nil
}

// The parts of a tuple or Bloom image flow_lookup can stage into shared
// memory (descriptor word FlowDescStage), laid there in this order.
const (
	StageSeeds   = 1 << iota // the coefficients P words use: K*5 functions of P+1 pairs
	StageClasses             // the class descriptors region
	StageOrder               // the order region
	StageBloom               // the Bloom filters region
)

// stagePlan chooses what flow_lookup stages into shared memory within
// budget bytes: each part, in the order seeds, classes, order, Bloom, that
// still fits. It returns the descriptor bits and the bytes they take.
func (l *flowLayout) stagePlan(budget int) (stage uint32, bytes int) {
	if l.algo == flow.Linear {
		return 0, 0
	}
	parts := []struct {
		bit   uint32
		words int
	}{
		{StageSeeds, l.k * flow.HashFuncs * 2 * (l.p + 1)},
		{StageClasses, int(l.regionLen[flow.RegionClasses])},
		{StageOrder, int(l.regionLen[flow.RegionOrder])},
		{StageBloom, int(l.regionLen[flow.RegionBloom])},
	}
	for _, p := range parts {
		if bytes+4*p.words <= budget {
			stage |= p.bit
			bytes += 4 * p.words
		}
	}
	return stage, bytes
}

// desc returns the device descriptor of the layout, staging what stage
// says (stagePlan).
func (l *flowLayout) desc(stage uint32) []uint32 {
	d := make([]uint32, FlowDescWords)
	copy(d[FlowDescBase:], l.regionBase)
	copy(d[FlowDescLen:], l.regionLen)
	d[FlowDescAlgo] = uint32(l.algo)
	d[FlowDescP] = uint32(l.p)
	d[FlowDescK] = uint32(l.k)
	d[FlowDescNSlot] = uint32(l.nslot)
	d[FlowDescStage] = stage
	return d
}

// checkBubbles checks an update's bubbles before any is written: each inside
// its region, and none in what a View (and the device descriptor) fixes for
// a generation: the seeds region and the header except its count word. The
// lookups, on the CPU and on the device, re-check every offset they follow
// in the descriptors, so no other word can make them read outside the image.
func (l *flowLayout) checkBubbles(bs []bubble.Bubble) error {
	for _, b := range bs {
		r := uint32(b.Region)
		if r >= uint32(len(l.regionLen)) || b.Offset >= l.regionLen[r] {
			return fmt.Errorf("%w: bubble (%d, %d) outside the image", ErrBadUpdate, b.Region, b.Offset)
		}
		switch {
		case b.Region == flow.RegionSeeds:
			return fmt.Errorf("%w: bubble writes the seeds region (word %d): they change only with the generation", ErrBadUpdate, b.Offset)
		case b.Region == flow.RegionHeader && b.Offset != flow.HdrCount:
			return fmt.Errorf("%w: bubble writes header word %d: only the count changes within a generation", ErrBadUpdate, b.Offset)
		}
	}
	return nil
}

// checkFlowBatch checks a LookupFlow call's sizes against the layout.
func checkFlowBatch(l *flowLayout, soa []uint32, n int, out []flow.RuleID) error {
	if n < 0 {
		return fmt.Errorf("%w: %d packets", ErrShortKeys, n)
	}
	if len(out) < n {
		return ErrShortOut
	}
	if int64(len(soa)) < int64(n)*int64(l.p) {
		return fmt.Errorf("%w: %d words for %d packets of %d words", ErrShortKeys, len(soa), n, l.p)
	}
	return nil
}
