package lpm

import (
	"fmt"
	"net/netip"
)

// Reference is a trivially correct longest-prefix match for checking Table:
// one map per prefix length, and a lookup that tries every length from the
// longest to the shortest. It shares no code with Table but the prefix
// validation rules.
type Reference struct {
	fam    Family
	byLen  []map[netip.Prefix]uint32
	length int
}

// NewReference returns an empty reference of family fam.
func NewReference(fam Family) *Reference {
	r := &Reference{fam: fam, byLen: make([]map[netip.Prefix]uint32, fam.Width()+1)}
	for l := range r.byLen {
		r.byLen[l] = make(map[netip.Prefix]uint32)
	}
	return r
}

func (r *Reference) check(p netip.Prefix) error {
	switch {
	case !p.IsValid() || r.fam.Width() == 0:
		return fmt.Errorf("%w: %v", ErrInvalidPrefix, p)
	case familyOf(p.Addr()) != r.fam:
		return fmt.Errorf("%w: %v", ErrFamily, p)
	case p.Masked() != p:
		return fmt.Errorf("%w: %v has host bits set", ErrInvalidPrefix, p)
	}
	return nil
}

// Insert adds p -> nh or changes p's next hop.
func (r *Reference) Insert(p netip.Prefix, nh uint32) error {
	if err := r.check(p); err != nil {
		return err
	}
	if err := checkNextHop(nh); err != nil {
		return err
	}
	m := r.byLen[p.Bits()]
	if _, ok := m[p]; !ok {
		r.length++
	}
	m[p] = nh
	return nil
}

// Delete removes p.
func (r *Reference) Delete(p netip.Prefix) error {
	if err := r.check(p); err != nil {
		return err
	}
	m := r.byLen[p.Bits()]
	if _, ok := m[p]; !ok {
		return fmt.Errorf("%w: %v", ErrNotFound, p)
	}
	delete(m, p)
	r.length--
	return nil
}

// Lookup returns the next hop of the longest prefix containing a.
func (r *Reference) Lookup(a netip.Addr) (uint32, bool) {
	if !a.IsValid() || familyOf(a) != r.fam {
		return 0, false
	}
	a = a.WithZone("")
	for l := len(r.byLen) - 1; l >= 0; l-- {
		if len(r.byLen[l]) == 0 {
			continue
		}
		p, _ := a.Prefix(l)
		if nh, ok := r.byLen[l][p]; ok {
			return nh, true
		}
	}
	return 0, false
}

// Len returns the number of prefixes.
func (r *Reference) Len() int { return r.length }
