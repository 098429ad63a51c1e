package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261125101500-abcdef123456+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef1234567890abcdef1234567890abcdef12"}, {Key: "vcs.modified", Value: "true"}}},
			"gswitchctl v0.0.0-20261125101500-abcdef123456+dirty (rev abcdef123456, modified, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}},
			"gswitchctl v1.2.3 (rev 0123456789ab, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"gswitchctl devel (no vcs revision, go1.26.8)"},
		{debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}},
			"gswitchctl devel (rev abc)"},
	} {
		if got := format("gswitchctl", &c.bi); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// TestString: the test binary has build information; the line names the
// program and the Go release it runs on.
func TestString(t *testing.T) {
	s := String("prog")
	if !strings.HasPrefix(s, "prog ") || !strings.Contains(s, "go1.") {
		t.Errorf("String(prog) = %q", s)
	}
}
