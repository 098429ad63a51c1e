package afpacket

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// recreate deletes the veth pair and builds a new one with the same names
// (host end here, peer end in the namespace), as an operator or a
// container runtime does; it returns the new host ifindex.
func (tn *testNet) recreate(t *testing.T) int {
	t.Helper()
	hl, err := netlink.LinkByName(tn.host)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkDel(hl); err != nil {
		t.Fatal(err)
	}
	la := netlink.NewLinkAttrs()
	la.Name = tn.host
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: tn.peer}); err != nil {
		t.Fatalf("re-creating veth %s/%s: %v", tn.host, tn.peer, err)
	}
	pl, err := netlink.LinkByName(tn.peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(pl, int(tn.ns)); err != nil {
		t.Fatal(err)
	}
	disableIPv6(t, tn.host)
	if hl, err = netlink.LinkByName(tn.host); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		t.Fatal(err)
	}
	tn.hostMAC = hl.Attrs().HardwareAddr
	inNS(t, tn.ns, func() {
		disableIPv6(t, tn.peer)
		l, err := netlink.LinkByName(tn.peer)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		tn.peerMAC, tn.peerIndex = l.Attrs().HardwareAddr, l.Attrs().Index
	})
	return hl.Attrs().Index
}

// TestReattachByName: an interface deleted and re-created under an open
// Port (a reader waiting in ReadBlock without a timeout on every queue)
// is re-attached by name: Events says deleted, then the new
// ifindex, and the same Port and Queues receive and send on the new
// interface. With one queue and with a fanout group of three.
func TestReattachByName(t *testing.T) {
	for _, queues := range []int{1, 3} {
		t.Run(fmt.Sprintf("queues=%d", queues), func(t *testing.T) { testReattach(t, queues) })
	}
}

func testReattach(t *testing.T, queues int) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: queues})
	oldIndex := p.Link().Index
	var (
		mu   sync.Mutex
		seqs = map[uint32]bool{}
		wg   sync.WaitGroup
	)
	for i := range queues {
		wg.Add(1)
		go func() { // each reader waits without a timeout: only a block, Close or re-attachment wake it
			defer wg.Done()
			var f Frame
			for {
				b, err := p.Queue(i).ReadBlock(-1)
				if err != nil {
					return // ErrClosed
				}
				if b == nil {
					continue // re-attached
				}
				for b.Next(&f) {
					if s, ok := testSeq(f.Data); ok {
						mu.Lock()
						seqs[s] = true
						mu.Unlock()
					}
				}
				b.Release()
			}
		}()
	}
	t.Cleanup(func() { p.Close(); wg.Wait() })
	got := func(lo, hi uint32) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for s := lo; s < hi; s++ {
			if seqs[s] {
				n++
			}
		}
		return n
	}
	sendFlows := func(lo, hi uint32) {
		ps := tn.peerSocket(t)
		for s := lo; s < hi; s++ {
			f := testFrame(tn.hostMAC, tn.peerMAC, s)
			f[6+5] = byte(s) // a source MAC per frame: the fanout spreads them
			ps.send(t, f)
		}
	}
	sendFlows(0, 64)
	waitFor(t, "frames before the deletion", func() bool { return got(0, 64) == 64 })

	expect := func(what string, ok func(LinkInfo) bool) {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case ev, open := <-p.Events():
				if !open {
					t.Fatalf("events closed while waiting for %s", what)
				}
				if ok(ev) {
					return
				}
			case <-timeout:
				t.Fatalf("no event: %s (Link() = %v)", what, p.Link())
			}
		}
	}
	newIndex := tn.recreate(t)
	if newIndex == oldIndex {
		t.Fatalf("the new interface has the old index %d", oldIndex)
	}
	expect("deleted", func(l LinkInfo) bool { return l.Deleted && l.Index == oldIndex })
	expect("re-attached", func(l LinkInfo) bool { return !l.Deleted && l.Index == newIndex })
	waitFor(t, "the new interface operationally up", func() bool { return p.Link().OperUp && p.Link().Index == newIndex })

	sendFlows(1000, 1064)
	waitFor(t, "frames after the re-attachment", func() bool { return got(1000, 1064) == 64 })

	ps := tn.peerSocket(t)
	out := [][]byte{testFrame(tn.peerMAC, tn.hostMAC, 7), testFrame(tn.peerMAC, tn.hostMAC, 8)}
	if n, err := p.Send(out); n != 2 || err != nil {
		t.Fatalf("Send after re-attachment: %d, %v", n, err)
	}
	if rx := recvTest(ps.fd, 2, 500*time.Millisecond, false); len(rx) != 2 {
		t.Fatalf("the new peer received %d of 2 frames sent after re-attachment", len(rx))
	}
	st, _ := p.Stats()
	if st.Reattaches != 1 {
		t.Errorf("Reattaches %d, want 1 (fails %d)", st.Reattaches, st.ReattachFails)
	}
	if queues > 1 && p.FanoutGroup() < 0 {
		t.Errorf("no fanout group after re-attachment")
	}
}

// TestReattachHeldBlock: a block the reader holds while the port
// re-attaches stays readable (its ring is unmapped only when it is
// released), and the next ReadBlock reads the new interface.
func TestReattachHeldBlock(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{})
	ps := tn.peerSocket(t)
	ps.send(t, testFrame(tn.hostMAC, tn.peerMAC, 1), testFrame(tn.hostMAC, tn.peerMAC, 2))
	var b *Block
	waitFor(t, "a block", func() bool {
		var err error
		b, err = p.ReadBlock(50 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return b != nil
	})
	newIndex := tn.recreate(t)
	waitFor(t, "re-attachment", func() bool { return p.Link().Index == newIndex && !p.Link().Deleted })
	var f Frame
	n := 0
	for b.Next(&f) {
		if _, ok := testSeq(f.Data); ok {
			n++
		}
	}
	if n == 0 {
		t.Fatal("the held block has no test frame")
	}
	b.Release()
	if b2, err := p.ReadBlock(0); err == ErrBusy {
		t.Fatal("the queue still counts the old block as held")
	} else if b2 != nil {
		b2.Release()
	}
	ps2 := tn.peerSocket(t)
	ps2.send(t, testFrame(tn.hostMAC, tn.peerMAC, 9))
	seqs, _, _ := receiveTest(t, p, 1, time.Second)
	if len(seqs) != 1 || seqs[0] != 9 {
		t.Fatalf("after the re-attachment: %v, want frame 9", seqs)
	}
}
