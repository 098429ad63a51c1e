// Package version says which build of a gswitch program is running: the
// module version, the VCS revision it was built from and whether the work
// tree had changes, and the Go release, all read from the build information
// the Go linker embeds (runtime/debug.ReadBuildInfo). It is what
// "gswitchctl --version" and "gswitchd --version" print.
//
// A binary built with "go build" inside a git checkout carries the revision
// (vcs.revision, vcs.modified); since Go 1.24 its module version is a
// pseudo-version derived from it (v0.0.0-20261125101500-abcdef123456+dirty).
// A binary built without VCS information (go build -buildvcs=false, from a
// tree without .git, or, as go1.26.8 does, from a git worktree whose .git
// is a file) says "devel" and "no vcs revision"; a test binary says the
// same.
package version

import (
	"runtime/debug"
	"strings"
)

// revLen is how many hex digits of the revision String shows.
const revLen = 12

// String returns one line that names prog and its build, e.g.
// "gswitchctl v0.0.0-20261125101500-abcdef123456+dirty (rev abcdef123456, modified, go1.26.8)".
func String(prog string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return prog + " (no build information)"
	}
	return format(prog, bi)
}

// format is String on the given build information.
func format(prog string, bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		parts = append(parts, "rev "+rev[:min(len(rev), revLen)])
		if modified {
			parts = append(parts, "modified")
		}
	} else {
		parts = append(parts, "no vcs revision")
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	return prog + " " + v + " (" + strings.Join(parts, ", ") + ")"
}
