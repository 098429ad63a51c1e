package gpfscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/filter/filtertest"
)

// scanWant is the sequential answer: filter.Evaluator.Eval on every packet
// of the capture as pcapfile.Reader reads it.
type scanWant struct {
	counts, bytes []uint64
	bits          [][]uint64
	pkts          []pcapfile.Packet
}

func scanReference(t *testing.T, data []byte, specs []filter.Spec) scanWant {
	rd, err := pcapfile.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	w := scanWant{counts: make([]uint64, len(specs)), bytes: make([]uint64, len(specs))}
	evs := map[linkKey]*filter.Evaluator{}
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		k := linkKey{p.Link, p.BigEndian}
		ev := evs[k]
		if ev == nil {
			prog, err := filter.Compile(specs, uint32(p.Link), p.BigEndian, nil)
			if err != nil {
				t.Fatal(err)
			}
			ev = filter.NewEvaluator(prog)
			evs[k] = ev
		}
		out := make([]uint64, (len(specs)+63)/64)
		ev.Eval(p.Data, p.WireLen, out)
		for f := range specs {
			if out[f/64]>>(f%64)&1 != 0 {
				w.counts[f]++
				w.bytes[f] += uint64(p.WireLen)
			}
		}
		p.Data = append([]byte(nil), p.Data...)
		w.pkts = append(w.pkts, p)
		w.bits = append(w.bits, out)
	}
	return w
}

