package flow

import (
	"cmp"
	"slices"
)

// BruteForce returns the best rule matching k by scanning every rule:
// rules[i] is the rule with id i, ranked by Rank. It is the reference the
// classifiers are checked against.
func BruteForce(rules []Rule, k *Key) RuleID {
	var best uint64
	for i := range rules {
		r := &rules[i]
		if rk := Rank(r.Priority, RuleID(i)); rk > best && r.Match.Matches(k) {
			best = rk
		}
	}
	if best == 0 {
		return NoMatch
	}
	return RankID(best)
}

// BruteForceAll appends every rule matching k to dst, best first, and
// returns it.
func BruteForceAll(rules []Rule, k *Key, dst []RuleID) []RuleID {
	start := len(dst)
	for i := range rules {
		if rules[i].Match.Matches(k) {
			dst = append(dst, RuleID(i))
		}
	}
	slices.SortFunc(dst[start:], func(a, b RuleID) int {
		return cmp.Compare(Rank(rules[b].Priority, b), Rank(rules[a].Priority, a))
	})
	return dst
}
