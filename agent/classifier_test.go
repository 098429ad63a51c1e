package agent

import (
	"errors"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// TestClassifierSetting: the flow tables' search is linear by default (as before the setting),
// --classifier names another, and an unknown name is a configuration error.
func TestClassifierSetting(t *testing.T) {
	st, err := loadArgs(t, "--port", "1=lo")
	if err != nil || st.algo != flow.Linear {
		t.Fatalf("default: %v, %v", st.algo, err)
	}
	for name, want := range map[string]flow.Algo{"merge": flow.Merge, "linear": flow.Linear, "Bloom": flow.Bloom, "tuple": flow.Tuple} {
		st, err := loadArgs(t, "--port", "1=lo", "--classifier", name)
		if err != nil || st.algo != want {
			t.Errorf("--classifier %s: %v, %v", name, st.algo, err)
		}
	}
	if _, err := loadArgs(t, "--port", "1=lo", "--classifier", "hash"); !errors.Is(err, ErrConfig) {
		t.Errorf("--classifier hash: %v, want a configuration error", err)
	}
}
