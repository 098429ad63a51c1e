package filter

import (
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
)

func TestCCProf(t *testing.T) {
	prog, err := filter.Compile(Specs(1), 1, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		r, err := fromFile(prog, "/tmp/cc/syn300k.pcapng")
		if err != nil {
			t.Fatal(err)
		}
		t.Log(r)
	}
}
