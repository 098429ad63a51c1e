package forward

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gswitch/gswitch/tables/filter"
)

// Live filters' cost (--filters FILE, target gswitchd-filters): gswitchd
// as the target gswitchd runs it, plus the filters of FILE on every port
// (gswitchd's YAML filters:, through --config), so that a run with both
// targets and --rounds gives the lossless rate with and without them,
// measured in turn.

// readFilterSpecs reads FILE: one NAME: EXPRESSION a line (bench filter's
// and gswitchctl filter's format; blank lines and # comments skipped),
// each compiled here so that a mistake is found before any namespace is
// made.
func readFilterSpecs(path string) ([]filter.Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var specs []filter.Spec
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, expr, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want NAME: EXPRESSION", path, ln)
		}
		specs = append(specs, filter.Spec{Name: strings.TrimSpace(name), Expr: strings.TrimSpace(expr)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: no filters", path)
	}
	if _, err := filter.Compile(specs, filter.LinkEthernet, false, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return specs, nil
}

// filtersConfig writes gswitchd's configuration file holding specs as
// live filters of every port and returns its path.
func filtersConfig(dir string, specs []filter.Spec) (string, error) {
	path := filepath.Join(dir, "filters.yaml")
	return path, os.WriteFile(path, []byte(filtersYAML(specs)), 0o644)
}

// filtersYAML is the filters: section of gswitchd's configuration holding
// specs as live filters of every port.
func filtersYAML(specs []filter.Spec) string {
	var b strings.Builder
	b.WriteString("filters:\n")
	for _, s := range specs {
		// Double-quoted YAML scalars take Go's quoting of printable text.
		fmt.Fprintf(&b, "  - {name: %s, expression: %s}\n", strconv.Quote(s.Name), strconv.Quote(s.Expr))
	}
	return b.String()
}

// scrapeFilters reads the running gswitchd's live filter count and the
// matches its filters counted (gswitch_filters, the sum of
// gswitch_filter_packets_total); ok false when it does not answer.
func (e *fwdEnv) scrapeFilters() (filters int, matches uint64, ok bool) {
	resp, err := e.getMetrics()
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	return parseFilterMetrics(resp.Body)
}

// parseFilterMetrics finds gswitch_filters and sums
// gswitch_filter_packets_total in a Prometheus text page.
func parseFilterMetrics(r io.Reader) (filters int, matches uint64, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		name, rest, _ := strings.Cut(l, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			if j := strings.LastIndexByte(l, '}'); j >= 0 {
				rest = strings.TrimSpace(l[j+1:])
			}
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " 0")[0], 64)
		if err != nil {
			continue
		}
		switch name {
		case "gswitch_filters":
			filters, ok = int(v), true
		case "gswitch_filter_packets_total":
			matches += uint64(v)
		}
	}
	return filters, matches, ok
}
