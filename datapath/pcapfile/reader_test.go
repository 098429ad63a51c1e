package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// legacyPcap builds a classic pcap file in the given byte order.
func legacyPcap(order binary.ByteOrder, nano bool, link LinkType, pkts []Packet) []byte {
	var b bytes.Buffer
	h := make([]byte, 24)
	magic := uint32(magicMicro)
	if nano {
		magic = magicNano
	}
	order.PutUint32(h, magic)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], 65535)
	order.PutUint32(h[20:], uint32(link))
	b.Write(h)
	for _, p := range pkts {
		r := make([]byte, 16)
		order.PutUint32(r, uint32(p.Timestamp/1e9))
		frac := p.Timestamp % 1e9
		if !nano {
			frac /= 1e3
		}
		order.PutUint32(r[4:], uint32(frac))
		order.PutUint32(r[8:], uint32(len(p.Data)))
		order.PutUint32(r[12:], p.WireLen)
		b.Write(r)
		b.Write(p.Data)
	}
	return b.Bytes()
}

func samplePackets() []Packet {
	var ps []Packet
	for i := 0; i < 5; i++ {
		d := make([]byte, 20+i*7)
		for j := range d {
			d[j] = byte(i*31 + j)
		}
		ps = append(ps, Packet{Link: LinkEthernet, Timestamp: int64(1700000000+i)*1e9 + int64(i)*1000, WireLen: uint32(len(d) + i), Data: d})
	}
	return ps
}

// readAll reads b as a stream and checks that the in-place reader and
// Open's mapping of the same bytes give the same packets.
func readAll(t *testing.T, b []byte) (*Reader, []Packet) {
	t.Helper()
	r, out := readAllFrom(t, b, func() (*Reader, error) { return NewReader(bytes.NewReader(b)) })
	_, mem := readAllFrom(t, b, func() (*Reader, error) { return NewReaderBytes(b) })
	identical(t, mem, out)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var opened *Reader
	_, mapped := readAllFrom(t, b, func() (*Reader, error) { var err error; opened, err = Open(path); return opened, err })
	if !opened.Persistent() {
		t.Errorf("Open of a regular file: not mapped")
	}
	identical(t, mapped, out)
	if err := opened.Close(); err != nil {
		t.Fatal(err)
	}
	return r, out
}

func readAllFrom(t *testing.T, b []byte, open func() (*Reader, error)) (*Reader, []Packet) {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	var out []Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return r, out
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Data = append([]byte(nil), p.Data...)
		out = append(out, p)
	}
}

// identical fails unless got and want are the same packets, field by field.
func identical(t *testing.T, got, want []Packet) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d packets, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Link != w.Link || g.Interface != w.Interface || g.Timestamp != w.Timestamp || g.WireLen != w.WireLen ||
			!bytes.Equal(g.Data, w.Data) || g.BigEndian != w.BigEndian {
			t.Fatalf("packet %d: got %+v, want %+v", i, g, w)
		}
	}
}

func samePackets(t *testing.T, got, want []Packet, bigEndian bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d packets, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		w.BigEndian = bigEndian
		if g.Link != w.Link || g.Timestamp != w.Timestamp || g.WireLen != w.WireLen || !bytes.Equal(g.Data, w.Data) || g.BigEndian != w.BigEndian {
			t.Fatalf("packet %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestPcapByteOrdersAndResolutions(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, nano := range []bool{false, true} {
			want := samplePackets()
			r, got := readAll(t, legacyPcap(order, nano, LinkEthernet, want))
			if r.Format() != FormatPcap || r.LinkType() != LinkEthernet {
				t.Fatalf("format %v link %v", r.Format(), r.LinkType())
			}
			samePackets(t, got, want, order == binary.BigEndian)
		}
	}
}

func TestPcapNGRoundTripSeveralLinkTypes(t *testing.T) {
	want := samplePackets()
	want[1].Link = LinkRaw
	want[3].Link = LinkLinuxSLL
	var b bytes.Buffer
	w, err := NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		if err := w.WritePacket(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, got := readAll(t, b.Bytes())
	if r.Format() != FormatPcapNG {
		t.Fatal(r.Format())
	}
	samePackets(t, got, want, false)
	if got[3].Interface != 2 {
		t.Fatalf("interface of the SLL packet = %d, want 2", got[3].Interface)
	}
}

// TestPcapNGFromGopacket reads a file written by another implementation
// (gopacket's pcapgo, microsecond resolution, two interfaces).
func TestPcapNGFromGopacket(t *testing.T) {
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "a", LinkType: layers.LinkTypeEthernet, SnapLength: 65535, TimestampResolution: 6}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.AddInterface(pcapgo.NgInterface{Name: "b", LinkType: layers.LinkTypeRaw, SnapLength: 65535, TimestampResolution: 6})
	if err != nil {
		t.Fatal(err)
	}
	want := samplePackets()
	for i, p := range want {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.Timestamp), CaptureLength: len(p.Data), Length: int(p.WireLen)}
		if i%2 == 1 {
			ci.InterfaceIndex = id
			want[i].Link = LinkRaw
		}
		if err := w.WritePacket(ci, p.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	_, got := readAll(t, b.Bytes())
	samePackets(t, got, want, false)
}

