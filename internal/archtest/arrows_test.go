// Package archtest checks the rules of the architecture: the arrows between gswitch's packages
// (../shared/DESIGN.md, "Layout") hold. It asks the go command for every
// package's imports, its tests' included, and checks each rule below.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gswitch/gswitch/"

// rule forbids packages under from (a path prefix) to import packages under
// to, but for the exceptions. A rule with tests set holds for the package's
// tests too; the others hold for what is built into the binaries (a test of
// controlproto/p4rt may drive a real datapath/pipeline switch, as an
// integration test would).
type rule struct {
	from, to string
	except   []string
	tests    bool
	why      string
}

var rules = []rule{
	{from: "tables/", to: "", except: []string{"tables/", "internal/shareddata", "internal/archtest"}, tests: true,
		why: "tables/ holds the data structures and imports nothing of the others"},
	{from: "datapath/", to: "controlproto/", why: "datapath and controlproto do not import each other"},
	{from: "controlproto/", to: "datapath/", why: "datapath and controlproto do not import each other"},
	{from: "controlproto/p4rt", to: "controlproto/openflow", tests: true, why: "P4Runtime compiles into tables/rule, not into OpenFlow"},
	{from: "gpu", to: "", except: []string{"gpu", "kernels", "tables/", "internal/"},
		why: "gpu moves tables' words and launches kernels; it knows no protocol and no datapath"},
	{from: "kernels", to: "", except: []string{"kernels", "internal/"}, why: "kernels holds CUDA sources and their PTX"},
}

// onlyWiring are imported only by the wiring and the tools on top of it.
var onlyWiring = []string{"agent", "bench"}

var wiring = []string{"agent", "cmd/", "bench", "integration"}

func under(pkg, prefix string) bool {
	if prefix == "" {
		return true
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(pkg, prefix) || pkg == strings.TrimSuffix(prefix, "/")
	}
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

func anyUnder(pkg string, prefixes []string) bool {
	for _, p := range prefixes {
		if under(pkg, p) {
			return true
		}
	}
	return false
}

// imports lists, for every package of the module, the module's packages it
// imports: in its binary code (built) and in its tests (internal and
// external) alone.
func imports(t *testing.T) (built, tests map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} | {{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	built, tests = map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		m := built
		m[pkg] = m[pkg][:0:0]
		for _, imp := range f[1:] {
			if imp == "|" {
				m = tests
				continue
			}
			if strings.HasPrefix(imp, module) && imp != f[0] {
				m[pkg] = append(m[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return built, tests
}

func TestArrows(t *testing.T) {
	built, tests := imports(t)
	if len(built) < 10 {
		t.Fatalf("go list found %d packages; expected the whole module", len(built))
	}
	check := func(pkg string, imps []string, inTests bool) {
		what := " imports"
		if inTests {
			what = "'s tests import"
		}
		for _, imp := range imps {
			for _, r := range rules {
				if (r.tests || !inTests) && under(pkg, r.from) && under(imp, r.to) && !anyUnder(imp, r.except) {
					t.Errorf("%s%s %s: %s", pkg, what, imp, r.why)
				}
			}
			for _, w := range onlyWiring {
				if !inTests && under(imp, w) && !under(pkg, w) && !anyUnder(pkg, wiring) {
					t.Errorf("%s imports %s: only %v import %s", pkg, imp, wiring, w)
				}
			}
		}
	}
	for pkg, imps := range built {
		check(pkg, imps, false)
	}
	for pkg, imps := range tests {
		check(pkg, imps, true)
	}
}
