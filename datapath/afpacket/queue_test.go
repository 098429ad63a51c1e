package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// udpFrame builds a 64-byte IPv4/UDP frame 10.0.0.1:srcPort ->
// 10.0.0.2:4789 whose payload is the test marker and 'seq': the kernel's
// flow hash (which PACKET_FANOUT_HASH uses) sees one flow per source port.
func udpFrame(dst, src net.HardwareAddr, srcPort uint16, seq uint32) []byte {
	f := make([]byte, 64)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], srcPort)
	binary.BigEndian.PutUint16(udp[2:], 4789)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], testMarker)
	binary.BigEndian.PutUint32(udp[8+len(testMarker):], seq)
	return f
}

// udpSeq returns a udpFrame's source port and sequence number.
func udpSeq(f []byte) (uint16, uint32, bool) {
	n := 42 + len(testMarker)
	if len(f) < n+4 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || !bytes.Equal(f[42:n], testMarker) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(f[34:]), binary.BigEndian.Uint32(f[n:]), true
}

// flowBurst builds 'flows' flows of 'per' frames each, interleaved (frame
// i belongs to flow i%flows); seq is the frame's index.
func flowBurst(tn *testNet, flows, per int) [][]byte {
	var out [][]byte
	for i := range flows * per {
		out = append(out, udpFrame(tn.hostMAC, tn.peerMAC, uint16(1000+i%flows), uint32(i)))
	}
	return out
}

type queuedFrame struct {
	queue   int
	srcPort uint16
	seq     uint32
}

// readQueues reads every queue of p in a goroutine of its own until 'want'
// test frames arrived in all or 'wait' passes without a new one after
// 'send' (if not nil) returned; it returns them in each queue's order.
// The readers run while 'send' sends, as a port's readers do: a ring of
// NumBlocks blocks retired every BlockTimeout lasts about NumBlocks *
// BlockTimeout without a reader, and a send slowed by a loaded machine
// takes longer than that.
func readQueues(t *testing.T, p *Port, want int, wait time.Duration, send func()) [][]queuedFrame {
	t.Helper()
	got := make([][]queuedFrame, p.Queues())
	var (
		mu      sync.Mutex
		total   int
		last    = time.Now()
		sending = send != nil
		wg      sync.WaitGroup
		errs    = make([]error, p.Queues())
	)
	for i := range p.Queues() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := total >= want || !sending && time.Since(last) > wait
				mu.Unlock()
				if done {
					return
				}
				_, err := p.Queue(i).Receive(10*time.Millisecond, func(f *Frame) {
					if sp, seq, ok := udpSeq(f.Data); ok {
						got[i] = append(got[i], queuedFrame{i, sp, seq})
						mu.Lock()
						total++
						last = time.Now()
						mu.Unlock()
					}
				})
				if err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	if send != nil {
		send()
		mu.Lock()
		sending, last = false, time.Now()
		mu.Unlock()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return got
}

// TestQueuesFanout sends frames of many flows to a port with four queues
// read concurrently: every frame is read exactly once, every queue gets
// some, all frames of a flow land on one queue in the order sent, and the
// port's counters are the sum of its queues'.
func TestQueuesFanout(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: 4, BlockSize: 64 << 10, NumBlocks: 8, BlockTimeout: time.Millisecond})
	if p.Queues() != 4 || p.FanoutGroup() < 0 {
		t.Fatalf("Queues() = %d, FanoutGroup() = %d", p.Queues(), p.FanoutGroup())
	}
	const flows, per = 64, 8
	sent := flowBurst(tn, flows, per)
	ps := tn.peerSocket(t)
	got := readQueues(t, p, len(sent), 300*time.Millisecond, func() { ps.send(t, sent...) })

	seen := map[uint32]int{}
	flowQueue := map[uint16]int{}
	lastSeq := map[uint16]uint32{}
	var perQueue []int
	for q, frames := range got {
		perQueue = append(perQueue, len(frames))
		for _, f := range frames {
			seen[f.seq]++
			if want := uint16(1000 + int(f.seq)%flows); f.srcPort != want {
				t.Fatalf("frame %d has source port %d, want %d", f.seq, f.srcPort, want)
			}
			if fq, ok := flowQueue[f.srcPort]; ok && fq != q {
				t.Fatalf("flow %d on queues %d and %d", f.srcPort, fq, q)
			}
			flowQueue[f.srcPort] = q
			if prev, ok := lastSeq[f.srcPort]; ok && f.seq <= prev {
				t.Fatalf("flow %d: frame %d after %d on queue %d", f.srcPort, f.seq, prev, q)
			}
			lastSeq[f.srcPort] = f.seq
		}
	}
	t.Logf("frames per queue: %v", perQueue)
	for i := range sent {
		if seen[uint32(i)] != 1 {
			st, _ := p.Stats()
			t.Fatalf("frame %d read %d times (per queue %v; port %+v)", i, seen[uint32(i)], perQueue, st)
		}
	}
	for q, n := range perQueue {
		if n == 0 {
			t.Errorf("queue %d got no frame of %d flows: %v", q, flows, perQueue)
		}
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var sum Stats
	for i := range p.Queues() {
		qs, err := p.QueueStats(i)
		if err != nil {
			t.Fatal(err)
		}
		if qs.RxPackets < uint64(perQueue[i]) {
			t.Errorf("queue %d counted %d frames, read %d test frames", i, qs.RxPackets, perQueue[i])
		}
		sum.RxPackets += qs.RxPackets
		sum.RxBytes += qs.RxBytes
	}
	if st.RxPackets != sum.RxPackets || st.RxBytes != sum.RxBytes || st.RxPackets < uint64(len(sent)) || st.RingDrops != 0 {
		t.Errorf("port stats %+v; queues sum to %d packets, %d bytes", st, sum.RxPackets, sum.RxBytes)
	}
}

