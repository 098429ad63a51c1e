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

func readAll(t *testing.T, b []byte) (*Reader, []Packet) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
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
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 0; i < 1000; i++ {
			p, err := r.Next()
			if err != nil {
				return
			}
			if len(p.Data) > MaxPacket {
				t.Fatalf("packet of %d bytes", len(p.Data))
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

// BenchmarkReadPcapNG reads a pcapng of 64-byte Ethernet frames from
// memory (the reader alone: gswitchctl filter reads this way).
func BenchmarkReadPcapNG(b *testing.B) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		b.Fatal(err)
	}
	fr := make([]byte, 64)
	const n = 100000
	for i := 0; i < n; i++ {
		fr[0] = byte(i)
		if err := w.WritePacket(Packet{Link: LinkEthernet, Timestamp: int64(i) * 1000, WireLen: 64, Data: fr}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := NewReader(bytes.NewReader(data))
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
}
