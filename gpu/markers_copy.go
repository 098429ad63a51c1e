package gpu

// Batches by reference through the copy engine (RegionVia ViaCopy, the
// CUDA build's default): a receive ring holds one payload per frame at a
// fixed offset, so the payloads of consecutive frames are the rows of a
// 2-D copy (source pitch the frame, width the run's longest payload from
// its 16-byte word on), which the copy engine moves out of the registered
// ring into a staging buffer on the device at PCIe's full rate with no
// host copy; rabin_gather then lays the rows out as the packed layout on
// the device (at the device memory's speed, beside PCIe's) and the
// markers kernel runs. planCopies cuts a batch's payloads into such runs.

// RegionVia is how the payloads of a batch by reference reach the device.
type RegionVia int

const (
	// ViaCopy: the copy engine moves runs of frames out of the region
	// (2-D copies) into a staging buffer; rabin_gather compacts it on the
	// device.
	ViaCopy RegionVia = iota
	// ViaGather: rabin_gather's warps read the payloads out of the mapped
	// region over PCIe themselves.
	ViaGather
)

// String names v as bench re's --gpu-path does.
func (v RegionVia) String() string {
	if v == ViaGather {
		return "gather"
	}
	return "copy"
}

// copySeg is one 2-D copy of a batch by reference: height rows of width
// bytes from region offset src (a multiple of 16) on, pitch bytes apart,
// to staging offset dst, width bytes apart. Its layout is the C side's
// gs_copy_seg.
type copySeg struct {
	src, dst, pitch, width, height uint64
}

// copyMaxPitch bounds a run's source pitch: payloads further apart than
// this are copied in runs of their own.
const copyMaxPitch = 1 << 20

// copySlackDiv bounds the bytes a run copies that are no payload's: a run
// of several rows copies at most 1/copySlackDiv more than the packed
// bytes of its payloads (each rounded up to 32); a single row may copy up
// to 30 bytes more than its payload (its first byte's 16-byte word, its
// width rounded up to 16), at most twice its packed bytes.
const copySlackDiv = 8

// planCopies cuts the payloads at region offsets srcs[k], lens[k] bytes
// (inside a region of regionLen bytes, a multiple of 16) into runs of
// consecutive payloads a fixed pitch apart, appends one copySeg per run to
// segs, and sets stage[k] to payload k's offset in the staging buffer the
// runs are copied into (0 for an empty payload, which no run holds). It
// returns the runs and the staging bytes they fill: at most twice the
// packed bytes of the payloads (rabin.Pack's, each rounded up to 32).
// Every staging row starts at a multiple of 16, and every byte a run
// copies lies inside the region.
func planCopies(segs []copySeg, stage, srcs, lens []uint32, regionLen int) ([]copySeg, int) {
	segs = segs[:0]
	staged := 0
	var (
		open          bool
		first         int    // the run's first payload
		src0          uint64 // its region offset
		sh            uint64 // its offset in its 16-byte word: every row's
		pitch         uint64 // 0 while the run has one row
		rows          uint64
		width, packed uint64
	)
	closeRun := func(last int) {
		if !open {
			return
		}
		open = false
		dst := uint64(staged)
		for k := first; k <= last; k++ {
			if lens[k] == 0 {
				continue
			}
			row := uint64(0)
			if pitch > 0 {
				row = (uint64(srcs[k]) - src0) / pitch
			}
			stage[k] = uint32(dst + row*width + sh)
		}
		p := pitch
		if rows == 1 {
			p = width
		}
		segs = append(segs, copySeg{src: src0 - sh, dst: dst, pitch: p, width: width, height: rows})
		staged += int(width * rows)
	}
	last := -1 // the last payload with bytes
	for k := range lens {
		l := uint64(lens[k])
		if l == 0 {
			stage[k] = 0
			continue
		}
		s := uint64(srcs[k])
		pk := (l + 31) &^ 31
		if open {
			p := pitch
			if rows == 1 && s > src0 {
				p = s - src0
			}
			w := max(width, (sh+l+15)&^15)
			ok := p > 0 && p <= copyMaxPitch && s == src0+rows*p && p >= w &&
				src0-sh+rows*p+w <= uint64(regionLen) && w*(rows+1)*copySlackDiv <= (packed+pk)*(copySlackDiv+1)
			if ok {
				pitch, rows, width, packed = p, rows+1, w, packed+pk
				last = k
				continue
			}
			closeRun(last)
		}
		open, first, src0, sh, pitch, rows = true, k, s, s&15, 0, 1
		width, packed = (sh+l+15)&^15, pk
		last = k
	}
	closeRun(last)
	return segs, staged
}

// stageBytes is the staging buffer of a batch of bytes packed bytes:
// planCopies fills at most twice the packed bytes.
func stageBytes(bytes int) int64 { return 2 * ((int64(bytes) + 31) &^ 31) }