// TestQueuesGroupsApart opens two ports with two queues each on one
// interface, and a port with one queue: their groups differ (the kernel
// picks unique ids), so each port reads every frame, as separate ports do.
func TestQueuesGroupsApart(t *testing.T) {
	tn := newTestNet(t)
	// The ports are read one after the other once all is sent: 16 blocks
	// retired every 10 ms last a send slowed to 160 ms.
	cfg := Config{Queues: 2, BlockSize: 64 << 10, NumBlocks: 16, BlockTimeout: 10 * time.Millisecond}
	a, b := openPort(t, tn.host, cfg), openPort(t, tn.host, cfg)
	single := openPort(t, tn.host, Config{BlockSize: 64 << 10, NumBlocks: 16, BlockTimeout: 10 * time.Millisecond})
	if a.FanoutGroup() == b.FanoutGroup() || single.FanoutGroup() != -1 {
		t.Fatalf("fanout groups %d, %d and %d", a.FanoutGroup(), b.FanoutGroup(), single.FanoutGroup())
	}
	sent := flowBurst(tn, 16, 4)
	tn.peerSocket(t).send(t, sent...)
	for i, p := range []*Port{a, b, single} {
		n := 0
		for _, q := range readQueues(t, p, len(sent), 300*time.Millisecond, nil) {
			n += len(q)
		}
		if n != len(sent) {
			t.Errorf("port %d read %d of %d frames", i, n, len(sent))
		}
	}
}

// TestQueuesIgnoreOutgoing: a port with queues does not read back the
// frames it or another port on the interface sends (the group's hook
// replaces the sockets' PACKET_IGNORE_OUTGOING: the fanout flag or the
// socket filter must do its work), while the peer receives them.
func TestQueuesIgnoreOutgoing(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: 3, BlockTimeout: time.Millisecond})
	p2 := openPort(t, tn.host, Config{})
	ps := tn.peerSocket(t)
	var frames [][]byte
	for i := range 60 {
		frames = append(frames, udpFrame(tn.peerMAC, tn.hostMAC, uint16(2000+i), uint32(i)))
	}
	if n, err := p.Send(frames[:30]); n != 30 || err != nil {
		t.Fatalf("Send: %d, %v", n, err)
	}
	if n, err := p2.Send(frames[30:]); n != 30 || err != nil {
		t.Fatalf("second port's Send: %d, %v", n, err)
	}
	n := 0
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(time.Second); n < 60 && time.Now().Before(deadline); {
		m, _, err := unix.Recvfrom(ps.fd, buf, 0) // 50 ms timeout
		if err == nil {
			if _, _, ok := udpSeq(buf[:m]); ok {
				n++
			}
		}
	}
	if n != 60 {
		t.Fatalf("peer received %d of 60", n)
	}
	for q, got := range readQueues(t, p, 1, 150*time.Millisecond, nil) {
		if len(got) != 0 {
			t.Fatalf("queue %d read back %d frames sent from the host", q, len(got))
		}
	}
	// And frames from the peer still come in.
	total := 0
	for _, got := range readQueues(t, p, 16, 300*time.Millisecond, func() { ps.send(t, flowBurst(tn, 8, 2)...) }) {
		total += len(got)
	}
	if total != 16 {
		t.Fatalf("read %d of 16 frames from the peer", total)
	}
}

