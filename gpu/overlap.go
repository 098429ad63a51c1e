package gpu

import "github.com/gswitch/gswitch/tables/flow"

// flowWhile is a backend whose flow lookups run other work while the
// device answers (*CUDA: once the keys and the kernel are on their
// stream, before the wait for the results).
type flowWhile interface {
	// lookupFlowWhile is LookupFlow, calling *meanwhile, if it holds a
	// func, while the device answers; it clears *meanwhile when it does.
	lookupFlowWhile(id TableID, soa []uint32, n int, out []flow.RuleID, meanwhile *func()) error
}

// LookupFlowWhile is LookupFlow that also runs meanwhile, exactly once:
// while the device answers when the lookup goes to a device (one device in
// service for table id, n at or above the table's floor), else before the
// lookup. A datapath worker sends its previous run's frames there, so that
// the device's time is not lost to the worker (pipeline, RunWorker).
// meanwhile must not look up on the Engine (it runs with the device's
// lookup slot held). It allocates no more than LookupFlow does.
func (e *Engine) LookupFlowWhile(id TableID, soa []uint32, n int, out []flow.RuleID, meanwhile func()) error {
	if meanwhile == nil {
		return e.LookupFlow(id, soa, n, out)
	}
	i, fw := -1, flowWhile(nil)
	if n > 0 && len(out) >= n && !e.cpuServes(id, n) {
		for k, d := range e.devs {
			if d.serves(id) {
				if i >= 0 { // several: split cuts the lookup
					i = -1
					break
				}
				i = k
			}
		}
		if i >= 0 {
			fw, _ = e.devs[i].b.(flowWhile)
		}
	}
	if fw == nil {
		meanwhile()
		return e.LookupFlow(id, soa, n, out)
	}
	m := meanwhile
	err := fw.lookupFlowWhile(id, soa, n, out, &m)
	runMeanwhile(&m) // the lookup failed before the device had it
	return e.devResult(i, e.devs[i], n, err, func() error { return e.cpu.LookupFlow(id, soa, n, out) })
}

// runMeanwhile calls the func *m holds, if any, once: it is cleared first.
func runMeanwhile(m *func()) {
	if m == nil || *m == nil {
		return
	}
	f := *m
	*m = nil
	f()
}
