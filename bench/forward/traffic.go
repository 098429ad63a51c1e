package forward

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/vishvananda/netlink"
)

// benchDstMAC is the test frames' destination MAC: a unicast address no
// interface has. The sink counts them all the same (see sink), but its
// namespace's IP stack drops them at once (PACKET_OTHERHOST) instead of
// routing each to an error (the sink has no addresses): that work runs in
// the forwarder's transmit call (veth delivers in the sender's context)
// and would be counted against the switch under test. The rules forward
// by in_port and the Linux bridge floods the unknown address to its one
// other port, so every target forwards them.
const benchDstMAC = "02:00:00:00:00:fe"

// The test frame: 60 bytes (64 on the wire with the FCS), Ethernet, IPv4
// 10.0.0.1 → 10.0.0.2, UDP from one of --src-ports source ports to port 9,
// and a payload of a magic, the step number and a sequence number, so the
// sink counts only this run's frames of the current step.
const (
	frameLen    = 60
	wireLen     = frameLen + 4
	payloadOff  = 14 + 20 + 8
	benchMagic  = 0x47535742 // "GSWB"
	udpSrcPort0 = 10000
	spinRate    = 20000 // frames/s from which the generator paces by yielding, not sleeping
)

// testFrame builds the template of the test frame with source port index i.
func testFrame(dst, src net.HardwareAddr, port uint16) []byte {
	f := make([]byte, frameLen)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], frameLen-14)
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], port)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], frameLen-34) // checksum 0: none (IPv4)
	binary.BigEndian.PutUint32(f[payloadOff:], benchMagic)
	return f
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// stamp writes the step and sequence number into a frame.
func stamp(f []byte, step uint32, seq uint64) {
	binary.BigEndian.PutUint32(f[payloadOff+4:], step)
	binary.BigEndian.PutUint64(f[payloadOff+8:], seq)
}

// framesDue is the number of frames a sender at 'rate' frames/s should
// have sent 'elapsed' after its start.
func framesDue(rate int64, elapsed time.Duration) int64 {
	return int64(float64(rate) * elapsed.Seconds())
}

// generate sends test frames for 'dur' at 'rate' frames/s (0: as fast as
// Send returns), in batches of at most 'batch', cycling fs's templates in
// order from the first. It returns the frames the kernel accepted and the
// time it sent for.
func generate(p *afpacket.Port, fs *frameSet, batch int, step uint32, rate int64, dur time.Duration) (uint64, time.Duration, error) {
	frames := make([][]byte, batch)
	tmpl := fs.tmpl
	size := frameLen
	for _, t := range tmpl {
		size = max(size, len(t))
	}
	for i := range frames {
		frames[i] = make([]byte, size)
	}
	var seq uint64
	var sent int64
	start := time.Now()
	end := start.Add(dur)
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		n := int64(batch)
		if rate > 0 {
			due := framesDue(rate, now.Sub(start)) - sent
			if due <= 0 {
				// The next frame is due in 1/rate. Above spinRate the
				// sender yields instead of sleeping: timers can be coarse
				// (a sleep of 20µs took 4 ms on the 2-core VM), and the
				// catch-up burst after a long sleep would overflow the
				// kernel's backlog (1000 frames) and count as the
				// switch's loss. Below it, sleeps keep the sender's CPU free.
				if rate >= spinRate {
					runtime.Gosched()
				} else {
					time.Sleep(time.Duration(float64(time.Second) / float64(rate)))
				}
				continue
			}
			n = min(n, due)
		}
		for i := range n {
			t := int(seq % uint64(len(tmpl)))
			frames[i] = frames[i][:len(tmpl[t])]
			copy(frames[i], tmpl[t])
			fs.stamp(frames[i], t, step, seq)
			seq++
		}
		k, err := p.Send(frames[:n])
		sent += int64(k)
		if err != nil && errors.Is(err, afpacket.ErrClosed) {
			return uint64(sent), time.Since(start), err
		}
	}
	return uint64(sent), time.Since(start), nil
}

