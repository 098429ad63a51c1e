package route

import (
	"errors"
	"net/netip"
	"testing"
)

// FuzzOperations decodes the input as a sequence of operations on a small
// prefix universe (so that prefixes nest and repeat) and runs them on a table
// and on the brute-force reference, valid and invalid alike: the table must
// accept exactly what Validate accepts, refuse the rest with ErrInvalid or
// ErrNotFound without changing, and always answer like the reference.
//
// Each operation takes 4 bytes: op, address byte, length byte, next-hop
// byte. op%4: 0, 1 add; 2 delete; 3 resync to the routes kept so far minus
// one. The next-hop byte gives the port (may be 0 or unknown: invalid), the
// weight (may be 0: invalid) and whether there is a gateway; the length may
// exceed the family's width and the address may have host bits (invalid).
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 10, 8, 0x11, 0, 10, 16, 0x22, 2, 10, 8, 0, 1, 0x80, 64, 0x33})
	f.Add([]byte{0, 0, 0, 0x11, 3, 0, 0, 0, 0, 1, 33, 0x11, 1, 2, 129, 0x44})
	f.Add([]byte{0, 10, 8, 0x00, 0, 10, 8, 0x90, 2, 11, 8, 0, 3, 0, 0, 0, 0, 10, 9, 0x17})
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := New(1, Options{PortOK: func(p uint32) bool { return p <= 6 }, ReuseAfter: 2})
		if err != nil {
			t.Fatal(err)
		}
		ref := newReference()
		var addrs []netip.Addr
		for i := 0; i+4 <= len(data) && i < 4*64; i += 4 {
			op, ab, lb, hb := data[i], data[i+1], data[i+2], data[i+3]
			r := fuzzRoute(ab, lb, hb)
			addrs = append(addrs, r.Prefix.Addr())
			switch op % 4 {
			case 0, 1:
				want := Validate(&r, 1, tb.opts.PortOK)
				err := tb.Add(r)
				if (err == nil) != (want == nil) || err != nil && !errors.Is(err, ErrInvalid) {
					t.Fatalf("Add(%v) = %v, Validate says %v", r, err, want)
				}
				if err == nil {
					ref.routes[r.Prefix] = r.Clone()
				}
			case 2:
				_, present := ref.routes[r.Prefix]
				err := tb.Delete(r.Prefix)
				switch {
				case present && err != nil:
					t.Fatalf("Delete(%v) of a present route: %v", r.Prefix, err)
				case !present && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid):
					t.Fatalf("Delete(%v) of an absent route: %v", r.Prefix, err)
				}
				delete(ref.routes, r.Prefix)
			case 3:
				rs := ref.sorted()
				if len(rs) > 0 {
					rs = append(rs[:int(ab)%len(rs)], rs[int(ab)%len(rs)+1:]...)
				}
				mustOK(t, tb.Replace(rs))
				ref = newReference()
				for _, r := range rs {
					ref.routes[r.Prefix] = r
				}
			}
		}
		checkTable(t, tb, ref, nil, addrs)
	})
}

// fuzzRoute builds a route, valid or not, from three bytes.
func fuzzRoute(ab, lb, hb byte) Route {
	v4 := ab&0x80 == 0
	var p netip.Prefix
	if v4 {
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, ab & 0x7f, ab << 4, 0}), int(lb%40))
	} else {
		p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, ab & 0x7f, ab << 4}), int(lb%140))
	}
	if lb&0x80 == 0 {
		p = p.Masked() // else maybe host bits set, or an invalid length
	}
	h := NextHop{Port: uint32(hb & 7), Weight: uint32(hb >> 4 & 3)}
	if hb&8 != 0 {
		if v4 {
			h.Gateway = netip.AddrFrom4([4]byte{192, 0, 2, hb})
		} else {
			h.Gateway = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: hb})
		}
	}
	return Route{Table: 1, Prefix: p, NextHops: []NextHop{h}, Source: SourceStatic}
}
