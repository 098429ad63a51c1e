package afpacket

import (
	"golang.org/x/sys/unix"
)

// Re-attachment by name (see "Link state" in the package documentation).
//
// When the interface a Port was opened on is deleted, its sockets are
// dead: the kernel unbinds them (their ifindex is gone) and they receive
// nothing more. When an interface of the same name appears later, the
// watcher calls reattach: it opens a complete new set of sockets on the
// new ifindex (receive queues with fresh rings, a new fanout group where
// there are several, the transmit socket) exactly as Open does, and swaps
// them into the Port's existing Queue values and transmit descriptor.
// Everything that holds the Port or a Queue (the datapath's readers, the
// switch's sender, the router) keeps working on the new interface without
// knowing. A fanout socket cannot be re-bound (the kernel refuses bind on
// a fanout member), which is why the sockets are new rather than re-bound.
//
// The swap never pulls a ring from under its reader: a Queue's socket,
// ring and generation change under rxMu; a ReadBlock that was waiting on
// the old socket is woken (its socket is closed) and returns no block, and
// a block the reader still holds keeps its (old) ring mapped until it is
// released. The old rings wait in Queue.stale until then.
//
// Lock order: Queue.statsMu > Queue.rxMu; Port.txMu is taken alone.

// reattach moves the port onto the interface 'info' describes (a new
// ifindex of the same name). On an error nothing of the port changed.
func (p *Port) reattach(info LinkInfo) error {
	if p.closing.Load() {
		return ErrClosed
	}
	tmp := &Port{cfg: p.cfg, index: info.Index, fanout: -1, txFd: -1}
	if err := tmp.openSockets(); err != nil {
		tmp.closeSockets()
		return err
	}
	p.txMu.Lock()
	if p.closing.Load() { // Close ran meanwhile: the new sockets go too
		p.txMu.Unlock()
		tmp.closeSockets()
		return ErrClosed
	}
	oldTx := p.txFd
	p.txFd, p.index, p.fanout = tmp.txFd, info.Index, tmp.fanout
	p.txMu.Unlock()
	if oldTx >= 0 {
		unix.Close(oldTx)
	}
	for i, q := range p.queues {
		q.swap(tmp.queues[i])
	}
	return nil
}

// closeSockets closes what openSockets opened of a port never published.
func (p *Port) closeSockets() {
	for _, q := range p.queues {
		q.close()
	}
	if p.txFd >= 0 {
		unix.Close(p.txFd)
		p.txFd = -1
	}
}

// swap replaces q's socket and ring by nq's (a queue opened on the new
// interface, never read) and closes the old socket. The old ring is
// unmapped now, or when the reader is done with it. On a closed queue the
// new socket is closed instead.
func (q *Queue) swap(nq *Queue) {
	q.statsMu.Lock()
	defer q.statsMu.Unlock()
	q.foldKernelStatsLocked() // the old socket's last ring counters
	q.rxMu.Lock()
	defer q.rxMu.Unlock()
	if q.closed {
		nq.close()
		return
	}
	oldFile, oldRing := q.file, q.ring
	q.file, q.raw, q.ring = nq.file, nq.raw, nq.ring
	q.next = 0
	q.gen++
	q.stale = append(q.stale, oldRing)
	oldFile.Close() // wakes a ReadBlock waiting on it
	if !q.held && !q.reading {
		q.unmapStaleLocked()
	}
}

// unmapStaleLocked unmaps the rings of earlier sockets; the caller holds
// rxMu and no reader holds or waits on one of them.
func (q *Queue) unmapStaleLocked() {
	for _, r := range q.stale {
		unix.Munmap(r)
	}
	q.stale = nil
}

// foldKernelStatsLocked adds the socket's PACKET_STATISTICS (which the
// kernel resets on each read) to the queue's ring counters; the caller
// holds statsMu. It reports ErrClosed for a closed socket.
func (q *Queue) foldKernelStatsLocked() error {
	var kerr error
	cerr := q.raw.Control(func(fd uintptr) {
		st, err := unix.GetsockoptTpacketStatsV3(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			kerr = sysErr("PACKET_STATISTICS", err)
			return
		}
		q.ringDrops += uint64(st.Drops)
		q.ringFreezes += uint64(st.Freeze_q_cnt)
	})
	if cerr != nil {
		return ErrClosed
	}
	return kerr
}
