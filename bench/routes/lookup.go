package routes

// Looking up on the Engine (engineLookup), the reference the lookups are
// checked against (routeRef), the paced updater, and the printing of a
// Result.

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// waitVisible polls the Engine until its answer for a is (present) or is no
// longer (absent) the route of p, or the timeout passes.
func waitVisible(look *engineLookup, tb *route.Table, a netip.Addr, p netip.Prefix, present bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		e := tb.Entry(look.one(a))
		if (e != nil && e.Prefix == p) == present {
			return true
		}
		if i%1024 == 1023 && time.Now().After(deadline) {
			return false
		}
	}
}

type paceResult struct {
	n   int
	d   time.Duration
	err error
}

// paceRoutes applies trace entries through src at rate per second until
// stop is closed: every tick, the entries due by then as one batch (one
// route.Table.Update through the direct source), as a routing daemon hands
// over the changes it has. At rate 0 it only ticks.
func paceRoutes(src routeSource, trace []lpm.Update, rate int, tick time.Duration, stop <-chan struct{}) paceResult {
	start := time.Now()
	n := 0
	var batch []route.Change
	for {
		select {
		case <-stop:
			return paceResult{n, time.Since(start), nil}
		default:
		}
		due := min(int(time.Since(start).Seconds()*float64(rate)), len(trace))
		if rate > 0 && due == n && n == len(trace) {
			return paceResult{n, time.Since(start), fmt.Errorf("bench routes: update trace exhausted after %d updates", n)}
		}
		if due > n {
			batch = batch[:0]
			for _, u := range trace[n:due] {
				batch = append(batch, route.Change{Route: benchRoute(u.Prefix, u.NextHop), Delete: u.Withdraw})
			}
			if err := src.update(batch); err != nil {
				return paceResult{n, time.Since(start), fmt.Errorf("bench routes: updates %d to %d: %w", n, due-1, err)}
			}
			n = due
		}
		time.Sleep(tick)
	}
}

// routeRef is the brute-force reference: the routes by prefix, looked up by
// trying every length from the longest.
type routeRef struct{ m map[netip.Prefix]route.Route }

func newRouteRef(m map[netip.Prefix]route.Route) *routeRef { return &routeRef{m: m} }

func (rr *routeRef) lookup(a netip.Addr) (route.Route, bool) {
	for l := a.BitLen(); l >= 0; l-- {
		p, _ := a.Prefix(l)
		if r, ok := rr.m[p]; ok {
			return r, true
		}
	}
	return route.Route{}, false
}

func (rr *routeRef) apply(u lpm.Update) {
	if u.Withdraw {
		delete(rr.m, u.Prefix)
		return
	}
	rr.m[u.Prefix] = benchRoute(u.Prefix, u.NextHop)
}

