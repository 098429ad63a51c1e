package flow

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns for a bad match wraps
// ErrBadMatch and one of the more precise ones, which map onto OpenFlow's
// OFPET_BAD_MATCH codes; table errors map onto OFPET_FLOW_MOD_FAILED codes.
var (
	// ErrBadMatch is wrapped by every error about a match.
	ErrBadMatch = errors.New("bad match")
	// ErrBadField: an unknown field, or mask bits where no field lives (OFPBMC_BAD_FIELD).
	ErrBadField = errors.New("unknown field")
	// ErrBadLength: a value or mask of the wrong length (OFPBMC_BAD_LEN).
	ErrBadLength = errors.New("bad length")
	// ErrBadValue: a value with bits beyond the field's width, or unparsable (OFPBMC_BAD_VALUE).
	ErrBadValue = errors.New("bad value")
	// ErrBadMask: a mask with bits beyond the field's width (OFPBMC_BAD_MASK).
	ErrBadMask = errors.New("bad mask")
	// ErrBadWildcards: value bits where the mask is 0 (OFPBMC_BAD_WILDCARDS).
	ErrBadWildcards = errors.New("value bits outside the mask")
	// ErrBadPrereq: a field's prerequisites are not met (OFPBMC_BAD_PREREQ).
	ErrBadPrereq = errors.New("prerequisite not met")
	// ErrDupField: a field given twice (OFPBMC_DUP_FIELD), from ParseMatch.
	ErrDupField = errors.New("duplicate field")

	// ErrOverlap: Add with CheckOverlap found a rule of the same priority
	// that some packet matches together with the new one (OFPFMFC_OVERLAP).
	ErrOverlap = errors.New("overlapping rule of the same priority")
	// ErrTableFull: the table holds Config.MaxEntries rules (OFPFMFC_TABLE_FULL).
	ErrTableFull = errors.New("table full")
	// ErrBadConfig: NewTable was given an impossible configuration.
	ErrBadConfig = errors.New("bad table configuration")
)

// NoField is the Field of a MatchError that concerns no single field.
const NoField Field = 255

// MatchError is an error about a match: which field, which kind (one of the
// sentinels above) and a human-readable detail. errors.Is matches both its
// kind and ErrBadMatch.
type MatchError struct {
	Field  Field
	Err    error
	Detail string
}

// Error returns "field: detail".
func (e *MatchError) Error() string {
	if e.Field == NoField {
		return e.Detail
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Detail)
}

// Unwrap returns the error's kind and ErrBadMatch.
func (e *MatchError) Unwrap() []error { return []error{e.Err, ErrBadMatch} }

// OverlapError is returned by Add with CheckOverlap: it names the existing
// rule that overlaps. It wraps ErrOverlap.
type OverlapError struct {
	ID       RuleID
	Priority uint16
}

// Error describes the overlap.
func (e *OverlapError) Error() string {
	return fmt.Sprintf("%v: rule %d at priority %d", ErrOverlap, e.ID, e.Priority)
}

// Unwrap returns ErrOverlap.
func (e *OverlapError) Unwrap() error { return ErrOverlap }
