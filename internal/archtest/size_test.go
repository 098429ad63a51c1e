package archtest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds every non-test, non-generated Go file: a file longer than
// that is split by concern (../shared/STYLE.md, "Size").
const maxLines = 1000

// maxMainLines bounds cmd/gswitchd: the daemon is a small main around agent.
const maxMainLines = 200

// root is the module's root, two folders up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", r, err)
	}
	return r
}

// countLines returns a Go file's lines and whether it says it is generated
// (the "Code generated ... DO NOT EDIT." line of go generate's convention).
func countLines(t *testing.T, path string) (n int, generated bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			generated = true
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n, generated
}

func TestFileSizes(t *testing.T) {
	r := root(t)
	mainLines := 0
	err := filepath.WalkDir(r, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != r && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		n, gen := countLines(t, path)
		rel, _ := filepath.Rel(r, path)
		if !gen && n > maxLines {
			t.Errorf("%s: %d lines (at most %d in a non-test, non-generated Go file)", rel, n, maxLines)
		}
		if filepath.Dir(rel) == filepath.Join("cmd", "gswitchd") {
			mainLines += n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mainLines == 0 || mainLines > maxMainLines {
		t.Errorf("cmd/gswitchd: %d lines besides tests (want 1..%d: a small main around agent)", mainLines, maxMainLines)
	}
}
