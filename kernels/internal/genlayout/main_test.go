package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLayoutHeaderFresh fails when the checked-in kernels/layout.h differs
// from what the Go constants generate now.
func TestLayoutHeaderFresh(t *testing.T) {
	have, err := os.ReadFile("../../layout.h")
	if err != nil {
		t.Fatal(err)
	}
	if want := Generate(); !bytes.Equal(have, want) {
		t.Errorf("kernels/layout.h is stale: run go generate ./kernels (then make kernels on a machine with nvcc, and commit both)\n--- have\n%s\n--- want\n%s", have, want)
	}
}

// TestLayoutHeaderShape checks what the generator emits: Go's generated-code
// marker, unique names, and no define the kernels leave unused.
func TestLayoutHeaderShape(t *testing.T) {
	h := string(Generate())
	if !regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).MatchString(h) {
		t.Error("layout.h lacks the generated-code marker")
	}
	src := ""
	for _, f := range []string{"../../flow.cu", "../../gamt.cu"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `#include "layout.h"`) {
			t.Errorf("%s does not include layout.h", f)
		}
		src += string(b)
	}
	seen := map[string]bool{}
	for _, g := range groups() {
		for _, x := range g.defs {
			if seen[x.name] {
				t.Errorf("%s defined twice", x.name)
			}
			seen[x.name] = true
			if !regexp.MustCompile(`\b`+x.name+`\b`).MatchString(src) && !documentedOnly[x.name] {
				t.Errorf("%s is generated but no kernel uses it", x.name)
			}
			if re := regexp.MustCompile(`(?m)^#define ` + x.name + `\b`); re.MatchString(src) {
				t.Errorf("%s is restated by hand in a .cu file", x.name)
			}
		}
	}
	// A value that round-trips: GAMT_MAX_LEVELS must be a power of two
	// (gamt.cu masks a jump with GAMT_MAX_LEVELS-1).
	m := regexp.MustCompile(`#define GAMT_MAX_LEVELS (\d+)`).FindStringSubmatch(h)
	if m == nil {
		t.Fatal("no GAMT_MAX_LEVELS")
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 || n&(n-1) != 0 {
		t.Errorf("GAMT_MAX_LEVELS = %d, not a power of two", n)
	}
}

// documentedOnly are defines the kernels need not use: they complete a
// group (the layout is documented whole in one place).
var documentedOnly = map[string]bool{
	"ALGO_TUPLE": true, "C_COUNT": true, "C_PREWORDS": true,
}
