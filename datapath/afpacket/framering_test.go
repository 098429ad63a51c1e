package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// smallFrameRing is a RingFrames ring of 8 slots (two per page), so that
// a few rounds of frames wrap it many times.
func smallFrameRing() Config {
	return Config{Ring: RingFrames, BlockSize: os.Getpagesize(), NumBlocks: 4, FrameSize: os.Getpagesize() / 2}
}

// TestFrameRingWrap sends 300 frames in rounds of 5 through a ring of 8
// slots (it wraps 37 times): every frame arrives, in order, unmodified,
// with its receive time, and nothing is dropped or truncated.
func TestFrameRingWrap(t *testing.T) {
	tn := newTestNet(t)
	cfg := smallFrameRing()
	p := openPort(t, tn.host, cfg)
	if cfg.slots() != 8 {
		t.Fatalf("%d slots", cfg.slots())
	}
	ps := tn.peerSocket(t)
	const n, round = 300, 5
	var seqs []uint32
	var frames []Frame
	for i := 0; i < n; i += round {
		var sent [][]byte
		for j := range round {
			sent = append(sent, testFrame(tn.hostMAC, tn.peerMAC, uint32(i+j)))
		}
		ps.send(t, sent...)
		s, _, f := receiveTest(t, p, round, time.Second)
		seqs, frames = append(seqs, s...), append(frames, f...)
	}
	if len(seqs) != n {
		t.Fatalf("received %d of %d frames", len(seqs), n)
	}
	for i, s := range seqs {
		want := testFrame(tn.hostMAC, tn.peerMAC, uint32(i))
		if s != uint32(i) || string(frames[i].Data) != string(want) || frames[i].Len != len(want) || frames[i].Tagged {
			t.Fatalf("frame %d: seq %d, %x (len %d)", i, s, frames[i].Data, frames[i].Len)
		}
		if time.Since(frames[i].Time) > time.Minute || frames[i].Time.After(time.Now()) {
			t.Fatalf("frame %d time %v", i, frames[i].Time)
		}
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RxPackets < n || st.RxErrors != 0 || st.RxTruncated != 0 || st.RingDrops != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestFrameRingBatches: frames that arrive while the reader is away come
// back as one block of several frames (at most a ring block's slots).
func TestFrameRingBatches(t *testing.T) {
	tn := newTestNet(t)
	cfg := Config{Ring: RingFrames, BlockSize: 16 << 10, NumBlocks: 4, FrameSize: 2048} // 8 slots a block, 32 in all
	p := openPort(t, tn.host, cfg)
	var sent [][]byte
	for i := range 20 {
		sent = append(sent, testFrame(tn.hostMAC, tn.peerMAC, uint32(i)))
	}
	tn.peerSocket(t).send(t, sent...)
	time.Sleep(20 * time.Millisecond)
	seqs, perBlock, _ := receiveTest(t, p, 20, 200*time.Millisecond)
	if len(seqs) != 20 {
		t.Fatalf("received %d of 20", len(seqs))
	}
	most := 0
	for _, c := range perBlock {
		most = max(most, c)
	}
	if most < 2 || most > 8 {
		t.Errorf("frames per block %v: want batches of 2..8", perBlock)
	}
}

// TestFrameRingLatency: a lone frame is handed over at once, where a
// block ring holds it until its block retires (BlockTimeout, here 300 ms).
func TestFrameRingLatency(t *testing.T) {
	tn := newTestNet(t)
	ps := tn.peerSocket(t)
	for _, mode := range []RingMode{RingFrames, RingBlocks} {
		p := openPort(t, tn.host, Config{Ring: mode, BlockTimeout: 300 * time.Millisecond})
		start := time.Now()
		ps.send(t, testFrame(tn.hostMAC, tn.peerMAC, 1))
		seqs, _, _ := receiveTest(t, p, 1, time.Second)
		took := time.Since(start)
		p.Close()
		if len(seqs) != 1 {
			t.Fatalf("%v ring: frame not received", mode)
		}
		t.Logf("%v ring: a lone frame read after %v", mode, took)
		switch {
		case mode == RingFrames && took > 150*time.Millisecond:
			t.Errorf("frame ring took %v to hand over a lone frame", took)
		case mode == RingBlocks && took < 100*time.Millisecond: // the retire timer runs from the ring's creation
			t.Errorf("block ring handed over a lone frame after %v, before its block timeout", took)
		}
	}
}

// TestFrameRingTruncation sends a 4000-byte frame into 2048-byte slots:
// with PACKET_COPY_THRESH (the default) it is read whole from the socket;
// without, it is truncated to its slot and counted.
func TestFrameRingTruncation(t *testing.T) {
	tn := newTestNet(t)
	hl, err := netlink.LinkByName(tn.host)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetMTU(hl, 9000); err != nil {
		t.Fatal(err)
	}
	inNS(t, tn.ns, func() {
		l, err := netlink.LinkByName(tn.peer)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetMTU(l, 9000); err != nil {
			t.Fatal(err)
		}
	})
	ps := tn.peerSocket(t)
	for _, noCopy := range []bool{false, true} {
		p := openPort(t, tn.host, Config{Ring: RingFrames, FrameSize: 2048, noCopy: noCopy})
		big := append(testFrame(tn.hostMAC, tn.peerMAC, 9), make([]byte, 4000-64)...)
		for i := 64; i < len(big); i++ {
			big[i] = byte(i)
		}
		small := testFrame(tn.hostMAC, tn.peerMAC, 10)
		ps.send(t, big, small, big)
		seqs, _, frames := receiveTest(t, p, 3, time.Second)
		if len(seqs) != 3 || seqs[0] != 9 || seqs[1] != 10 || seqs[2] != 9 {
			t.Fatalf("noCopy %v: received %v", noCopy, seqs)
		}
		st, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		for _, i := range []int{0, 2} {
			f := frames[i]
			if f.Len != len(big) {
				t.Fatalf("noCopy %v: frame %d Len %d, want %d", noCopy, i, f.Len, len(big))
			}
			if noCopy {
				if len(f.Data) >= 2048 || string(f.Data) != string(big[:len(f.Data)]) {
					t.Fatalf("truncated frame %d: %d bytes, not a prefix of the frame below the slot size", i, len(f.Data))
				}
			} else if string(f.Data) != string(big) {
				t.Fatalf("copied frame %d: %d bytes, differs from the %d sent", i, len(f.Data), len(big))
			}
		}
		if string(frames[1].Data) != string(small) {
			t.Fatalf("noCopy %v: the small frame between the copies is %x", noCopy, frames[1].Data)
		}
		wantTrunc := uint64(0)
		if noCopy {
			wantTrunc = 2
		}
		if st.RxTruncated != wantTrunc || st.RxErrors != 0 {
			t.Errorf("noCopy %v: stats %+v, want %d truncated", noCopy, st, wantTrunc)
		}
	}
}

// TestFrameRingVLAN: the tag the kernel removed is reported as on a block
// ring.
func TestFrameRingVLAN(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Ring: RingFrames})
	f := append(append(append([]byte(nil), tn.hostMAC...), tn.peerMAC...), 0x81, 0x00, 0x60, 0x64)
	f = append(f, testFrame(nil, nil, 3)[12:]...)
	tn.peerSocket(t).send(t, f)
	var got []Frame
	deadline := time.Now().Add(time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		if _, err := p.Receive(20*time.Millisecond, func(fr *Frame) {
			if _, ok := testSeq(fr.Data); ok {
				c := *fr
				got = append(got, c)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 {
		t.Fatal("tagged frame not received (or the tag was not removed)")
	}
	if !got[0].Tagged || got[0].TCI != 0x6064 || got[0].TPID != 0x8100 {
		t.Fatalf("tagged %v tci %#x tpid %#x", got[0].Tagged, got[0].TCI, got[0].TPID)
	}
}

// TestFrameRingNoAllocs: reading a frame ring allocates nothing.
func TestFrameRingNoAllocs(t *testing.T) {
	receiveNoAllocs(t, Config{Ring: RingFrames, BlockSize: 64 << 10, NumBlocks: 16})
}

// TestFrameRingQueues: a frame ring in a fanout group of 3 queues gets
// every frame once.
func TestFrameRingQueues(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Ring: RingFrames, Queues: 3})
	var sent [][]byte
	for i := range 60 {
		f := testFrame(tn.hostMAC, tn.peerMAC, uint32(i))
		f[0x28] = byte(i) // vary the payload; the hash of a non-IP frame is the same anyway
		sent = append(sent, f)
	}
	tn.peerSocket(t).send(t, sent...)
	seen := map[uint32]int{}
	deadline := time.Now().Add(time.Second)
	for len(seen) < 60 && time.Now().Before(deadline) {
		for i := range p.Queues() {
			if _, err := p.Queue(i).Receive(5*time.Millisecond, func(f *Frame) {
				if s, ok := testSeq(f.Data); ok {
					seen[s]++
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != 60 {
		t.Fatalf("saw %d of 60 frames", len(seen))
	}
	for s, c := range seen {
		if c != 1 {
			t.Fatalf("frame %d read %d times", s, c)
		}
	}
}

func TestParseRingMode(t *testing.T) {
	for _, m := range []RingMode{RingBlocks, RingFrames} {
		if got, err := ParseRingMode(m.String()); err != nil || got != m {
			t.Errorf("ParseRingMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseRingMode("v4"); err == nil {
		t.Error("ParseRingMode(v4) accepted")
	}
	bad := Config{Ring: RingFrames, FrameSize: 1000}
	bad.defaults()
	if bad.validate() == nil {
		t.Error("a frame size that does not divide the block size was accepted")
	}
}

// TestFrameRingGSO: a TCP GSO frame of 4,054 bytes (as a local stack
// sends through a veth with TSO on) arrives in a 2048-byte slot ring whole,
// flagged CsumNotReady, with its segmentation in Offload, and
// AppendFinished cuts it into segments with valid checksums.
func TestFrameRingGSO(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Ring: RingFrames, FrameSize: 2048})
	payload := make([]byte, 4000)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	frame, _ := tcpFrame(false, false, payload, 0x18)
	vnet := make([]byte, vnetHdrLen)
	vnet[0], vnet[1] = vnetFlagNeedsCsum, GSOTCPv4
	binary.LittleEndian.PutUint16(vnet[2:], 54)   // hdr_len
	binary.LittleEndian.PutUint16(vnet[4:], 1448) // gso_size
	binary.LittleEndian.PutUint16(vnet[6:], 34)   // csum_start
	binary.LittleEndian.PutUint16(vnet[8:], 16)   // csum_offset
	inNS(t, tn.ns, func() {
		fd := rawSocket(t, tn.peerIndex)
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(fd, append(vnet, frame...)); err != nil {
			t.Fatalf("sending a GSO frame: %v", err)
		}
	})
	var got *Frame
	deadline := time.Now().Add(time.Second)
	for got == nil && time.Now().Before(deadline) {
		if _, err := p.Receive(20*time.Millisecond, func(f *Frame) {
			if f.Len == len(frame) {
				c := *f
				c.Data = append([]byte(nil), f.Data...)
				got = &c
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got == nil {
		t.Fatal("the GSO frame did not arrive")
	}
	if len(got.Data) != len(frame) || !got.CsumNotReady || got.Offload.GSOType != GSOTCPv4 || got.Offload.GSOSize != 1448 {
		t.Fatalf("%d of %d bytes, csum not ready %v, offload %+v", len(got.Data), len(frame), got.CsumNotReady, got.Offload)
	}
	_, segs, err := AppendFinished(nil, nil, got.Data, got.Offload)
	if err != nil {
		t.Fatal(err)
	}
	var joined []byte
	for _, s := range segs {
		_, _, pl := verifyTCP(t, s, false, 34)
		joined = append(joined, pl...)
	}
	if len(segs) != 3 || !bytes.Equal(joined, payload) {
		t.Fatalf("%d segments, %d payload bytes", len(segs), len(joined))
	}
}

// TestReadBlockShortTimeout: a ReadBlock that waits 100 µs for nothing
// returns after about that, not after the Go runtime's 1 ms rounding of
// an idle process's sleep (package kick), so a batch delay under 1 ms is
// kept under light traffic.
func TestReadBlockShortTimeout(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Ring: RingFrames})
	var took []time.Duration
	for range 30 {
		t0 := time.Now()
		b, err := p.ReadBlock(100 * time.Microsecond)
		if err != nil {
			t.Fatal(err)
		}
		if b != nil {
			b.Release()
			continue // kernel noise
		}
		took = append(took, time.Since(t0))
	}
	if a := testing.AllocsPerRun(20, func() { p.Receive(100*time.Microsecond, func(*Frame) {}) }); a > 0 && !raceEnabled {
		t.Errorf("a short ReadBlock allocates %v times", a)
	}
	slices.Sort(took)
	med := took[len(took)/2]
	t.Logf("ReadBlock(100µs) of an empty ring: median %v, max %v", med, took[len(took)-1])
	if med > 600*time.Microsecond {
		t.Errorf("ReadBlock(100µs) took %v at the median", med)
	}
}

// TestPause: a short Pause ends on time (package kick), and a Close
// during Pauses leaves the ring and the kicker to the pausing reader (no
// fault; ErrClosed after).
func TestPause(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Ring: RingFrames})
	var took []time.Duration
	for range 20 {
		t0 := time.Now()
		p.Pause(100 * time.Microsecond)
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	t.Logf("Pause(100µs): median %v", took[len(took)/2])
	if took[len(took)/2] > 600*time.Microsecond {
		t.Errorf("Pause(100µs) took %v at the median", took[len(took)/2])
	}
	done := make(chan struct{})
	go func() {
		for range 50 {
			p.Pause(500 * time.Microsecond)
		}
		close(done)
	}()
	time.Sleep(2 * time.Millisecond)
	p.Close()
	<-done
	if _, err := p.ReadBlock(0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadBlock after Close: %v", err)
	}
}