// addrFor returns an address inside p that no longer prefix in the
// reference covers, so that p's route answers for it once added.
func (rr *routeRef) addrFor(p netip.Prefix, rng *rand.Rand) (netip.Addr, bool) {
	for range 20 {
		a := randomIn(p, rng)
		found := false
		for l := a.BitLen(); l > p.Bits(); l-- {
			q, _ := a.Prefix(l)
			if _, ok := rr.m[q]; ok {
				found = true
				break
			}
		}
		if !found {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func randomIn(p netip.Prefix, rng *rand.Rand) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// sameNextHops compares two routes' next hops in any order.
func sameNextHops(a, b route.Route) bool {
	key := func(r route.Route) []string {
		var s []string
		for _, h := range r.NextHops {
			s = append(s, h.String())
		}
		slices.Sort(s)
		return s
	}
	return a.Prefix == b.Prefix && slices.Equal(key(a), key(b))
}

// engineLookup looks addresses up on the Engine's table of one family.
type engineLookup struct {
	eng *gpu.Engine
	id  gpu.TableID
	fam lpm.Family
	v4  []uint32
	v6  []lpm.Addr6
	out []uint32
	// pipeDepth > 0 (the GPU backend): rate submits the traffic from
	// pinned batches, at most pipeDepth in flight, as the datapath feeds
	// the GPU (bench lpm's pipe), instead of copying every batch of keys in
	// and every batch of results out through the slice API. Those copies
	// were half the lookup goroutine's time, and the updater's own memory
	// traffic slowed them.
	pipeDepth int
	pipe      *benchutil.Pipe
}

func newEngineLookup(eng *gpu.Engine, id gpu.TableID, fam lpm.Family) *engineLookup {
	return &engineLookup{eng: eng, id: id, fam: fam, out: make([]uint32, 1)}
}

func (l *engineLookup) setTraffic(addrs []netip.Addr) {
	l.v4, l.v6 = nil, nil
	for _, a := range addrs {
		if l.fam == lpm.IPv4 {
			b := a.As4()
			l.v4 = append(l.v4, uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
		} else {
			l.v6 = append(l.v6, benchutil.Addr6(a))
		}
	}
	l.out = make([]uint32, len(addrs))
	if l.pipe != nil {
		l.pipe.Free()
		l.pipe = nil
	}
}

// close frees the pipe's pinned batches.
func (l *engineLookup) close() {
	if l.pipe != nil {
		l.pipe.Free()
		l.pipe = nil
	}
}

// one looks a up alone (the latency probe); 0 on an engine error.
func (l *engineLookup) one(a netip.Addr) uint32 {
	var out [1]uint32
	var err error
	if l.fam == lpm.IPv4 {
		b := a.As4()
		err = l.eng.LookupLPM4(l.id, []uint32{uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])}, out[:])
	} else {
		err = l.eng.LookupLPM6(l.id, []lpm.Addr6{benchutil.Addr6(a)}, out[:])
	}
	if err != nil {
		return 0
	}
	return out[0]
}

// rate looks the traffic up in batches for d and returns lookups/s.
func (l *engineLookup) rate(d time.Duration, batch int) float64 {
	if l.pipeDepth > 0 {
		return l.pipeRate(d, batch)
	}
	n := len(l.out)
	start := time.Now()
	total := 0
	for k, i := 0, 0; ; k++ {
		j := min(i+batch, n)
		if l.v4 != nil {
			_ = l.eng.LookupLPM4(l.id, l.v4[i:j], l.out[i:j])
		} else {
			_ = l.eng.LookupLPM6(l.id, l.v6[i:j], l.out[i:j])
		}
		total += j - i
		if i = j; i == n {
			i = 0
		}
		if k%64 == 63 && time.Since(start) >= d {
			break
		}
	}
	return float64(total) / time.Since(start).Seconds()
}

// pipeRate is rate through pinned batches (see pipeDepth); 0 on an error.
func (l *engineLookup) pipeRate(d time.Duration, batch int) float64 {
	if l.pipe == nil {
		p, err := benchutil.NewAddrPipe(l.eng, l.id, l.v4, l.v6, batch, l.pipeDepth)
		if err != nil {
			return 0
		}
		l.pipe = p
	}
	done, took, _, err := l.pipe.Run(0, time.Now().Add(d), nil)
	if err != nil || took <= 0 {
		return 0
	}
	return float64(done) / took.Seconds()
}

// check compares the Engine's answers (slot -> entry -> route) with the
// reference.
func (l *engineLookup) check(tb *route.Table, ref *routeRef, addrs []netip.Addr, stderr io.Writer) (checked, mismatches int) {
	for _, a := range addrs {
		want, wok := ref.lookup(a)
		e := tb.Entry(l.one(a))
		ok := e != nil && e.Covers(a)
		if ok != wok || ok && !sameNextHops(e.Route, want) {
			if mismatches < 5 {
				fmt.Fprintf(stderr, "bench routes: %v: engine %v, reference %v (%v)\n", a, e, want, wok)
			}
			mismatches++
		}
		checked++
	}
	return checked, mismatches
}
