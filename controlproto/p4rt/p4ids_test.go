package p4rt

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// p4cNameID is p4c's id for a P4 object without an @id annotation: the
// resource type's 8-bit prefix and the low 24 bits of the Jenkins
// one-at-a-time hash of its fully qualified name (p4c's
// control-plane/p4RuntimeSymbolTable.cpp, computeIdsForSymbols; collisions
// are probed linearly, which gswitch's few names do not hit).
func p4cNameID(prefix uint32, name string) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h += uint32(name[i])
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return prefix<<24 | h&0xffffff
}

// p4Annotated is what gswitch.p4 declares with @id annotations: the id of
// each table, action, direct counter and controller header by P4Info
// name, and the ids of their fields and params by name.
type p4Annotated struct {
	ids    map[string]uint32
	fields map[string]map[string]uint32 // table / action / header name → field, param or metadata name → id
	kinds  map[string]map[string]string // table → field → match kind
	refs   map[string][]string          // table → its actions, by P4Info name
}

func parseAnnotations(t *testing.T, src string) *p4Annotated {
	t.Helper()
	num := func(s string) uint32 {
		v, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			t.Fatalf("@id(%s): %v", s, err)
		}
		return uint32(v)
	}
	a := &p4Annotated{ids: map[string]uint32{}, fields: map[string]map[string]uint32{}, kinds: map[string]map[string]string{}, refs: map[string][]string{}}
	const ctl = "GswitchIngress."
	for _, m := range regexp.MustCompile(`@id\((0x[0-9a-fA-F]+)\)\s+direct_counter\([^)]*\)\s+(\w+);`).FindAllStringSubmatch(src, -1) {
		a.ids[ctl+m[2]] = num(m[1])
	}
	param := regexp.MustCompile(`@id\((\d+)\)\s+[\w<>]+\s+(\w+)`)
	for _, m := range regexp.MustCompile(`@id\((0x[0-9a-fA-F]+)\)\s+action\s+(\w+)\(((?:[^()]|\([^()]*\))*)\)`).FindAllStringSubmatch(src, -1) {
		name := ctl + m[2]
		a.ids[name] = num(m[1])
		a.fields[name] = map[string]uint32{}
		for _, p := range param.FindAllStringSubmatch(m[3], -1) {
			a.fields[name][p[2]] = num(p[1])
		}
	}
	meta := regexp.MustCompile(`@id\((\d+)\)\s+[\w<>]+\s+(\w+);`)
	for _, m := range regexp.MustCompile(`@controller_header\("(\w+)"\)\s+@id\((0x[0-9a-fA-F]+)\)\s+header\s+\w+\s+\{([^}]*)\}`).FindAllStringSubmatch(src, -1) {
		a.ids[m[1]] = num(m[2])
		a.fields[m[1]] = map[string]uint32{}
		for _, f := range meta.FindAllStringSubmatch(m[3], -1) {
			a.fields[m[1]][f[2]] = num(f[1])
		}
	}
	key := regexp.MustCompile(`([\w.]+):\s*(\w+)(?:\s+@name\("(\w+)"\))?\s+@id\((\d+)\);`)
	for _, m := range regexp.MustCompile(`(?s)@id\((0x[0-9a-fA-F]+)\)\s+table\s+(\w+)\s+\{\s*key = \{(.*?)\}\s*actions = \{([^}]*)\}`).FindAllStringSubmatch(src, -1) {
		name := ctl + m[2]
		a.ids[name] = num(m[1])
		a.fields[name], a.kinds[name] = map[string]uint32{}, map[string]string{}
		for _, k := range key.FindAllStringSubmatch(m[3], -1) {
			fname := k[1]
			if k[3] != "" {
				fname = k[3]
			}
			a.fields[name][fname] = num(k[4])
			a.kinds[name][fname] = strings.ToUpper(k[2])
		}
		for _, act := range strings.Split(m[4], ";") {
			act = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(act), "@defaultonly"))
			if act == "" {
				continue
			}
			if act != "NoAction" {
				act = ctl + act
			}
			a.refs[name] = append(a.refs[name], act)
		}
	}
	return a
}

