package p4rt

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
)

// TestDataplaneAtomicSwap replaces an entry (DELETE then INSERT of the same
// key with another port) in DATAPLANE_ATOMIC batches while packets are
// forwarded without pause: every packet must leave by the old or the new
// port, none may fall to the default entry (drop) between the two updates.
func TestDataplaneAtomicSwap(t *testing.T) {
	r, _ := ready(t, 3)
	if err := r.write(0, ins(l2Entry(macB, 2))); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2)
	var stop atomic.Bool
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			r.sw.Process(1, [][]byte{f})
			sent.Add(1)
		}
	}()
	port := byte(2)
	for range 200 {
		next := 5 - port // 2 <-> 3
		if err := r.write(p4v1.WriteRequest_DATAPLANE_ATOMIC, upd(p4v1.Update_DELETE, l2Entry(macB, 0)), ins(l2Entry(macB, next))); err != nil {
			t.Fatal(err)
		}
		port = next
	}
	stop.Store(true)
	wg.Wait()
	out := len(r.devs[1].take()) + len(r.devs[2].take())
	if int64(out) != sent.Load() {
		t.Fatalf("%d of %d packets forwarded: %d fell between the batch's delete and insert", out, sent.Load(), sent.Load()-int64(out))
	}
	t.Logf("%d packets, all forwarded across 200 atomic swaps", out)
}

// TestStreamOverflow: a primary that never reads its stream fills its
// send queue with packet-ins (dropped and counted, the datapath never
// waits); the next arbitration notice it cannot take ends its stream with
// RESOURCE_EXHAUSTED.
func TestStreamOverflow(t *testing.T) {
	r := newRig(t, 2, 0)
	r.srv.cfg.QueueLen = 1
	// b's connection has fixed 64 KB flow-control windows (no BDP growth),
	// and b reads into a channel of 1024 messages: then it stops reading.
	conn, err := grpc.Dial(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := openOn(t, p4v1.NewP4RuntimeClient(conn))
	b.arbitrate(0, 1)
	b.arbCode()
	r.setPipeline(t, 1)
	if err := r.write(0, upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableACL, IsDefaultAction: true, Action: act(ActionSendToCPU)})); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1400)
	copy(big, udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2))
	// Beyond the client's channel and gRPC's flow-control windows (which
	// grow up to 16 MB) the server's Send blocks for good, and from then
	// on every packet-in finds the queue full.
	// The stream is stuck when five rounds of 100 packets, 2 ms apart,
	// deliver nothing.
	last, still := uint64(0), 0
	for round := 0; still < 5; round++ {
		if round == 2000 {
			t.Fatalf("after %d rounds the stream still takes packet-ins (%+v)", round, r.srv.Stats())
		}
		for range 100 {
			r.sw.Process(1, [][]byte{big})
		}
		time.Sleep(2 * time.Millisecond)
		if n := r.srv.Stats().PacketIns; n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	if r.srv.Stats().PacketInDrops == 0 {
		t.Fatal("the stuck stream's packet-ins were not counted as dropped")
	}
	c := r.open(t)
	c.arbitrate(0, 2) // a new primary: b must be told, and cannot be
	c.arbCode()
	for {
		select {
		case <-b.msgs: // drain what was buffered
			continue
		case err := <-b.end:
			if grpcstatus.Code(err) != codes.ResourceExhausted {
				t.Fatalf("the stuck stream ended with %v, want RESOURCE_EXHAUSTED", err)
			}
			return
		}
	}
}
