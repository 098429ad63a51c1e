package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

func suiteFiles(t *testing.T) []string {
	files, _ := filepath.Glob(filepath.Join("testdata", "pcapng-suite", "*", "*.pcapng"))
	if len(files) < 40 {
		t.Fatalf("only %d suite files", len(files))
	}
	return files
}

func readFile(t *testing.T, path string) ([]Packet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := readFrom(NewReader(bytes.NewReader(b)))
	mem, errM := readFrom(NewReaderBytes(b))
	if (err == nil) != (errM == nil) {
		t.Fatalf("%s: stream %v, in place %v", path, err, errM)
	}
	identical(t, mem, out)
	return out, err
}

// readFrom reads every packet (copied) and the first error.
func readFrom(r *Reader, err error) ([]Packet, error) {
	if err != nil {
		return nil, err
	}
	var out []Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		p.Data = append([]byte(nil), p.Data...)
		out = append(out, p)
	}
}

// TestPcapNGSuiteTcpdump compares this reader with libpcap's (through
// tcpdump -w, nanosecond output) on every suite file libpcap reads: same
// packets, bytes, lengths and timestamps. libpcap refuses files whose
// interfaces differ in link type or snapshot length; those are covered by
// TestPcapNGSuiteGopacket.
func TestPcapNGSuiteTcpdump(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal("tcpdump not found: install the Debian package tcpdump")
	}
	dir := t.TempDir()
	compared := 0
	for _, f := range suiteFiles(t) {
		out := filepath.Join(dir, "out.pcap")
		os.Remove(out)
		if err := exec.Command("tcpdump", "--nano", "-r", f, "-w", out).Run(); err != nil {
			continue // libpcap refuses it
		}
		want, err := readFile(t, out)
		if err != nil {
			t.Fatalf("%s: reading tcpdump's copy: %v", f, err)
		}
		got, err := readFile(t, f)
		if err != nil {
			t.Errorf("%s: libpcap reads it, we fail: %v", f, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d packets, libpcap %d", f, len(got), len(want))
			continue
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Data, w.Data) || g.WireLen != w.WireLen || g.Timestamp != w.Timestamp || g.Link != w.Link {
				t.Errorf("%s packet %d: ours %d bytes wire %d ts %d link %v; libpcap %d bytes wire %d ts %d link %v",
					f, i, len(g.Data), g.WireLen, g.Timestamp, g.Link, len(w.Data), w.WireLen, w.Timestamp, w.Link)
			}
			compared++
		}
	}
	if compared < 20 {
		t.Fatalf("only %d packets compared", compared)
	}
	t.Logf("%d packets compared with libpcap's reader", compared)
}

// TestPcapNGSuiteGopacket compares with gopacket's pcapgo.NgReader, which
// reads files of several link types (returning only the first interface's
// link type) but only a file's first section.
func TestPcapNGSuiteGopacket(t *testing.T) {
	compared := 0
	for _, f := range suiteFiles(t) {
		b, _ := os.ReadFile(f)
		theirs, terr := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.NgReaderOptions{})
		got, oerr := readFile(t, f)
		if terr != nil {
			continue
		}
		if oerr != nil && !errors.Is(oerr, ErrFormat) {
			t.Errorf("%s: %v", f, oerr)
		}
		j := 0
		for i := 0; ; i++ {
			data, ci, err := theirs.ReadPacketData()
			if err != nil {
				break
			}
			for j < len(got) && uint32(got[j].Link) != uint32(theirs.LinkType()) {
				j++
			}
			if j >= len(got) {
				t.Errorf("%s: gopacket has packet %d, we have no more", f, i)
				break
			}
			g := got[j]
			j++
			ts := ci.Timestamp.UnixNano()
			if ci.Timestamp.IsZero() {
				ts = 0
			}
			if !bytes.Equal(data, g.Data) || ci.Length != int(g.WireLen) || ts != g.Timestamp {
				t.Errorf("%s packet %d: gopacket %d bytes wire %d ts %d; ours %d bytes wire %d ts %d",
					f, i, len(data), ci.Length, ts, len(g.Data), g.WireLen, g.Timestamp)
			}
			compared++
		}
	}
	t.Logf("%d packets compared with gopacket's reader", compared)
}

// TestSectionsOfBothByteOrders reads a file made of a little-endian
// section followed by a big-endian one.
func TestSectionsOfBothByteOrders(t *testing.T) {
	var b bytes.Buffer
	w, _ := NewWriter(&b)
	for _, p := range samplePackets()[:2] {
		w.WritePacket(p)
	}
	w.Flush()
	be, err := os.ReadFile(filepath.Join("testdata", "pcapng-suite", "be", "test001.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(be[8:]) != magicByteOrd {
		t.Fatal("test001 in be/ is not big-endian")
	}
	b.Write(be)
	r, got := readAll(t, b.Bytes())
	beOnly, _ := readFile(t, filepath.Join("testdata", "pcapng-suite", "be", "test001.pcapng"))
	if len(got) != 2+len(beOnly) || !r.BigEndian() || got[0].BigEndian || !got[2].BigEndian {
		t.Fatalf("got %d packets (want %d), reader big-endian %v", len(got), 2+len(beOnly), r.BigEndian())
	}
}

// TestTruncatedFile: a file cut inside a record header gives its whole
// packets and then a format error, as libpcap ("truncated dump file").
func TestTruncatedFile(t *testing.T) {
	got, err := readFile(t, filepath.Join("testdata", "truncated_dns_2.pcap"))
	if len(got) != 1 || !errors.Is(err, ErrFormat) {
		t.Fatalf("got %d packets, error %v; want 1 packet and a format error", len(got), err)
	}
	if got[0].WireLen != 282 || len(got[0].Data) != 200 {
		t.Fatalf("packet: %d of %d bytes", len(got[0].Data), got[0].WireLen)
	}
}
