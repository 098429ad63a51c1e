package afpacket

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/tables/flow"
)

func openPort(t *testing.T, name string, cfg Config) *Port {
	t.Helper()
	p, err := Open(name, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestOpenNoInterface(t *testing.T) {
	_, err := Open("gsw-no-such-if", Config{})
	if !errors.Is(err, ErrNoInterface) {
		t.Fatalf("Open of a missing interface: %v, want ErrNoInterface", err)
	}
	if !strings.Contains(err.Error(), "gsw-no-such-if") {
		t.Errorf("error %q does not name the interface", err)
	}
}

func TestPermissionError(t *testing.T) {
	err := sysErr("socket(AF_PACKET)", unix.EPERM)
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Fatalf("permission error %q: must match os.ErrPermission and name CAP_NET_RAW", err)
	}
	if err := sysErr("bind", unix.ENODEV); strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Fatalf("non-permission error %q mentions a capability", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{BlockSize: 1000},
		{NumBlocks: -1},
		{BlockTimeout: time.Microsecond},
		{EventBuffer: -1},
		{Queues: -1},
		{Queues: MaxQueues + 1},
	} {
		if _, err := Open("lo", c); err == nil || errors.Is(err, ErrNoInterface) {
			t.Errorf("Open with %+v: %v, want a configuration error", c, err)
		}
	}
}

// TestReceiveBatches sends frames from the peer and receives them on the
// port in blocks: all of them, in order, unmodified, several per block,
// counted.
func TestReceiveBatches(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{BlockSize: 64 << 10, NumBlocks: 8, BlockTimeout: 5 * time.Millisecond})
	if l := p.Link(); l.Name != tn.host || l.MAC.String() != tn.hostMAC.String() || !l.OperUp || l.MTU != 1500 || l.Index == 0 {
		t.Fatalf("Link() = %v", l)
	}
	ps := tn.peerSocket(t)
	const n = 300
	var sent [][]byte
	for i := range n {
		sent = append(sent, testFrame(tn.hostMAC, tn.peerMAC, uint32(i)))
	}
	ps.send(t, sent...)
	seqs, perBlock, frames := receiveTest(t, p, n, time.Second)
	if len(seqs) != n {
		t.Fatalf("received %d of %d frames", len(seqs), n)
	}
	batched := false
	for i, s := range seqs {
		if s != uint32(i) {
			t.Fatalf("frame %d has sequence %d", i, s)
		}
		if string(frames[i].Data) != string(sent[i]) || frames[i].Len != len(sent[i]) || frames[i].Tagged {
			t.Fatalf("frame %d: %x (len %d, tagged %v), sent %x", i, frames[i].Data, frames[i].Len, frames[i].Tagged, sent[i])
		}
		if time.Since(frames[i].Time) > time.Minute || frames[i].Time.After(time.Now()) {
			t.Fatalf("frame %d time %v", i, frames[i].Time)
		}
	}
	for _, c := range perBlock {
		batched = batched || c > 1
	}
	if !batched {
		t.Errorf("no block held more than one frame: %v", perBlock)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RxPackets < n || st.RxBytes < n*64 || st.RxErrors != 0 || st.RxTruncated != 0 || st.RingDrops != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestPromiscuous checks that the membership puts the interface in
// promiscuous mode while the port is open, and that frames for a foreign
// MAC address arrive. (A veth delivers every frame whatever its address,
// so the interface's promiscuity count is what shows the membership.)
func TestPromiscuous(t *testing.T) {
	tn := newTestNet(t)
	promisc := func() int {
		l, err := netlink.LinkByName(tn.host)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Promisc
	}
	plain := openPort(t, tn.host, Config{})
	if c := promisc(); c != 0 {
		t.Fatalf("promiscuity %d with a non-promiscuous port", c)
	}
	plain.Close()
	p := openPort(t, tn.host, Config{Promiscuous: true})
	if c := promisc(); c != 1 {
		t.Fatalf("promiscuity %d with a promiscuous port, want 1", c)
	}
	foreign, _ := net.ParseMAC("02:99:88:77:66:55")
	tn.peerSocket(t).send(t, testFrame(foreign, tn.peerMAC, 1), testFrame(foreign, tn.peerMAC, 2))
	seqs, _, frames := receiveTest(t, p, 2, time.Second)
	if len(seqs) != 2 || frames[0].Data[0] != 0x02 || frames[0].Data[1] != 0x99 {
		t.Fatalf("frames to a foreign MAC: got sequences %v", seqs)
	}
	p.Close()
	if c := promisc(); c != 0 {
		t.Fatalf("promiscuity %d after Close, want 0", c)
	}
}

// TestTransmitNotReadBack sends a batch from each of two ports on one
// interface: the peer receives both whole and in order, and neither port
// reads back frames sent from the host (PACKET_IGNORE_OUTGOING; the kernel
// never loops a socket's frames back to the socket itself, so the second
// port is what makes the option matter), while a plain socket on the same
// interface does see all of them leave (so the check is not vacuous).
func TestTransmitNotReadBack(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Promiscuous: true})
	p2 := openPort(t, tn.host, Config{})
	ps := tn.peerSocket(t)
	watcher := rawSocket(t, p.Link().Index)
	const n, n2 = 100, 50
	var frames [][]byte
	for i := range n + n2 {
		frames = append(frames, testFrame(tn.peerMAC, tn.hostMAC, uint32(i)))
	}
	if sent, err := p.Send(frames[:n]); sent != n || err != nil {
		t.Fatalf("Send: %d, %v", sent, err)
	}
	if sent, err := p2.Send(frames[n:]); sent != n2 || err != nil {
		t.Fatalf("second port's Send: %d, %v", sent, err)
	}
	got := recvTest(ps.fd, n+n2, 500*time.Millisecond, false)
	if len(got) != n+n2 {
		t.Fatalf("peer received %d of %d", len(got), n+n2)
	}
	for i, f := range got {
		if string(f) != string(frames[i]) {
			t.Fatalf("peer frame %d = %x, sent %x", i, f, frames[i])
		}
	}
	if out := recvTest(watcher, n+n2, 200*time.Millisecond, true); len(out) != n+n2 {
		t.Fatalf("a plain socket saw %d of the %d outgoing frames", len(out), n+n2)
	}
	for i, port := range []*Port{p, p2} {
		if seqs, _, _ := receiveTest(t, port, 1, 100*time.Millisecond); len(seqs) != 0 {
			t.Fatalf("port %d read back %d frames sent from the host", i+1, len(seqs))
		}
	}
	st, _ := p.Stats()
	if st.TxPackets != n || st.TxBytes != n*64 || st.TxErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestSendErrors: a frame the kernel refuses is counted and skipped; the
// others go.
func TestSendErrors(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{})
	ps := tn.peerSocket(t)
	big := append(testFrame(tn.peerMAC, tn.hostMAC, 0), make([]byte, 2000)...)
	sent, err := p.Send([][]byte{big, testFrame(tn.peerMAC, tn.hostMAC, 1), nil, testFrame(tn.peerMAC, tn.hostMAC, 2)})
	if sent != 2 || err == nil {
		t.Fatalf("Send = %d, %v; want 2 and an error", sent, err)
	}
	st, _ := p.Stats()
	if st.TxErrors != 2 || st.TxPackets != 2 {
		t.Errorf("stats %+v", st)
	}
	got := recvTest(ps.fd, 2, 300*time.Millisecond, false)
	if len(got) != 2 {
		t.Fatalf("peer received %d frames, want 2", len(got))
	}
}

