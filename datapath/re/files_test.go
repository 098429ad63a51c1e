package re

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFilesThroughLink sends the files named in GSWITCH_RE_FILES (a comma-
// separated list) one after the other as TCP transfers through an encoder
// and a decoder (acknowledgements after every 64 frames, log of
// GSWITCH_RE_LOG_BYTES bytes, default 64 MiB) and reports each file's wire
// bytes against its plain frames': the savings on large real data, such as
// two versions of a source tree as tar files (the linux-source
// pair), without namespaces. Every frame must come out as sent. With
// GSWITCH_RE_IMPAIR=LOSS,REORDER the frames go over the package tests'
// impaired link instead (filesImpaired). Skipped unless GSWITCH_RE_FILES is
// set.
func TestFilesThroughLink(t *testing.T) {
	list := os.Getenv("GSWITCH_RE_FILES")
	if list == "" {
		t.Skip("GSWITCH_RE_FILES not set: no files to send")
	}
	logBytes := 64 << 20
	if v, err := strconv.Atoi(os.Getenv("GSWITCH_RE_LOG_BYTES")); err == nil {
		logBytes = v
	}
	enc, dec := newPair(t, Config{LogBytes: logBytes})
	if v := os.Getenv("GSWITCH_RE_IMPAIR"); v != "" {
		filesImpaired(t, list, enc, dec, v)
		return
	}
	var sc Scratch
	var res [][]byte
	var arena []byte
	out := make([]byte, 2048)
	for fi, name := range strings.Split(list, ",") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c0 := enc.Counters()
		plain, wire := 0, 0
		batch := make([][]byte, 0, 64)
		flush := func() {
			res, arena = enc.EncodeBatch(&sc, batch, res[:0], arena[:0])
			for i, f := range res {
				wire += len(f)
				got, v, err := dec.Receive(f, out)
				if (v != Plain && v != Restored) || !bytes.Equal(got, batch[i]) {
					t.Fatalf("%s: frame differs after the link (%v, %v)", name, v, err)
				}
			}
			for _, c := range dec.ControlFrames(macA, macB) {
				enc.HandleControl(c)
			}
			batch = batch[:0]
		}
		for off := 0; off < len(data); off += 1448 {
			f := tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, uint16(1000+fi), uint32(off), data[off:min(off+1448, len(data))])
			plain += len(f)
			batch = append(batch, f)
			if len(batch) == cap(batch) {
				flush()
			}
		}
		flush()
		c1 := enc.Counters()
		t.Logf("%s: %d bytes, %d bytes of frames, %d on the wire (%.2f%%, %.1f%% saved), %.1fs; %d frames encoded, %d raw, %d references",
			name, len(data), plain, wire, 100*float64(wire)/float64(plain), 100*(1-float64(wire)/float64(plain)), time.Since(start).Seconds(),
			c1.Encoded-c0.Encoded, c1.Raw-c0.Raw, c1.Refs-c0.Refs)
	}
}

// filesImpaired is TestFilesThroughLink over the impaired link of the
// package's tests (link.run: frames lost and held back past the next one
// at the rates of GSWITCH_RE_IMPAIR, "LOSS,REORDER", both directions, the
// lost and dropped ones sent again as TCP would; acknowledgements every
// 16 frames; every delivered frame checked equal to the one sent).
func filesImpaired(t *testing.T, list string, enc *Encoder, dec *Decoder, impair string) {
	var loss, reorder float64
	if _, err := fmt.Sscanf(impair, "%g,%g", &loss, &reorder); err != nil {
		t.Fatalf("GSWITCH_RE_IMPAIR %q: want LOSS,REORDER: %v", impair, err)
	}
	l := &link{t: t, enc: enc, dec: dec, r: rand.New(rand.NewPCG(11, 12)), loss: loss, reorder: reorder, ackEvery: 16}
	for fi, name := range strings.Split(list, ",") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		start, w0, c0 := time.Now(), l.wire, enc.Counters()
		frames := make([][]byte, 0, (len(data)+1447)/1448)
		for off := 0; off < len(data); off += 1448 {
			frames = append(frames, tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, uint16(1000+fi), uint32(off), data[off:min(off+1448, len(data))]))
		}
		plain := wireBytes(frames)
		l.run(frames)
		c1 := enc.Counters()
		wire := l.wire - w0
		t.Logf("%s with %.1f%% loss and %.1f%% reordering: %d bytes of frames, %d on the wire with the sends again and control frames (%.2f%%, %.1f%% saved), %.1fs; %d sends, %d frames encoded, %d raw; decoder failures %d",
			name, 100*loss, 100*reorder, plain, wire, 100*float64(wire)/float64(plain), 100*(1-float64(wire)/float64(plain)), time.Since(start).Seconds(),
			c1.Frames-c0.Frames, c1.Encoded-c0.Encoded, c1.Raw-c0.Raw, dec.Counters().Failures)
	}
}
