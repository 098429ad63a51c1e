package kernelfib

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/tables/route"
)

// FuzzUpdates decodes the input into a sequence of route messages as the
// kernel could send them, well-formed or not (families, types, TOS,
// destinations and gateways of any length, multipath lists, flags), and
// applies them to a mirror's state and route table. Nothing may panic, and
// after every message the route table must hold, for every prefix, exactly
// the route the mirror's state says (the lowest-metric kernel route when all
// its next hops are on ports), and nothing else from the kernel.
func FuzzUpdates(f *testing.F) {
	f.Add([]byte{0, 2, 1, 0, 4, 10, 0, 0, 0, 8, 4, 192, 0, 2, 1, 1, 0, 1, 3, 2, 1, 0, 4, 10, 0, 0, 0, 8, 0, 0})
	f.Add([]byte{0, 10, 1, 0, 16, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48, 0, 2, 2, 2, 16, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{1, 2, 7, 3, 4, 10, 1, 2, 3, 33, 4, 0, 0, 0, 0, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, tb := portsMirror(t)
		r := &reader{b: data}
		for n := 0; n < 32 && !r.done(); n++ {
			u := r.update()
			m.update(u)
			for p, l := range m.byPrefix {
				want, ok := m.desired(p)
				got, have := tb.Get(p)
				switch {
				case ok && (!have || !got.Route.Equal(want)):
					// A route the table refuses (an invalid gateway) is
					// rejected and counted, leaving the table as it was.
					if route.Validate(&want, testTable, nil) == nil {
						t.Fatalf("message %d: %v: table holds %v, state says %v (%d kernel routes)", n, p, got, want, len(l))
					}
				case !ok && have && got.Source == route.SourceKernel:
					t.Fatalf("message %d: %v: table holds %v, the state none", n, p, got)
				}
			}
			for _, rt := range tb.Routes() {
				if len(m.byPrefix[rt.Prefix]) == 0 {
					t.Fatalf("message %d: table holds %v with no kernel route", n, rt)
				}
			}
		}
	})
}

// reader takes fields from the fuzz input, zero when it runs out.
type reader struct {
	b []byte
	i int
}

func (r *reader) done() bool { return r.i >= len(r.b) }

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) bytes() []byte {
	n := int(r.byte())
	if n > 17 {
		n %= 18
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = r.byte()
	}
	return out
}

func (r *reader) update() netlink.RouteUpdate {
	var u netlink.RouteUpdate
	op := r.byte()
	u.Type = unix.RTM_NEWROUTE
	if op&1 != 0 {
		u.Type = unix.RTM_DELROUTE
	}
	u.NlFlags = uint16(op>>1) & (unix.NLM_F_REPLACE | unix.NLM_F_APPEND | unix.NLM_F_CREATE | unix.NLM_F_EXCL)
	u.Family = int(r.byte())
	if u.Family%3 == 0 {
		u.Family = unix.AF_INET
	} else if u.Family%3 == 1 {
		u.Family = unix.AF_INET6
	}
	u.Table = testTable
	u.Route.Type = unix.RTN_UNICAST
	if b := r.byte(); b%8 == 7 {
		u.Route.Type, u.Tos = int(b%12), int(b>>7)
	}
	if ip := r.bytes(); len(ip) > 0 {
		u.Dst = &net.IPNet{IP: ip, Mask: net.CIDRMask(int(r.byte()), len(ip)*8)}
	}
	u.Priority = int(r.byte() % 3)
	u.LinkIndex = int(r.byte() % 5)
	if gw := r.bytes(); len(gw) > 0 {
		u.Gw = gw
	}
	for k := int(r.byte() % 4); k > 1; k-- {
		u.MultiPath = append(u.MultiPath, &netlink.NexthopInfo{LinkIndex: int(r.byte() % 5), Hops: int(r.byte()), Gw: r.bytes()})
	}
	return u
}

// TestReplayOnDump: the changes a session read while its dump loaded are
// applied on top of the dump, which may already hold them. A route added
// before the dump was taken and deleted after it arrives as an add (of a
// route the dump holds) and then a delete: the mirror and the route table
// must end without it, as the kernel does (an add of an IPv4 alias the
// mirror holds is not a second alias: the kernel refuses those). And an
// alias the dump lacks is still added, in the kernel's order.
func TestReplayOnDump(t *testing.T) {
	m, tb := portsMirror(t)
	msg := func(typ uint16, flags uint16, dst string, link int, gw string) netlink.RouteUpdate {
		_, n, err := net.ParseCIDR(dst)
		if err != nil {
			t.Fatal(err)
		}
		u := netlink.RouteUpdate{Type: typ, NlFlags: flags}
		u.Family, u.Table, u.Route.Type = unix.AF_INET, testTable, unix.RTN_UNICAST
		u.Dst, u.LinkIndex, u.Gw = n, link, net.ParseIP(gw)
		return u
	}
	const add = unix.NLM_F_CREATE | unix.NLM_F_EXCL // what the kernel reports for "ip route add"
	x := msg(unix.RTM_NEWROUTE, add, "20.13.103.0/24", 1, "10.255.1.2")
	// The dump, as resync loads it.
	kr, ok := m.convert(&x.Route)
	if !ok {
		t.Fatal("the route did not convert")
	}
	m.appendRoute(kr)
	m.reconcile(kr.key.prefix)
	if _, have := tb.Get(kr.key.prefix); !have {
		t.Fatal("the dump's route is not in the table")
	}
	// The replayed changes: the add the dump had caught, then the delete.
	m.update(x)
	if l := m.byPrefix[kr.key.prefix]; len(l) != 1 {
		t.Fatalf("%d aliases after the replayed add, want 1", len(l))
	}
	m.update(msg(unix.RTM_DELROUTE, 0, "20.13.103.0/24", 1, "10.255.1.2"))
	if l := m.byPrefix[kr.key.prefix]; len(l) != 0 {
		t.Fatalf("%d aliases after the delete, want none", len(l))
	}
	if r, have := tb.Get(kr.key.prefix); have {
		t.Fatalf("the table holds %v after the kernel deleted it", r)
	}
	// Two aliases of one prefix and metric (ip route add, then ip route
	// append through another gateway): both kept, the first in use.
	m.update(x)
	m.update(msg(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, "20.13.103.0/24", 2, "10.255.2.2"))
	if l := m.byPrefix[kr.key.prefix]; len(l) != 2 || l[0].hops[0].ifindex != 1 || l[1].hops[0].ifindex != 2 {
		t.Fatalf("aliases %+v, want the route through link 1 then link 2", l)
	}
	if r, _ := tb.Get(kr.key.prefix); len(r.Route.NextHops) != 1 || r.Route.NextHops[0].Port != 1 {
		t.Fatalf("the table holds %v, want the first alias (port 1)", r)
	}
}

// portsMirror returns a mirror of testTable, not running, into a route
// table of its own, with links 1 to 3 on gswitch ports 1 to 3.
func portsMirror(t *testing.T) (*Mirror, *route.Table) {
	t.Helper()
	tb, err := route.New(testTable, route.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Table: testTable, PortOf: func(i int) (uint32, bool) { return uint32(i), i >= 1 && i <= 3 }}, tb)
	if err != nil {
		t.Fatal(err)
	}
	return m, tb
}