// TestVLAN sends a tagged frame: whether the kernel strips the tag or not,
// the frame's key has it.
func TestVLAN(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{})
	f := append(append(append([]byte(nil), tn.hostMAC...), tn.peerMAC...), 0x81, 0x00, 0x60, 0x64, 0x08, 0x00) // pcp 3, vid 100
	f = append(f, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0)
	f = append(f, make([]byte, 64-len(f))...)
	tn.peerSocket(t).send(t, f)
	var k flow.Key
	found := false
	deadline := time.Now().Add(time.Second)
	for !found && time.Now().Before(deadline) {
		if _, err := p.Receive(20*time.Millisecond, func(fr *Frame) {
			if fr.Parse(&k, 5) == packet.OK && k.GetUint(flow.FieldUDPSrc) == 12345 {
				found = true
				t.Logf("tag removed by the kernel: %v (tci %#x tpid %#x)", fr.Tagged, fr.TCI, fr.TPID)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatal("tagged frame not received")
	}
	if vid, pcp, et := k.GetUint(flow.FieldVlanVID), k.GetUint(flow.FieldVlanPCP), k.GetUint(flow.FieldEthType); vid != 0x1000|100 || pcp != 3 || et != 0x0800 {
		t.Fatalf("vlan_vid %#x vlan_pcp %d eth_type %#x", vid, pcp, et)
	}
}

// TestLinkEvents takes the peer down and up, and changes the MTU: each
// change arrives as an event and shows in Link.
func TestLinkEvents(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{})
	setPeer := func(up bool) {
		inNS(t, tn.ns, func() {
			l, err := netlink.LinkByName(tn.peer)
			if err != nil {
				t.Fatal(err)
			}
			if up {
				err = netlink.LinkSetUp(l)
			} else {
				err = netlink.LinkSetDown(l)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	expect := func(what string, ok func(LinkInfo) bool) {
		t.Helper()
		timeout := time.After(3 * time.Second)
		for {
			select {
			case ev, open := <-p.Events():
				if !open {
					t.Fatalf("events closed while waiting for %s", what)
				}
				if ok(ev) {
					if !ok(p.Link()) {
						t.Fatalf("event %v but Link() = %v", ev, p.Link())
					}
					return
				}
			case <-timeout:
				t.Fatalf("no event: %s (Link() = %v)", what, p.Link())
			}
		}
	}
	setPeer(false)
	expect("carrier lost", func(l LinkInfo) bool { return !l.OperUp && l.AdminUp })
	setPeer(true)
	expect("carrier back", func(l LinkInfo) bool { return l.OperUp })
	hl, _ := netlink.LinkByName(tn.host)
	if err := netlink.LinkSetMTU(hl, 1400); err != nil {
		t.Fatal(err)
	}
	expect("mtu 1400", func(l LinkInfo) bool { return l.MTU == 1400 })
	if err := netlink.LinkSetDown(hl); err != nil {
		t.Fatal(err)
	}
	expect("admin down", func(l LinkInfo) bool { return !l.AdminUp && !l.OperUp })
	if err := netlink.LinkDel(hl); err != nil {
		t.Fatal(err)
	}
	expect("deleted", func(l LinkInfo) bool { return l.Deleted })
}

// TestRingDrops overruns a tiny ring: the kernel's drops show in Stats.
func TestRingDrops(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{BlockSize: os.Getpagesize(), NumBlocks: 2, BlockTimeout: time.Millisecond})
	var frames [][]byte
	for i := range 400 {
		frames = append(frames, append(testFrame(tn.hostMAC, tn.peerMAC, uint32(i)), make([]byte, 200)...))
	}
	tn.peerSocket(t).send(t, frames...)
	time.Sleep(20 * time.Millisecond)
	seqs, _, _ := receiveTest(t, p, 400, 100*time.Millisecond)
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RingDrops == 0 || st.RingDrops+uint64(len(seqs)) != 400 {
		t.Fatalf("received %d, ring drops %d (freezes %d): want drops, and 400 in all", len(seqs), st.RingDrops, st.RingFreezes)
	}
}

// TestClose: a waiting ReadBlock returns ErrClosed, a held block stays
// readable until released, and everything after Close says ErrClosed.
func TestClose(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := p.ReadBlock(-1)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting ReadBlock returned %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake ReadBlock")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Send([][]byte{testFrame(tn.peerMAC, tn.hostMAC, 0)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if _, err := p.ReadBlock(0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadBlock after Close: %v", err)
	}
	for range p.Events() { // must be closed
	}

	// A block held across Close.
	p2 := openPort(t, tn.host, Config{BlockTimeout: time.Millisecond})
	tn.peerSocket(t).send(t, testFrame(tn.hostMAC, tn.peerMAC, 7))
	var b *Block
	waitFor(t, "a block", func() bool {
		var err error
		b, err = p2.ReadBlock(10 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return b != nil
	})
	if _, err := p2.ReadBlock(0); !errors.Is(err, ErrBusy) {
		t.Errorf("second ReadBlock with a block held: %v, want ErrBusy", err)
	}
	p2.Close()
	var f Frame
	n := 0
	for b.Next(&f) {
		n += len(f.Data) // reads the ring after Close
	}
	b.Release()
	b.Release()
	if n == 0 {
		t.Error("held block empty")
	}
}

// TestNoAllocs: receiving a block and sending a batch allocate nothing.
func TestNoAllocs(t *testing.T) {
	p, frames := receiveNoAllocs(t, Config{BlockSize: os.Getpagesize(), NumBlocks: 64, BlockTimeout: time.Millisecond})
	if a := testing.AllocsPerRun(20, func() { p.Send(frames[:10]) }); a != 0 {
		t.Errorf("Send allocates %v times per batch", a)
	}
}

// receiveNoAllocs opens a port with cfg, sends it 400 test frames and
// checks that Receive allocates nothing and delivers them all; it returns
// the port and the frames.
func receiveNoAllocs(t *testing.T, cfg Config) (*Port, [][]byte) {
	t.Helper()
	tn := newTestNet(t)
	p := openPort(t, tn.host, cfg)
	var frames [][]byte
	for i := range 400 {
		frames = append(frames, testFrame(tn.hostMAC, tn.peerMAC, uint32(i)))
	}
	tn.peerSocket(t).send(t, frames...)
	time.Sleep(30 * time.Millisecond)
	n := 0
	count := func(f *Frame) {
		if _, ok := testSeq(f.Data); ok {
			n++
		}
	}
	if a := testing.AllocsPerRun(50, func() { p.Receive(time.Millisecond, count) }); a != 0 {
		t.Errorf("Receive allocates %v times per block", a)
	}
	drain(p.Queue(0), count) // the blocks a send slowed by a loaded machine spread over more than 50
	if n != 400 {
		t.Errorf("received %d of 400 test frames", n)
	}
	return p, frames
}

// drain reads q's blocks into fn until none comes for 100 ms.
func drain(q *Queue, fn func(*Frame)) {
	for {
		if n, err := q.Receive(100*time.Millisecond, fn); n == 0 || err != nil {
			return
		}
	}
}

// TestFrameAppendWire: a frame whose tag the kernel removed is appended
// with the tag back after the MAC addresses; an untagged frame, or one too
// short to hold the addresses, as it is.
func TestFrameAppendWire(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x45}
	f := Frame{Data: data, Tagged: true, TPID: 0x88a8, TCI: 0x2064}
	want := append(append(append([]byte{0xff}, data[:12]...), 0x88, 0xa8, 0x20, 0x64), data[12:]...)
	if got := f.AppendWire([]byte{0xff}); string(got) != string(want) {
		t.Errorf("tagged: % x, want % x", got, want)
	}
	f.Tagged = false
	if got := f.AppendWire(nil); string(got) != string(data) {
		t.Errorf("untagged: % x", got)
	}
	f = Frame{Data: data[:5], Tagged: true, TPID: 0x8100, TCI: 1}
	if got := f.AppendWire(nil); string(got) != string(data[:5]) {
		t.Errorf("a runt: % x", got)
	}
}
