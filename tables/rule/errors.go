package rule

import "fmt"

// Kind is why the switch refused a request: one value per condition the
// model distinguishes. Each control protocol maps kinds onto its own
// codes (controlproto/openflow onto OFPT_ERROR type and code,
// controlproto/p4rt onto gRPC status codes); the model never sees them.
//
// A Kind is an error itself, so errors.Is(err, rule.GroupExists) tests an
// *Error's kind.
type Kind uint8

// The kinds. tables/flow's typed errors (flow.ErrOverlap,
// flow.ErrTableFull, flow.MatchError) are protocol free already and pass
// through a switch unchanged; the kinds below are the model's own.
const (
	// KindNone is the zero Kind; no error carries it.
	KindNone Kind = iota

	// Flow entries.
	BadFlowCommand // a FlowMod command the model does not have
	BadTable       // a table id beyond the switch's tables
	BadGoto        // goto-table that does not go forward
	BadSetField    // set-field on a field this switch cannot write

	// Ports.
	NoSuchPort // a port number the switch does not have

	// Groups.
	BadGroupCommand // a GroupMod command the model does not have
	GroupExists     // add of a group id in use
	UnknownGroup    // modify of a group that does not exist
	InvalidGroup    // a reserved group id, or an indirect group without exactly one unweighted bucket
	BadGroupType    // a group type the model does not have
	OutOfGroups     // the group table holds its maximum of that type
	OutOfBuckets    // more buckets than a group may have
	BadWatch        // a watched port or group that is not valid or does not exist
	GroupLoop       // a group would reach itself through its buckets
	ChainedGroup    // deleting a group another group forwards to or watches
	DanglingGroup   // a group action names a group that does not exist

	// Meters.
	BadMeterCommand // a MeterMod command the model does not have
	MeterExists     // add of a meter id in use
	UnknownMeter    // modify of, or a meter instruction naming, a meter that does not exist
	InvalidMeter    // meter id 0, or a reserved meter id
	BadMeterFlags   // unknown flag bits, or kb/s and packets/s together
	OutOfMeters     // the meter table holds its maximum
	OutOfBands      // more bands than a meter may have
	BadBand         // a band type the model does not have
	BadRate         // a band of rate 0
	BadBandValue    // a DSCP-remark band's precedence level out of 1..63
	BadBurst        // a burst size over the table's bound

	numKinds
)

var kindNames = [numKinds]string{
	KindNone: "no error", BadFlowCommand: "bad flow command", BadTable: "bad table",
	BadGoto: "bad goto-table", BadSetField: "unsupported set-field", NoSuchPort: "no such port",
	BadGroupCommand: "bad group command", GroupExists: "group exists", UnknownGroup: "unknown group",
	InvalidGroup: "invalid group", BadGroupType: "bad group type", OutOfGroups: "out of groups",
	OutOfBuckets: "out of buckets", BadWatch: "bad watch", GroupLoop: "group loop",
	ChainedGroup: "chained group", DanglingGroup: "group action to a missing group",
	BadMeterCommand: "bad meter command", MeterExists: "meter exists", UnknownMeter: "unknown meter",
	InvalidMeter: "invalid meter", BadMeterFlags: "bad meter flags", OutOfMeters: "out of meters",
	OutOfBands: "out of bands", BadBand: "bad band", BadRate: "bad rate",
	BadBandValue: "bad band value", BadBurst: "bad burst",
}

// String returns the kind's name in words.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// Error returns the kind's name, so that a Kind is an error errors.Is can
// look for.
func (k Kind) Error() string { return "rule: " + k.String() }

// Kinds returns every kind, for tests that check a protocol maps them all.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := KindNone + 1; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Error is a refusal of the model: its Kind, which protocols map to their
// codes, and a human-readable detail for logs and the protocols' error
// texts.
type Error struct {
	Kind   Kind
	Detail string
}

// Errorf returns an *Error of kind k.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...)}
}

// Error returns "rule: kind: detail".
func (e *Error) Error() string { return fmt.Sprintf("rule: %s: %s", e.Kind.String(), e.Detail) }

// Is reports whether target is e's Kind, or an *Error of the same kind.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Kind:
		return t == e.Kind
	case *Error:
		return t.Kind == e.Kind
	}
	return false
}

// asError returns e as an error: nil for a nil *Error (a nil *Error in an
// error interface would not compare equal to nil).
func asError(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}
