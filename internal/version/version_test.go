package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.24.0", Main: debug.Module{Path: "github.com/gswitch/gswitch", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-25T18:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	in := fromBuildInfo(bi)
	if in.Revision != "0123456789abcdef0123456789abcdef01234567" || !in.Modified || in.Time != "2026-11-25T18:00:00Z" {
		t.Fatalf("%+v", in)
	}
	want := "github.com/gswitch/gswitch (devel) rev 0123456789ab+dirty (2026-11-25T18:00:00Z) go1.24.0"
	if got := in.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	bi.Settings = nil
	bi.Main.Version = "v1.2.3"
	if got := fromBuildInfo(bi).String(); got != "github.com/gswitch/gswitch v1.2.3 go1.24.0" {
		t.Fatalf("without VCS settings: %q", got)
	}
	bi.Main.Version = ""
	if got := fromBuildInfo(bi).String(); !strings.Contains(got, "(devel)") {
		t.Fatalf("without a version: %q", got)
	}
}

// TestGet reads the test binary's own build information: it has a Go
// version at least.
func TestGet(t *testing.T) {
	in := Get()
	if in.GoVersion == "" || in.String() == "" {
		t.Fatalf("%+v", in)
	}
}
