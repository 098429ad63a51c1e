package ctl

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/re"
)

// reSource is fakeSource with redundancy elimination.
type reSource struct{ fakeSource }

func (reSource) RE() REInfo {
	return REInfo{Enabled: true, Port: 2, Interface: "wan0", Encoder: re.EncoderCounters{Saved: 1234, Refs: 5}, Decoder: re.DecoderCounters{Failures: 1}}
}

// TestRE: /v1/re answers the source's counters, and REInfo{} (off) for a
// source without RESource.
func TestRE(t *testing.T) {
	for _, c := range []struct {
		src  Source
		want REInfo
	}{{fakeSource{}, REInfo{}}, {reSource{}, reSource{}.RE()}} {
		path := filepath.Join(t.TempDir(), "ctl.sock")
		l, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, l, c.src) }()
		cl := NewClient(path)
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := cl.RE(qctx)
		qcancel()
		cl.Close()
		cancel()
		if e := <-done; e != nil {
			t.Error(e)
		}
		if err != nil || got != c.want {
			t.Errorf("RE: %+v, %v; want %+v", got, err, c.want)
		}
	}
}