// checkScan scans data with pf (compiled for link) and wants the
// sequential answer: counts, bytes and, kept, every packet and its
// matches in file order.
func checkScan(t *testing.T, name string, data []byte, specs []filter.Spec, link pcapfile.LinkType, pf gpu.PacketFilter, batch, workers int) {
	t.Helper()
	want := scanReference(t, data, specs)
	for _, keep := range []bool{false, true} {
		counts, byts := make([]uint64, len(specs)), make([]uint64, len(specs))
		k := 0
		err := ScanCapture(data, ScanConfig{Filter: pf, Link: link, Workers: workers, Batch: batch, Batches: 3, Keep: keep,
			Compile: func(l pcapfile.LinkType, big bool) (*filter.Program, error) {
				return filter.Compile(specs, uint32(l), big, nil)
			}}, func(p *ScanPiece) error {
			for f := range specs {
				counts[f] += p.Counts[f]
				byts[f] += p.Bytes[f]
			}
			if !keep {
				return nil
			}
			if len(p.Packets) != p.N {
				return fmt.Errorf("%d packets kept of %d", len(p.Packets), p.N)
			}
			for i, pk := range p.Packets {
				w := want.pkts[k]
				if !bytes.Equal(pk.Data, w.Data) || pk.Timestamp != w.Timestamp || pk.WireLen != w.WireLen || pk.Link != w.Link {
					return fmt.Errorf("packet %d differs from the reader's", k)
				}
				got := make([]uint64, len(want.bits[k]))
				if err := p.Matches(i, func(f int) error { got[f/64] |= 1 << (f % 64); return nil }); err != nil {
					return err
				}
				for j := range got {
					if got[j] != want.bits[k][j] {
						return fmt.Errorf("packet %d: matches %x, want %x", k, got, want.bits[k])
					}
				}
				k++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s (keep %v): %v", name, keep, err)
		}
		if keep && k != len(want.pkts) {
			t.Fatalf("%s: %d packets, want %d", name, k, len(want.pkts))
		}
		for f := range specs {
			if counts[f] != want.counts[f] || byts[f] != want.bytes[f] {
				t.Fatalf("%s (keep %v): filter %d (%s): %d packets %d bytes, want %d, %d", name, keep, f, specs[f].Expr,
					counts[f], byts[f], want.counts[f], want.bytes[f])
			}
		}
	}
}

// scanSpecs are the test's filters that compile for link.
func scanSpecs(link uint32, extra []filter.Spec) []filter.Spec {
	var specs []filter.Spec
	for _, sp := range append(filtertest.Specs(60), extra...) {
		if _, err := filter.CompileOne(sp.Expr, link, false, nil); err == nil {
			specs = append(specs, sp)
		}
	}
	return specs
}

// toPcapNG rewrites captures' packets into one pcapng (one interface per
// link type, in the order met).
func toPcapNG(t *testing.T, paths ...string) []byte {
	var buf bytes.Buffer
	w, err := pcapfile.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := pcapfile.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for {
			p, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WritePacket(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testScan runs checkScan over every test capture (pcap, and pcapng), a
// pcapng of two link types (the second's packets on the CPU), and a set
// that needs whole packets with rows shorter than some packets.
func testScan(t *testing.T, open func(p *filter.Program, maxRow int) gpu.PacketFilter) {
	var eth, other string
	for _, path := range filtertest.Captures(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := pcapfile.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		link := rd.LinkType()
		if link == pcapfile.LinkEthernet && eth == "" {
			eth = path
		} else if link != pcapfile.LinkEthernet && other == "" {
			other = path
		}
		specs := scanSpecs(uint32(link), nil)
		p, err := filter.Compile(specs, uint32(link), rd.BigEndian(), nil)
		if err != nil {
			t.Fatal(err)
		}
		pf := open(p, 0)
		checkScan(t, filepath.Base(path), data, specs, link, pf, 7, 3)
		checkScan(t, filepath.Base(path)+" as pcapng", toPcapNG(t, path), specs, link, pf, 5, 2)
		closeFilter(pf)
	}
	if eth == "" || other == "" {
		t.Fatalf("want an Ethernet capture and one of another link type")
	}
	// Two link types in one pcapng: the filters must compile for both.
	specs := scanSpecs(uint32(pcapfile.LinkEthernet), nil)
	var both []filter.Spec
	rd, _ := pcapfile.NewReader(bytes.NewReader(mustRead(t, other)))
	for _, s := range specs {
		if _, err := filter.CompileOne(s.Expr, uint32(rd.LinkType()), false, nil); err == nil {
			both = append(both, s)
		}
	}
	p, err := filter.Compile(both, uint32(pcapfile.LinkEthernet), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pf := open(p, 0)
	checkScan(t, "two link types", toPcapNG(t, eth, other, eth), both, pcapfile.LinkEthernet, pf, 16, 4)
	closeFilter(pf)
	// Whole packets in rows of 96 bytes: longer ones go to the CPU.
	specs = scanSpecs(uint32(pcapfile.LinkEthernet), []filter.Spec{{Name: "var", Expr: "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"}})
	p, err = filter.Compile(specs, uint32(pcapfile.LinkEthernet), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pf = open(p, 96)
	checkScan(t, "whole packets", mustRead(t, eth), specs, pcapfile.LinkEthernet, pf, 9, 3)
	// A malformed capture: the reader's error, with the chunk's offsets.
	data := mustRead(t, eth)
	bad := append([]byte(nil), data[:len(data)/2]...)
	err = ScanCapture(bad, ScanConfig{Filter: pf, Link: pcapfile.LinkEthernet, Program: p, Workers: 2, Batch: 4}, func(*ScanPiece) error { return nil })
	if !errors.Is(err, pcapfile.ErrFormat) {
		t.Fatalf("truncated capture: %v, want pcapfile.ErrFormat", err)
	}
	// The function's error stops the scan.
	stop := errors.New("stop")
	err = ScanCapture(data, ScanConfig{Filter: pf, Link: pcapfile.LinkEthernet, Program: p, Workers: 2, Batch: 4}, func(*ScanPiece) error { return stop })
	if err != stop {
		t.Fatalf("stopping: %v", err)
	}
	closeFilter(pf)
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScanCaptureCPU(t *testing.T) {
	testScan(t, func(p *filter.Program, maxRow int) gpu.PacketFilter { return gpu.NewCPUFilter(p, maxRow) })
}

// TestScanCaptureNoFilter: without a Filter, the workers evaluate every
// packet where it lies (the CPU backend over a file).
func TestScanCaptureNoFilter(t *testing.T) {
	testScan(t, func(p *filter.Program, maxRow int) gpu.PacketFilter { return nil })
}

func TestMapCapture(t *testing.T) {
	path := filtertest.Captures(t)[0]
	data, unmap, err := MapCapture(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, mustRead(t, path)) {
		t.Fatal("mapped bytes differ from the file's")
	}
	if err := unmap(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSplit: a classic pcap whose payloads hold plausible fake
// record headers, cut into open chunks small enough that pcapSync guesses
// some starts wrong: the chunks the consumer takes tile the file from its
// header on, each starting at a record, the wrong ones are walked again
// by the consumer, and the scan's answer is the reader's (on batches, and
// on the CPU alone); a bad record in the middle gives the reader's error.
func TestOpenSplit(t *testing.T) {
	eth := ""
	for _, path := range filtertest.Captures(t) {
		if link, _ := filtertest.ReadCapture(t, path); link == filter.LinkEthernet {
			eth = path
			break
		}
	}
	_, pkts := filtertest.ReadCapture(t, eth)
	data := make([]byte, 24)
	binary.LittleEndian.PutUint32(data, 0xa1b2c3d4)
	binary.LittleEndian.PutUint32(data[20:], 1)
	var bounds []int64
	for i := 0; i < 3000; i++ {
		p := append([]byte(nil), pkts[i%len(pkts)].Data...)
		if i%7 == 0 && len(p) >= 32 { // a fake record header inside the payload
			binary.LittleEndian.PutUint32(p[8:], 0)
			binary.LittleEndian.PutUint32(p[12:], 5)
			binary.LittleEndian.PutUint32(p[16:], 3)
			binary.LittleEndian.PutUint32(p[20:], 3)
		}
		if i%5 == 2 { // a run of 36 plausible empty records in the payload
			p = append(p[:min(len(p), 14):min(len(p), 14)], make([]byte, 36*16+6)...)
			for j := 0; j < 36; j++ {
				binary.LittleEndian.PutUint32(p[14+16*j:], uint32(i/100))
			}
		}
		var h [16]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(i/100))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(p)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(p)))
		bounds = append(bounds, int64(len(data)))
		data = append(append(data, h[:]...), p...)
	}
	isBound := map[int64]bool{}
	for _, b := range bounds {
		isBound[b] = true
	}
	isBound[int64(len(data))] = true
	// The chunks' starts: some guessed wrong.
	wrong := 0
	splitCapture(data, 37, func(c scanChunk) bool {
		if !c.open || c.end <= c.start {
			t.Fatalf("chunk %d-%d (open %v)", c.start, c.end, c.open)
		}
		if !isBound[c.start] {
			wrong++
		}
		return true
	})
	if wrong == 0 {
		t.Fatal("no chunk starts off a record: the test tests no recovery")
	}
	walks := 0
	testWalk = func(from, to int64) {
		walks++
		if !isBound[from] {
			t.Errorf("the consumer walks from %d, not a record", from)
		}
	}
	defer func() { testWalk = nil }()
	specs := scanSpecs(uint32(pcapfile.LinkEthernet), nil)
	p, err := filter.Compile(specs, uint32(pcapfile.LinkEthernet), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkScan(t, "open split", data, specs, pcapfile.LinkEthernet, gpu.NewCPUFilter(p, 0), 37, 5)
	checkScan(t, "open split on the CPU", data, specs, pcapfile.LinkEthernet, nil, 37, 5)
	if walks == 0 {
		t.Fatal("the consumer walked nothing again")
	}
	t.Logf("%d wrong starts of the split, %d walks of the consumer", wrong, walks)
	// A bad record in the middle: the reader's error.
	bad := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(bad[bounds[1500]+8:], 0xfffffff0)
	for _, pf := range []gpu.PacketFilter{gpu.NewCPUFilter(p, 0), nil} {
		err = ScanCapture(bad, ScanConfig{Filter: pf, Link: pcapfile.LinkEthernet, Program: p, Workers: 5, Batch: 37},
			func(*ScanPiece) error { return nil })
		if !errors.Is(err, pcapfile.ErrFormat) {
			t.Fatalf("bad record: %v", err)
		}
	}
}

// closeFilter closes a filter (none: a scan on the CPU alone).
func closeFilter(pf gpu.PacketFilter) {
	if pf != nil {
		pf.Close()
	}
}
