package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The test network: a veth pair, one end ("host") in the test's network
// namespace where ports attach, the other ("peer") in a namespace of its
// own where a raw socket plays the neighbour. Test frames carry a local
// experimental EtherType and a marker, so kernel noise is filtered out
// (IPv6 is disabled on both ends as well, so there is little of it).

const testEthType = 0x88b5

var testMarker = []byte("gswitch-afpacket")

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("afpacket tests need root (CAP_NET_ADMIN and CAP_NET_RAW) to create network namespaces, veth pairs and packet sockets: run them as root (CI does)")
	}
}

type testNet struct {
	host, peer       string
	hostMAC, peerMAC net.HardwareAddr
	peerIndex        int
	ns               netns.NsHandle
}

var vethSeq atomic.Int32

// newTestNet builds the veth pair and the namespace; t.Cleanup removes
// both, whether the test passes or not.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	requireRoot(t)
	id := fmt.Sprintf("%d%d", os.Getpid()%10000, vethSeq.Add(1))
	tn := &testNet{host: "gswh" + id, peer: "gswp" + id}
	ns := newNamespace(t)
	tn.ns = ns
	la := netlink.NewLinkAttrs()
	la.Name = tn.host
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: tn.peer}); err != nil {
		t.Fatalf("creating veth %s/%s: %v", tn.host, tn.peer, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(tn.host); err == nil {
			netlink.LinkDel(l)
		}
	})
	pl, err := netlink.LinkByName(tn.peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(pl, int(ns)); err != nil {
		t.Fatalf("moving %s into the namespace: %v", tn.peer, err)
	}
	disableIPv6(t, tn.host)
	hl, err := netlink.LinkByName(tn.host)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		t.Fatal(err)
	}
	tn.hostMAC = hl.Attrs().HardwareAddr
	inNS(t, ns, func() {
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
	waitFor(t, "host end operationally up", func() bool {
		l, err := netlink.LinkByName(tn.host)
		return err == nil && l.Attrs().OperState == netlink.OperUp
	})
	return tn
}

// newNamespace creates a network namespace without entering it.
func newNamespace(t *testing.T) netns.NsHandle {
	t.Helper()
	var ns netns.NsHandle
	onThreadBack(t, func() {
		var err error
		if ns, err = netns.New(); err != nil { // enters it
			t.Fatalf("creating a network namespace: %v", err)
		}
	})
	t.Cleanup(func() { ns.Close() }) // the last reference: the namespace and the peer go
	return ns
}

// inNS runs fn on a thread inside ns.
func inNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	onThreadBack(t, func() {
		if err := netns.Set(ns); err != nil {
			t.Fatal(err)
		}
		fn()
	})
}

// onThreadBack runs fn locked to a thread whose network namespace fn may
// change, and puts the thread back into the namespace it started in (even
// where fn stops the test), before unlocking it.
func onThreadBack(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", err)) // the thread is unusable
		}
	}()
	fn()
}

// disableIPv6 turns IPv6 off on an interface of the calling thread's
// namespace, so that it sends no router solicitations or DAD probes.
func disableIPv6(t *testing.T, ifname string) {
	t.Helper()
	err := os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // no IPv6 at all is fine
		t.Fatalf("disabling IPv6 on %s: %v", ifname, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// peerSocket is a plain AF_PACKET socket on the peer end.
type peerSocket struct{ fd int }

func (tn *testNet) peerSocket(t *testing.T) *peerSocket {
	t.Helper()
	var ps peerSocket
	inNS(t, tn.ns, func() { ps.fd = rawSocket(t, tn.peerIndex) })
	return &ps
}

// rawSocket opens a blocking AF_PACKET socket bound to an interface of the
// calling thread's namespace, with a 50 ms receive timeout.
func rawSocket(t *testing.T, index int) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

func (ps *peerSocket) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		if _, err := unix.Write(ps.fd, f); err != nil {
			t.Fatalf("peer send: %v", err)
		}
	}
}

// recv returns the test frames the socket receives (not those it sent)
// until it has 'want' or 'wait' passes with nothing new.
func recvTest(fd int, want int, wait time.Duration, outgoing bool) [][]byte {
	var got [][]byte
	buf := make([]byte, 65536)
	last := time.Now()
	for len(got) < want && time.Since(last) < wait {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // the receive timeout
		}
		sll, _ := from.(*unix.SockaddrLinklayer)
		if sll == nil || (sll.Pkttype == unix.PACKET_OUTGOING) != outgoing {
			continue
		}
		if _, ok := testSeq(buf[:n]); ok {
			got = append(got, append([]byte(nil), buf[:n]...))
			last = time.Now()
		}
	}
	return got
}

// testFrame builds a 64-byte test frame with sequence number 'seq'.
func testFrame(dst, src net.HardwareAddr, seq uint32) []byte {
	f := make([]byte, 64)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], testEthType)
	copy(f[14:], testMarker)
	binary.BigEndian.PutUint32(f[14+len(testMarker):], seq)
	return f
}

// testSeq returns a test frame's sequence number.
func testSeq(f []byte) (uint32, bool) {
	n := 14 + len(testMarker)
	if len(f) < n+4 || binary.BigEndian.Uint16(f[12:]) != testEthType || !bytes.Equal(f[14:n], testMarker) {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[n:]), true
}

// receiveTest reads blocks from a port until it has 'want' test frames or
// 'wait' passes without one; it returns their sequence numbers, the frames
// per block that held test frames, and the frames themselves (copied).
func receiveTest(t *testing.T, p *Port, want int, wait time.Duration) (seqs []uint32, perBlock []int, frames []Frame) {
	t.Helper()
	last := time.Now()
	for len(seqs) < want && time.Since(last) < wait {
		inBlock := 0
		_, err := p.Receive(20*time.Millisecond, func(f *Frame) {
			if s, ok := testSeq(f.Data); ok {
				seqs = append(seqs, s)
				inBlock++
				c := *f
				c.Data = append([]byte(nil), f.Data...)
				frames = append(frames, c)
			}
		})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if inBlock > 0 {
			perBlock = append(perBlock, inBlock)
			last = time.Now()
		}
	}
	return seqs, perBlock, frames
}
