package l3

import (
	"net/netip"
	"testing"
	"time"
)

func testNeighbours() (*Neighbours, time.Time) {
	return NewNeighbours(NeighConfig{ReachableTime: 30 * time.Second, StaleTime: 5 * time.Second,
		RetransTime: time.Second, MaxProbes: 3, QueueLen: 2, MaxEntries: 3}), time.Unix(1000, 0)
}

var (
	nk  = NeighKey{Port: 2, Addr: netip.MustParseAddr("10.0.2.5")}
	nm  = MAC{2, 0, 0, 0, 2, 5}
	nm2 = MAC{2, 0, 0, 0, 2, 6}
)

func TestNeighbourResolution(t *testing.T) {
	n, t0 := testNeighbours()
	r := n.Resolve(nk, []byte{1}, t0, false)
	if r.Verdict != Queued || !r.Solicit || r.Unicast != (MAC{}) {
		t.Fatalf("first packet: %+v, want queued with a multicast solicitation", r)
	}
	if r := n.Resolve(nk, []byte{2}, t0, false); r.Verdict != Queued || r.Solicit || r.Reason != OK {
		t.Fatalf("second packet: %+v, want queued, no new solicitation", r)
	}
	if r := n.Resolve(nk, []byte{3}, t0, false); r.Verdict != Queued || r.Reason != DropQueueFull {
		t.Fatalf("third packet over a queue of 2: %+v, want queued with the oldest dropped", r)
	}
	if sol, _ := n.Tick(t0.Add(500 * time.Millisecond)); len(sol) != 0 {
		t.Fatalf("retry before RetransTime: %v", sol)
	}
	if sol, _ := n.Tick(t0.Add(time.Second)); len(sol) != 1 || sol[0].Key != nk {
		t.Fatalf("retry after RetransTime: %v", sol)
	}
	q := n.Confirm(nk, nm, true, false, t0.Add(1500*time.Millisecond))
	if len(q) != 2 || q[0][0] != 2 || q[1][0] != 3 {
		t.Fatalf("released %v, want the packets 2 and 3 in order", q)
	}
	t1 := t0.Add(2 * time.Second)
	if r := n.Resolve(nk, []byte{4}, t1, false); r.Verdict != Send || r.MAC != nm || r.Solicit {
		t.Fatalf("reachable: %+v", r)
	}
	// Past ReachableTime: stale, still used, one unicast probe.
	t2 := t1.Add(30 * time.Second)
	if r := n.Resolve(nk, nil, t2, false); r.Verdict != Send || !r.Solicit || r.Unicast != nm {
		t.Fatalf("stale: %+v, want send with a unicast probe", r)
	}
	if r := n.Resolve(nk, nil, t2, false); r.Verdict != Send || r.Solicit {
		t.Fatalf("stale, probe pending: %+v", r)
	}
	if got := n.Dump(t2); len(got) != 1 || got[0].State != "stale" || got[0].MAC != nm.String() {
		t.Fatalf("dump: %+v", got)
	}
	// Past the grace period, never used again until a new answer.
	t3 := t1.Add(35 * time.Second)
	if r := n.Resolve(nk, []byte{5}, t3, false); r.Verdict != Queued || !r.Solicit || r.Unicast != (MAC{}) {
		t.Fatalf("stale beyond its grace: %+v, want queued and a multicast solicitation", r)
	}
	if r := n.Resolve(nk, []byte{6}, t3, false); r.Verdict != Queued {
		t.Fatalf("incomplete again: %+v", r)
	}
}

func TestNeighbourFailure(t *testing.T) {
	n, t0 := testNeighbours()
	n.Resolve(nk, []byte{1}, t0, false)
	n.Resolve(nk, []byte{2}, t0, false)
	total := 0
	var sols int
	for i := 1; i <= 3; i++ {
		sol, d := n.Tick(t0.Add(time.Duration(i) * time.Second))
		sols += len(sol)
		total += d
	}
	if sols != 2 || total != 2 {
		t.Fatalf("after 3 s: %d retries and %d drops, want 2 retries (3 probes in all) and the 2 queued packets dropped", sols, total)
	}
	tf := t0.Add(3 * time.Second)
	if r := n.Resolve(nk, []byte{3}, tf.Add(500*time.Millisecond), false); r.Verdict != Dropped || r.Reason != DropNeighbour {
		t.Fatalf("failed entry: %+v, want dropped", r)
	}
	if r := n.Resolve(nk, []byte{3}, tf.Add(time.Second), false); r.Verdict != Queued || !r.Solicit {
		t.Fatalf("failed entry after RetransTime: %+v, want a new resolution", r)
	}
}

func TestNeighbourLearning(t *testing.T) {
	n, t0 := testNeighbours()
	if q := n.Confirm(nk, nm, false, false, t0); q != nil || n.Len() != 0 {
		t.Fatal("news about an unknown neighbour created an entry without create")
	}
	n.Confirm(nk, nm, false, true, t0)
	if r := n.Resolve(nk, nil, t0, false); r.Verdict != Send || !r.Solicit || r.Unicast != nm {
		t.Fatalf("learned from a request: %+v, want stale: sent and probed", r)
	}
	n.Confirm(nk, nm, true, false, t0.Add(time.Second))
	n.Confirm(nk, nm2, false, false, t0.Add(2*time.Second)) // the address moved
	if got := n.Dump(t0.Add(2 * time.Second)); got[0].State != "stale" || got[0].MAC != nm2.String() {
		t.Fatalf("a new address must make the entry stale with it: %+v", got)
	}
}

func TestNeighbourTableBound(t *testing.T) {
	n, t0 := testNeighbours()
	for i := range 3 {
		k := NeighKey{Port: 1, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})}
		if r := n.Resolve(k, []byte{1}, t0, false); r.Verdict != Queued {
			t.Fatalf("entry %d: %+v", i, r)
		}
	}
	k := NeighKey{Port: 1, Addr: netip.MustParseAddr("10.0.0.9")}
	if r := n.Resolve(k, []byte{1}, t0, false); r.Verdict != Dropped || r.Reason != DropNeighbourTable {
		t.Fatalf("a full table of busy entries: %+v, want dropped", r)
	}
	if n.Len() != 3 {
		t.Fatalf("%d entries, want 3", n.Len())
	}
}

func TestNeighbourKernelMode(t *testing.T) {
	n, t0 := testNeighbours()
	if r := n.Resolve(nk, []byte{1}, t0, true); r.Verdict != Dropped || r.Solicit {
		t.Fatalf("kernel mode, no entry: %+v", r)
	}
	n.SetKernel(nk, nm, true)
	if r := n.Resolve(nk, nil, t0.Add(time.Hour), true); r.Verdict != Send || r.MAC != nm {
		t.Fatalf("kernel entry: %+v", r)
	}
	n.SetKernel(nk, MAC{}, false)
	if r := n.Resolve(nk, nil, t0, true); r.Verdict != Dropped {
		t.Fatalf("removed kernel entry: %+v", r)
	}
}