// TestQueuesRingDrops overruns tiny rings: the drops of every queue's ring
// are summed into the port's Stats.
func TestQueuesRingDrops(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: 2, BlockSize: os.Getpagesize(), NumBlocks: 2, BlockTimeout: time.Millisecond})
	var frames [][]byte
	for i := range 800 {
		frames = append(frames, append(udpFrame(tn.hostMAC, tn.peerMAC, uint16(1000+i%32), uint32(i)), make([]byte, 200)...))
	}
	tn.peerSocket(t).send(t, frames...)
	time.Sleep(20 * time.Millisecond)
	n := 0
	for _, q := range readQueues(t, p, 800, 100*time.Millisecond, nil) {
		n += len(q)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var drops uint64
	for i := range p.Queues() {
		qs, _ := p.QueueStats(i)
		drops += qs.RingDrops
	}
	if st.RingDrops == 0 || st.RingDrops != drops || st.RingDrops+uint64(n) != 800 {
		t.Fatalf("received %d, ring drops %d (queues' sum %d): want drops, and 800 in all", n, st.RingDrops, drops)
	}
}

// TestQueuesClose: Close wakes a ReadBlock waiting on every queue
// (ErrClosed), a block held on one queue stays readable until released,
// and every queue says ErrClosed afterwards.
func TestQueuesClose(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: 3})
	done := make(chan error, p.Queues())
	for i := range p.Queues() {
		go func() {
			_, err := p.Queue(i).ReadBlock(-1)
			done <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	p.Close()
	for range p.Queues() {
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("waiting ReadBlock returned %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not wake every queue's ReadBlock")
		}
	}
	for i := range p.Queues() {
		if _, err := p.Queue(i).ReadBlock(0); !errors.Is(err, ErrClosed) {
			t.Errorf("queue %d: ReadBlock after Close: %v", i, err)
		}
		if _, err := p.QueueStats(i); !errors.Is(err, ErrClosed) {
			t.Errorf("queue %d: Stats after Close: %v", i, err)
		}
	}

	// A block held on some queue across Close.
	p2 := openPort(t, tn.host, Config{Queues: 3, BlockTimeout: time.Millisecond})
	tn.peerSocket(t).send(t, flowBurst(tn, 16, 1)...)
	var b *Block
	waitFor(t, "a block on some queue", func() bool {
		for i := range p2.Queues() {
			var err error
			if b, err = p2.Queue(i).ReadBlock(5 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if b != nil {
				if _, err := p2.Queue(i).ReadBlock(0); !errors.Is(err, ErrBusy) {
					t.Errorf("second ReadBlock on queue %d with a block held: %v, want ErrBusy", i, err)
				}
				return true
			}
		}
		return false
	})
	p2.Close()
	var f Frame
	n := 0
	for b.Next(&f) {
		n += len(f.Data) // reads the ring after Close
	}
	b.Release()
	b.Release()
	if n == 0 {
		t.Error("held block empty")
	}
}

// TestQueueNoAllocs: receiving a block from a queue other than 0
// allocates nothing.
func TestQueueNoAllocs(t *testing.T) {
	tn := newTestNet(t)
	p := openPort(t, tn.host, Config{Queues: 2, BlockSize: os.Getpagesize(), NumBlocks: 64, BlockTimeout: time.Millisecond})
	tn.peerSocket(t).send(t, flowBurst(tn, 32, 8)...)
	time.Sleep(30 * time.Millisecond)
	n := 0
	count := func(*Frame) { n++ }
	for i := range p.Queues() {
		q := p.Queue(i)
		if a := testing.AllocsPerRun(20, func() { q.Receive(time.Millisecond, count) }); a != 0 {
			t.Errorf("queue %d: Receive allocates %v times per block", i, a)
		}
		drain(q, count) // the blocks a send slowed by a loaded machine spread over more than 20
	}
	if n < 256 {
		t.Errorf("received %d of 256 frames", n)
	}
}
