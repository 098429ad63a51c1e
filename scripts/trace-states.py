#!/usr/bin/env python3
"""Where a Go execution trace's busiest goroutines spent their time, and
how long their system calls took.

    go tool trace -d=parsed FILE > FILE.txt
    scripts/trace-states.py FILE.txt

gswitchd writes the trace with --trace (cmd/gswitchd). The script follows
every goroutine's state transitions and prints:
  - the span of the trace, and for the goroutines that were busiest
    (running, runnable or in a system call) the microseconds they spent
    in each state;
  - the system calls by the first four frames of their stack outside the
    runtime: count, total, p50/p90/p99/max microseconds and how many
    took over 500 µs; and the runnable times (a woken goroutine waiting
    for a processor).
A system call that took much longer than its work (a sleep of 50 µs that
lasted milliseconds) was a thread waiting for a core. docs/benchmarks.md
uses it for the datapath workers (2026-11-26); scripts/trace-waits.py
groups the goroutines' waits instead.
"""
import collections
import importlib.util
import os
import sys

# The trace's events, parsed as scripts/trace-waits.py parses them.
_spec = importlib.util.spec_from_file_location('trace_waits', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'trace-waits.py'))
tw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tw)


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def main(path):
    lines = open(path).read().split('\n')
    state = {}  # goroutine: (state, since ns, syscall stack key)
    spent = collections.defaultdict(lambda: collections.defaultdict(float))
    calls = collections.defaultdict(list)
    runnable = []
    first = last = None
    for t, kind, rest, stack in tw.events(lines):
        m = tw.TRANSITION.search(rest) if kind == 'StateTransition' else None
        if not m:
            continue
        g, to = int(m.group(1)), m.group(3)
        first = t if first is None else first
        last = t
        if g in state:
            s, since, key = state[g]
            us = (t - since) / 1e3
            spent[g][s] += us
            if s == 'Syscall':
                calls[key].append(us)
            elif s == 'Runnable':
                runnable.append(us)
        key = ''
        if to == 'Syscall':
            outside = [f.split('/')[-1] for f in stack if not f.startswith('runtime.')]
            key = ' < '.join(outside[:4])
        state[g] = (to, t, key)
    if first is None:
        sys.exit('no state transitions: is this the output of go tool trace -d=parsed?')
    print('span %.0f us' % ((last - first) / 1e3))
    busy = lambda d: d['Running'] + d['Runnable'] + d['Syscall']
    print('busiest goroutines, microseconds by state:')
    for g, d in sorted(spent.items(), key=lambda kv: -busy(kv[1]))[:8]:
        print('  goroutine %d: %s' % (g, ', '.join('%s %.0f' % (s, v) for s, v in sorted(d.items()))))
    print('system calls: n, total us, p50/p90/p99/max us, >500us, stack')
    for key, v in sorted(calls.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print('  %6d %9.0f %7.1f %7.1f %7.1f %8.1f %4d  %s' % (len(v), sum(v), quantile(v, .5), quantile(v, .9),
                                                             quantile(v, .99), max(v), sum(1 for x in v if x > 500), key))
    print('runnable: n %d, p50 %.1f, p99 %.1f, max %.1f us' % (len(runnable), quantile(runnable, .5),
                                                               quantile(runnable, .99), max(runnable or [0])))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
