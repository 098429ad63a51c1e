// Package version reports what a gswitch binary was built from: the
// module version and the version-control revision that the Go toolchain
// records in every binary (runtime/debug.ReadBuildInfo). gswitchd
// --version prints it; gswitchctl can too.
//
// A binary built with "go build" inside a git checkout has the module
// version "(devel)" and the commit it was built from, with "+dirty" when
// the work tree had changes; one built with "go install
// module@version" has that version and no revision; a test binary has
// neither.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is what the build recorded.
type Info struct {
	Module    string // the main module's path
	Version   string // its version: a tag, a pseudo-version or "(devel)"
	Revision  string // the VCS revision (commit), empty when not recorded
	Time      string // the revision's commit time (RFC 3339), empty when not recorded
	Modified  bool   // the work tree had changes the revision lacks
	GoVersion string // the toolchain that built the binary
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// String is one line: module, version, revision (12 digits, +dirty when
// modified) and commit time where recorded, and the Go version, e.g.
// "github.com/gswitch/gswitch (devel) rev 0123456789ab+dirty (2026-11-25T18:00:00Z) go1.24.0".
func (in Info) String() string {
	var b strings.Builder
	if in.Module != "" {
		b.WriteString(in.Module + " ")
	}
	b.WriteString(in.Version)
	if in.Revision != "" {
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if in.Modified {
			rev += "+dirty"
		}
		fmt.Fprintf(&b, " rev %s", rev)
		if in.Time != "" {
			fmt.Fprintf(&b, " (%s)", in.Time)
		}
	}
	if in.GoVersion != "" {
		b.WriteString(" " + in.GoVersion)
	}
	return b.String()
}
