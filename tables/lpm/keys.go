package lpm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Family is an address family: IPv4 or IPv6. Its value is the IP version.
type Family uint8

// The two address families a table can hold.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String returns "IPv4", "IPv6" or "Family(n)".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("Family(%d)", uint8(f))
}

// Width returns the address width in bits (32 or 128), or 0 for an unknown
// family.
func (f Family) Width() int {
	switch f {
	case IPv4:
		return 32
	case IPv6:
		return 128
	}
	return 0
}

// Errors returned by the package, wrapped with the offending value; test them
// with errors.Is.
var (
	// ErrInvalidPrefix: the prefix is not valid or has host bits set.
	ErrInvalidPrefix = errors.New("invalid prefix")
	// ErrFamily: the prefix or address is of the other family, or the family
	// is unknown.
	ErrFamily = errors.New("wrong address family")
	// ErrNextHop: the next hop is 0 or does not fit the 24-bit entry field.
	ErrNextHop = errors.New("next hop out of range 1..2^24-1")
	// ErrNotFound: Delete of a prefix the table does not hold.
	ErrNotFound = errors.New("prefix not found")
	// ErrOptions: an option is out of range or the options contradict each
	// other.
	ErrOptions = errors.New("invalid options")
	// ErrTooLarge: the strides would make a level larger than the encoding
	// allows (2^24 nodes, 2^28 words per level).
	ErrTooLarge = errors.New("table too large for the encoding")
	// ErrFull: the next-hop table has no free index left.
	ErrFull = errors.New("next-hop table full")
)

// MaxNextHop is the largest next-hop index an entry can hold (24 bits).
const MaxNextHop = 1<<24 - 1

// pkey is a prefix in the form the table works with: the address left-aligned
// in 128 bits (an IPv4 address occupies the top 32 bits of hi), masked to its
// length l.
type pkey struct {
	hi, lo uint64
	l      uint8
}

// addrBits returns a's bits left-aligned in 128 bits. (AsSlice, unlike As16
// copied into a local array, lets the compiler forward its stores to the two
// loads; the difference is about 10 ns a call.)
func addrBits(a netip.Addr) (hi, lo uint64) {
	s := a.AsSlice()
	if len(s) == 4 {
		return uint64(binary.BigEndian.Uint32(s)) << 32, 0
	}
	if len(s) != 16 {
		return 0, 0 // the zero Addr
	}
	return binary.BigEndian.Uint64(s[:8]), binary.BigEndian.Uint64(s[8:])
}

// maskBits clears every bit of (hi, lo) from bit l on.
func maskBits(hi, lo uint64, l int) (uint64, uint64) {
	switch {
	case l <= 0:
		return 0, 0
	case l < 64:
		return hi &^ (^uint64(0) >> l), 0
	case l == 64:
		return hi, 0
	case l < 128:
		return hi, lo &^ (^uint64(0) >> (l - 64))
	}
	return hi, lo
}

// window returns the 64 address bits that start at bit off (0 <= off < 128).
func window(hi, lo uint64, off int) uint64 {
	switch {
	case off == 0:
		return hi
	case off < 64:
		return hi<<off | lo>>(64-off)
	}
	return lo << (off - 64)
}

// chunk returns the s address bits that start at bit off (1 <= s <= 32).
func chunk(hi, lo uint64, off, s int) uint32 {
	return uint32(window(hi, lo, off) >> (64 - s))
}

// familyOf returns the family of a valid address; an IPv4-mapped IPv6 address
// is IPv6.
func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// keyOf validates p for a table of family fam and returns its key.
func keyOf(fam Family, p netip.Prefix) (pkey, error) {
	if !p.IsValid() {
		return pkey{}, fmt.Errorf("%w: %v", ErrInvalidPrefix, p)
	}
	if familyOf(p.Addr()) != fam {
		return pkey{}, fmt.Errorf("%w: %v in an %v table", ErrFamily, p, fam)
	}
	if p.Masked() != p || p.Addr().Zone() != "" {
		return pkey{}, fmt.Errorf("%w: %v has host bits set", ErrInvalidPrefix, p)
	}
	hi, lo := addrBits(p.Addr())
	return pkey{hi: hi, lo: lo, l: uint8(p.Bits())}, nil
}

// truncate returns k cut to its first l bits (l <= k.l).
func (k pkey) truncate(l int) pkey {
	hi, lo := maskBits(k.hi, k.lo, l)
	return pkey{hi: hi, lo: lo, l: uint8(l)}
}

// prefix returns k as a netip.Prefix of family fam.
func (k pkey) prefix(fam Family) netip.Prefix {
	if fam == IPv4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(k.hi>>32))
		return netip.PrefixFrom(netip.AddrFrom4(b), int(k.l))
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), int(k.l))
}

// checkNextHop reports whether nh fits an entry.
func checkNextHop(nh uint32) error {
	if nh == 0 || nh > MaxNextHop {
		return fmt.Errorf("%w: %d", ErrNextHop, nh)
	}
	return nil
}