func TestMalformed(t *testing.T) {
	good := legacyPcap(binary.LittleEndian, false, LinkEthernet, samplePackets())
	cases := map[string][]byte{
		"empty":         nil,
		"bad magic":     []byte("GIF89a........................"),
		"short header":  good[:10],
		"short record":  good[:24+16+5],
		"huge record":   append(append([]byte{}, good[:24]...), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0),
		"short pcapng":  {0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0},
		"pcapng no idb": pcapngNoIDB(),
	}
	for name, b := range cases {
		r, err := NewReader(bytes.NewReader(b))
		for err == nil {
			_, err = r.Next()
		}
		if err == io.EOF || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want a format error", name, err)
		}
	}
}

func pcapngNoIDB() []byte {
	var b bytes.Buffer
	w, _ := NewWriter(&b)
	w.Flush()
	epb := make([]byte, 32)
	binary.LittleEndian.PutUint32(epb, blockEPB)
	binary.LittleEndian.PutUint32(epb[4:], 32)
	binary.LittleEndian.PutUint32(epb[28:], 32)
	b.Write(epb)
	return b.Bytes()
}

func FuzzReader(f *testing.F) {
	f.Add(legacyPcap(binary.BigEndian, true, LinkEthernet, samplePackets()[:2]))
	var b bytes.Buffer
	w, _ := NewWriter(&b)
	for _, p := range samplePackets()[:2] {
		w.WritePacket(p)
	}
	w.Flush()
	f.Add(b.Bytes())
	suite, _ := filepath.Glob(filepath.Join("testdata", "pcapng-suite", "*", "*.pcapng"))
	for _, name := range suite {
		if s, err := os.ReadFile(name); err == nil {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The stream and the in-place reader of the same bytes agree:
		// the same packets, and an error at the same packet.
		rs, errS := NewReader(bytes.NewReader(data))
		rm, errM := NewReaderBytes(data)
		if (errS == nil) != (errM == nil) {
			t.Fatalf("header: stream %v, memory %v", errS, errM)
		}
		if errS != nil {
			return
		}
		for i := 0; i < 1000; i++ {
			ps, errS := rs.Next()
			pm, errM := rm.Next()
			if (errS == nil) != (errM == nil) || (errS == io.EOF) != (errM == io.EOF) {
				t.Fatalf("packet %d: stream %v, memory %v", i, errS, errM)
			}
			if errS != nil {
				if errS != io.EOF && !errors.Is(errS, ErrFormat) {
					t.Fatalf("packet %d: %v is not a format error", i, errS)
				}
				return
			}
			if len(ps.Data) > MaxPacket {
				t.Fatalf("packet of %d bytes", len(ps.Data))
			}
			if !bytes.Equal(ps.Data, pm.Data) || ps.WireLen != pm.WireLen || ps.Timestamp != pm.Timestamp ||
				ps.Link != pm.Link || ps.Interface != pm.Interface || ps.BigEndian != pm.BigEndian {
				t.Fatalf("packet %d: stream %+v, memory %+v", i, ps, pm)
			}
		}
	})
}

// TestWriteSeedCorpus keeps testdata/fuzz/FuzzReader in step with the seeds
// above when run with GSWITCH_WRITE_CORPUS=1.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GSWITCH_WRITE_CORPUS") == "" {
		t.Skip("set GSWITCH_WRITE_CORPUS=1 to rewrite the committed seed corpus")
	}
	var b bytes.Buffer
	w, _ := NewWriter(&b)
	for _, p := range samplePackets()[:3] {
		w.WritePacket(p)
	}
	w.Flush()
	seeds := map[string][]byte{
		"pcap-le-micro": legacyPcap(binary.LittleEndian, false, LinkEthernet, samplePackets()[:2]),
		"pcap-be-nano":  legacyPcap(binary.BigEndian, true, LinkLinuxSLL, samplePackets()[:2]),
		"pcapng":        b.Bytes(),
		"pcapng-noidb":  pcapngNoIDB(),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	os.MkdirAll(dir, 0o755)
	for name, s := range seeds {
		content := "go test fuzz v1\n[]byte(" + quoteBytes(s) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRead reads a pcapng and a pcap of 64-byte Ethernet frames
// from memory, as a stream (NewReader) and in place (NewReaderBytes, as
// Open reads a mapped file).
func BenchmarkRead(b *testing.B) {
	const n = 100000
	fr := make([]byte, 64)
	var ng bytes.Buffer
	w, err := NewWriter(&ng)
	if err != nil {
		b.Fatal(err)
	}
	var pkts []Packet
	for i := 0; i < n; i++ {
		fr[0] = byte(i)
		p := Packet{Link: LinkEthernet, Timestamp: int64(i) * 1000, WireLen: 64, Data: fr}
		if err := w.WritePacket(p); err != nil {
			b.Fatal(err)
		}
		pkts = append(pkts, p)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	files := map[string][]byte{"pcapng": ng.Bytes(), "pcap": legacyPcap(binary.LittleEndian, false, LinkEthernet, pkts)}
	for _, format := range []string{"pcapng", "pcap"} {
		data := files[format]
		for _, src := range []string{"stream", "inplace"} {
			b.Run(format+"/"+src, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					var r *Reader
					var err error
					if src == "stream" {
						r, err = NewReader(bytes.NewReader(data))
					} else {
						r, err = NewReaderBytes(data)
					}
					if err != nil {
						b.Fatal(err)
					}
					k := 0
					for ; ; k++ {
						if _, err := r.Next(); err != nil {
							break
						}
					}
					if k != n {
						b.Fatalf("%d packets", k)
					}
				}
				b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mpps")
			})
		}
	}
}
