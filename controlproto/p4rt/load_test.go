package p4rt

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// TestSlowConnectionsDoNotStopService opens 300 connections to the
// P4Runtime port that never finish their handshake: half send nothing,
// half send half of the HTTP/2 client preface and go silent. A real
// client is served meanwhile (arbitration, pipeline, write, read, each
// within a second), and the server closes every slow connection once its
// handshake time (Config.ConnectionTimeout, 1 s here) is up.
func TestSlowConnectionsDoNotStopService(t *testing.T) {
	r := newRig(t, 2, 0)
	r.stop()
	r.srv.cfg.ConnectionTimeout = time.Second
	r.serve(t, nil)
	const slow = 300
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	for i := range slow {
		c, err := net.DialTimeout("tcp", r.addr, 2*time.Second)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			if _, err := c.Write(preface[:len(preface)/2]); err != nil {
				t.Fatalf("slow connection %d: %v", i, err)
			}
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.primary(t, 1)
	r.setPipeline(t, 1)
	if _, err := r.cl.Write(ctx, &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Updates: []*p4v1.Update{ins(l2Entry(macB, 2))}}); err != nil {
		t.Fatalf("write with %d slow connections open: %v", slow, err)
	}
	if got := r.read(t, tableEntity(TableL2)); len(got) != 1 {
		t.Fatalf("read: %d entries, want 1", len(got))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the real client took %v with %d slow connections open", d, slow)
	}
	// Every slow connection is closed by the server: a read ends with EOF
	// or a reset, not with the test's own deadline.
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			for {
				_, err := c.Read(buf)
				if err == nil {
					continue // the server's SETTINGS, then its GOAWAY
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					mu.Lock()
					open++
					mu.Unlock()
				}
				return
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Fatalf("%d of %d slow connections still open 5 s after the 1 s connection timeout", open, slow)
	}
}
