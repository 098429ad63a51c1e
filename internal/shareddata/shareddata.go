// Package shareddata locates the project's shared data sets for tests: the
// folder ../shared/data beside the repository (the full BGP table, ClassBench
// filter sets, ...). Tests read them there and never copy them.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns the path of rel inside ../shared/data, the repository root
// being found by walking up from the working directory to go.mod. A missing
// file fails the test with a message naming the path: a data set is part of
// the project's test setup, never a reason to skip.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("shareddata: no go.mod above %s", dir)
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "data", rel)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared data set %s is missing (../shared/data must sit beside the checkout): %v", p, err)
	}
	return p
}