// sink counts the frames of the current step arriving at a sink's eth0,
// in one of two ways (--sink):
//   - counter (h set): the interface's rx_packets, read over netlink at
//     the step's start and end. The sink has no socket, so a frame costs
//     only veth's delivery and the IP stack's drop of a frame for another
//     host, which run inside the switch's transmit call (veth delivers in
//     the sender's context) and are charged to the switch under test.
//   - ring (p set): an AF_PACKET ring read by a goroutine, counting only
//     the test frames of the current step (magic and step number). Each
//     frame also costs the ring's copy and timestamp in the switch's
//     transmit call: 15% of gswitchd's CPU at 1.5 Mframes/s on the 2-core
//     VM (perf, 2026-11-22), and the reader competes for the cores.
type sink struct {
	p     *afpacket.Port
	h     *netlink.Handle
	step  atomic.Uint32
	count atomic.Uint64 // ring: the step's test frames
	// ring, rule-set traffic: the pair's templates (set before the first
	// step, read-only after) and the step's frames that arrived although
	// the rules drop them.
	fs        atomic.Pointer[frameSet]
	misrouted atomic.Uint64
	altered   atomic.Uint64 // ... and that arrived other than they were sent (sameFrame)
	rx0       uint64        // counter: rx_packets at begin
	done      chan struct{} // ring: closed when its reader has stopped
}

func startRingSink(p *afpacket.Port) *sink {
	s := &sink{p: p, done: make(chan struct{})}
	go s.loop()
	return s
}

func startCounterSink(h *netlink.Handle) *sink {
	return &sink{h: h}
}

// rxPackets reads the sink's eth0 rx_packets.
func (s *sink) rxPackets() (uint64, error) {
	l, err := s.h.LinkByName("eth0")
	if err != nil {
		return 0, fmt.Errorf("sink counter: %w", err)
	}
	if l.Attrs().Statistics == nil {
		return 0, errors.New("sink counter: the kernel gave no statistics for eth0")
	}
	return l.Attrs().Statistics.RxPackets, nil
}

// frames returns the frames counted since begin.
func (s *sink) frames() (uint64, error) {
	if s.p != nil {
		return s.count.Load(), nil
	}
	n, err := s.rxPackets()
	if err != nil {
		return 0, err
	}
	return n - s.rx0, nil
}

// ringDrops returns the frames the sink's ring dropped (0 for a counter).
func (s *sink) ringDrops() uint64 {
	if s.p == nil {
		return 0
	}
	st, _ := s.p.Stats()
	return st.RingDrops
}

// close stops the sink.
func (s *sink) close() {
	if s.p == nil {
		s.h.Close()
		return
	}
	s.p.Close()
	<-s.done
}

// loop reads blocks until the port is closed.
func (s *sink) loop() {
	defer close(s.done)
	var f afpacket.Frame
	var wire []byte // the frame received, its VLAN tag put back
	for {
		b, err := s.p.ReadBlock(100 * time.Millisecond)
		if err != nil {
			if errors.Is(err, afpacket.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // not expected (ErrBusy): do not spin
			continue
		}
		if b == nil {
			continue // the timeout: nothing arrived
		}
		step := s.step.Load()
		fs := s.fs.Load()
		var n, bad, altered uint64
		for b.Next(&f) {
			if fs == nil || fs.markOff == nil {
				if isTestFrame(f.Data, step) {
					n++
				}
				continue
			}
			st, seq, ok := markOf(f.Data)
			if !ok || st != step {
				continue
			}
			n++
			i := int(uint64(seq) % uint64(len(fs.tmpl)))
			if fs.fwd != nil && !fs.fwd[i] {
				bad++
			}
			wire = f.AppendWire(wire[:0])
			if !sameFrame(wire, fs.tmpl[i], fs.markOff[i]) {
				altered++
			}
		}
		b.Release()
		s.count.Add(n)
		s.misrouted.Add(bad)
		s.altered.Add(altered)
	}
}

// sameFrame reports whether the received frame got (its VLAN tag put
// back) is template tmpl as sent, its 8-byte mark at markOff aside: what
// a switch that forwards without rewriting must deliver.
func sameFrame(got, tmpl []byte, markOff int) bool {
	return len(got) == len(tmpl) && markOff+8 <= len(tmpl) &&
		bytes.Equal(got[:markOff], tmpl[:markOff]) && bytes.Equal(got[markOff+8:], tmpl[markOff+8:])
}

// isTestFrame reports whether d is a test frame of 'step'.
func isTestFrame(d []byte, step uint32) bool {
	return len(d) >= frameLen && binary.BigEndian.Uint16(d[12:]) == 0x0800 &&
		binary.BigEndian.Uint32(d[payloadOff:]) == benchMagic &&
		binary.BigEndian.Uint32(d[payloadOff+4:]) == step
}

// begin starts counting the frames of 'step' from zero.
func (s *sink) begin(step uint32) error {
	if s.p != nil {
		s.step.Store(step)
		s.count.Store(0)
		s.misrouted.Store(0)
		s.altered.Store(0)
		return nil
	}
	n, err := s.rxPackets()
	s.rx0 = n
	return err
}
