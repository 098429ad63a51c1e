package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

// TestFuzzCorpora: every fuzz target has a committed seed corpus
// (testdata/fuzz/<Target>/ beside its test file, at least one file), and
// no corpus folder is left without its target.
func TestFuzzCorpora(t *testing.T) {
	r := root(t)
	targets := map[string]bool{} // dir/testdata/fuzz/Name
	err := filepath.WalkDir(r, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != r && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			targets[filepath.Join(filepath.Dir(path), "testdata", "fuzz", string(m[1]))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) < 30 {
		t.Fatalf("found %d fuzz targets; expected the project's (30 or more)", len(targets))
	}
	for dir := range targets {
		rel, _ := filepath.Rel(r, dir)
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Errorf("fuzz target %s has no seed corpus in %s", filepath.Base(dir), rel)
		}
	}
	corpora, _ := filepath.Glob(filepath.Join(r, "*", "*", "testdata", "fuzz", "*"))
	more, _ := filepath.Glob(filepath.Join(r, "*", "*", "*", "testdata", "fuzz", "*"))
	for _, dir := range append(corpora, more...) {
		if st, err := os.Stat(dir); err == nil && st.IsDir() && !targets[dir] && filepath.Base(dir) != "cache" {
			rel, _ := filepath.Rel(r, dir)
			t.Errorf("corpus %s has no fuzz target beside it", rel)
		}
	}
}
