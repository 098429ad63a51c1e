package gpu

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// checkCopies runs planCopies on the payloads and carries its runs out on
// the CPU (a 2-D copy row by row, as the copy engine does): every byte a
// run reads lies in the region, staging rows start at multiples of 16 and
// do not overlap, the staging bytes stay within stageBytes of the packed
// length, and each payload's bytes are at its staging offset. It returns
// the runs.
func checkCopies(t *testing.T, mem []byte, srcs, lens []uint32) []copySeg {
	t.Helper()
	packed := 0
	for _, l := range lens {
		packed = (packed+31)&^31 + int(l)
	}
	stage := make([]uint32, len(lens))
	for i := range stage {
		stage[i] = 0xdeadbeef
	}
	segs, staged := planCopies(nil, stage, srcs, lens, len(mem))
	if int64(staged) > stageBytes(packed) {
		t.Fatalf("%d staging bytes for %d packed: more than stageBytes %d", staged, packed, stageBytes(packed))
	}
	buf := make([]byte, staged)
	written := make([]bool, staged)
	end := 0
	for i, s := range segs {
		if s.width%16 != 0 || s.dst%16 != 0 || s.src%16 != 0 || s.height < 1 || s.width == 0 {
			t.Fatalf("run %d %+v: want 16-byte widths, offsets and at least a row", i, s)
		}
		if s.height > 1 && (s.pitch < s.width || s.pitch > copyMaxPitch) {
			t.Fatalf("run %d %+v: pitch outside width..copyMaxPitch", i, s)
		}
		if int(s.dst) != end {
			t.Fatalf("run %d at staging %d, want %d (runs back to back)", i, s.dst, end)
		}
		end += int(s.width * s.height)
		for row := uint64(0); row < s.height; row++ {
			from := s.src + row*s.pitch
			if from+s.width > uint64(len(mem)) {
				t.Fatalf("run %d %+v: row %d reads past the region (%d bytes)", i, s, row, len(mem))
			}
			to := s.dst + row*s.width
			for j := uint64(0); j < s.width; j++ {
				if written[to+j] {
					t.Fatalf("run %d: staging byte %d written twice", i, to+j)
				}
				written[to+j] = true
			}
			copy(buf[to:to+s.width], mem[from:from+s.width])
		}
	}
	if end != staged {
		t.Fatalf("runs fill %d staging bytes, planCopies says %d", end, staged)
	}
	for k, l := range lens {
		if l == 0 {
			continue
		}
		st := int(stage[k])
		if st+int(l) > staged || !bytes.Equal(buf[st:st+int(l)], mem[srcs[k]:srcs[k]+l]) {
			t.Fatalf("payload %d (%d bytes at %d): staging offset %d does not hold it", k, l, srcs[k], st)
		}
	}
	return segs
}

// TestPlanCopies: runs of frames become one 2-D copy each; mixed lengths,
// empty payloads, payloads at the region's ends and at random offsets
// stay exact, and the bytes copied past the payloads stay bounded.
func TestPlanCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	mem := make([]byte, 2048*1000)
	for i := range mem {
		mem[i] = byte(rng.UintN(256))
	}
	frames := func(n, off int, lenOf func(k int) int) (srcs, lens []uint32) {
		for k := 0; k < n; k++ {
			srcs, lens = append(srcs, uint32(k*2048+off)), append(lens, uint32(lenOf(k)))
		}
		return srcs, lens
	}
	// A receive ring of full-size payloads: one run.
	srcs, lens := frames(1000, 66, func(int) int { return 1460 })
	if segs := checkCopies(t, mem, srcs, lens); len(segs) != 1 || segs[0].width != 1472 || segs[0].pitch != 2048 || segs[0].height != 1000 || segs[0].src != 64 {
		t.Fatalf("1,000 frames of 1,460 bytes at 66: runs %+v, want one of 1,000 rows of 1,472 bytes, pitch 2,048, from 64", segs)
	}
	// The last frame's payload ends at the region's last byte.
	srcs, lens = frames(1000, 2048-1460, func(int) int { return 1460 })
	checkCopies(t, mem, srcs, lens)
	// Mixed lengths: short payloads (acknowledgements, 0) cut the runs.
	srcs, lens = frames(1000, 66, func(k int) int {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return rng.IntN(100)
		}
		return 1200 + rng.IntN(261)
	})
	segs := checkCopies(t, mem, srcs, lens)
	t.Logf("1,000 frames of mixed lengths: %d runs", len(segs))
	// Random offsets (overlapping payloads, the region's first and last
	// byte), and frames after them.
	srcs, lens = nil, nil
	for k := 0; k < 500; k++ {
		l := rng.IntN(3000)
		s := rng.IntN(len(mem) - l + 1)
		switch k {
		case 0:
			s = len(mem) - l
		case 1:
			s = 0
		}
		srcs, lens = append(srcs, uint32(s)), append(lens, uint32(l))
	}
	fs, fl := frames(300, 17, func(int) int { return 2000 })
	checkCopies(t, mem, append(srcs, fs...), append(lens, fl...))
	// Nothing to copy.
	if segs, staged := planCopies(nil, make([]uint32, 3), []uint32{0, 5, 9}, []uint32{0, 0, 0}, len(mem)); len(segs) != 0 || staged != 0 {
		t.Fatalf("empty payloads: runs %+v, %d bytes", segs, staged)
	}
}