// TestP4InfoIDsMatchP4Source checks gswitch.p4's @id annotations against
// the P4Info, object by object: every table, action, direct counter and
// controller header of the P4Info is annotated in the source with its id
// (and no annotated object is missing from the P4Info), every match
// field, param and metadata field has its id and (tables) match kind, the
// tables' action lists agree, and NoAction, which core.p4 declares
// without @id, has the id p4c derives from its name. So the P4Info that
// p4c writes for gswitch.p4 is the one the server accepts.
func TestP4InfoIDsMatchP4Source(t *testing.T) {
	a := parseAnnotations(t, string(P4Source))
	info := P4Info()
	seen := map[string]bool{}
	check := func(kind, name string, id uint32) {
		t.Helper()
		seen[name] = true
		got, ok := a.ids[name]
		if !ok {
			t.Errorf("%s %s (id %#x) has no @id in gswitch.p4", kind, name, id)
			return
		}
		if got != id {
			t.Errorf("%s %s: @id(%#x) in gswitch.p4, %#x in the P4Info", kind, name, got, id)
		}
	}
	sub := func(owner, what, name string, id uint32) {
		t.Helper()
		if got, ok := a.fields[owner][name]; !ok || got != id {
			t.Errorf("%s %s: %s %q is @id(%d) in gswitch.p4 (present: %v), %d in the P4Info", owner, what, what, name, got, ok, id)
		}
	}
	byID := map[uint32]string{}
	for _, ac := range info.GetActions() {
		n := ac.GetPreamble().GetName()
		byID[ac.GetPreamble().GetId()] = n
		if n == "NoAction" {
			if want := p4cNameID(0x01, "NoAction"); ac.GetPreamble().GetId() != want {
				t.Errorf("NoAction has id %#x: p4c gives core.p4's NoAction %#x", ac.GetPreamble().GetId(), want)
			}
			continue
		}
		check("action", n, ac.GetPreamble().GetId())
		if len(a.fields[n]) != len(ac.GetParams()) {
			t.Errorf("action %s: %d annotated params, %d in the P4Info", n, len(a.fields[n]), len(ac.GetParams()))
		}
		for _, p := range ac.GetParams() {
			sub(n, "param", p.GetName(), p.GetId())
		}
	}
	for _, tb := range info.GetTables() {
		n := tb.GetPreamble().GetName()
		check("table", n, tb.GetPreamble().GetId())
		if len(a.fields[n]) != len(tb.GetMatchFields()) {
			t.Errorf("table %s: %d annotated key fields, %d in the P4Info", n, len(a.fields[n]), len(tb.GetMatchFields()))
		}
		for _, f := range tb.GetMatchFields() {
			sub(n, "match field", f.GetName(), f.GetId())
			if k := a.kinds[n][f.GetName()]; k != f.GetMatchType().String() {
				t.Errorf("table %s field %s: %s in gswitch.p4, %s in the P4Info", n, f.GetName(), k, f.GetMatchType())
			}
		}
		var refs []string
		for _, r := range tb.GetActionRefs() {
			refs = append(refs, byID[r.GetId()])
		}
		if strings.Join(refs, ",") != strings.Join(a.refs[n], ",") {
			t.Errorf("table %s: actions %v in gswitch.p4, %v in the P4Info", n, a.refs[n], refs)
		}
	}
	for _, c := range info.GetDirectCounters() {
		check("direct counter", c.GetPreamble().GetName(), c.GetPreamble().GetId())
	}
	for _, c := range info.GetControllerPacketMetadata() {
		n := c.GetPreamble().GetName()
		check("controller header", n, c.GetPreamble().GetId())
		for _, m := range c.GetMetadata() {
			sub(n, "metadata", m.GetName(), m.GetId())
		}
	}
	for name := range a.ids {
		if !seen[name] {
			t.Errorf("gswitch.p4 annotates %s, which the P4Info lacks", name)
		}
	}
	if len(a.ids) < 15 {
		t.Fatalf("parsed only %d annotated objects from gswitch.p4", len(a.ids))
	}
}
