#!/usr/bin/env python3
"""Groups the waits of a Go execution trace by reason and place.

    go tool trace -d=parsed FILE > FILE.txt
    scripts/trace-waits.py FILE.txt

gswitchd writes the trace with --trace (cmd/gswitchd). For every
goroutine wait (Running -> Waiting -> Runnable -> Running) it counts the
wait and the runnable time after it (until a processor ran the
goroutine), grouped by the wait's reason and the first three frames of
the stack outside the runtime, and prints the groups by total time:
count, wait p50/p99/max, runnable p50/p99/max (microseconds) and the
waits over a millisecond. docs/benchmarks.md uses it for the latency's
tail (2026-11-26).
"""
import collections
import re
import sys

HDR = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
TRANSITION = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')
SKIP = ('runtime.', 'internal/', 'sync.', 'time.Sleep', 'syscall.', 'os.', 'golang.org')


def events(lines):
    i = 0
    while i < len(lines):
        m = HDR.match(lines[i])
        if not m:
            i += 1
            continue
        kind, t, rest = m.group(4), int(m.group(5)), m.group(6)
        j, stack = i + 1, []
        while j < len(lines) and (lines[j].startswith('\t') or lines[j] in ('Stack=', 'TransitionStack=')):
            if lines[j].startswith('\t') and not lines[j].startswith('\t\t'):
                stack.append(lines[j].strip().split(' @')[0])
            j += 1
        yield t, kind, rest, stack
        i = j


def place(stack):
    s = [f for f in stack if not f.startswith(SKIP)]
    return ' < '.join(f.split('/')[-1] for f in s[:3])


def q(a, p):
    return a[min(len(a) - 1, int(p * len(a)))] / 1e3


def main(path):
    evs = sorted(events(open(path).read().split('\n')), key=lambda e: e[0])
    waiting, groups = {}, collections.defaultdict(list)
    for t, kind, rest, stack in evs:
        m = TRANSITION.search(rest) if kind == 'StateTransition' else None
        if not m:
            continue
        g, to, reason = int(m.group(1)), m.group(3), m.group(4)
        if to == 'Waiting':
            waiting[g] = [t, reason, place(stack), None]
        elif to == 'Runnable' and g in waiting:
            waiting[g][3] = t
        elif to == 'Running' and g in waiting and waiting[g][3] is not None:
            t0, reason, where, t1 = waiting.pop(g)
            groups[(reason, where)].append((t1 - t0, t - t1))
    rows = []
    for key, v in groups.items():
        w, r = sorted(x[0] for x in v), sorted(x[1] for x in v)
        rows.append((sum(w) + sum(r), key, v, w, r))
    rows.sort(key=lambda x: -x[0])
    for _, (reason, where), v, w, r in rows[:25]:
        over = sum(1 for x in v if x[0] > 1e6)
        print(f"n={len(v):6d} wait p50/p99/max {q(w, .5):7.1f}/{q(w, .99):7.1f}/{w[-1] / 1e3:7.1f} "
              f"runnable {q(r, .5):6.1f}/{q(r, .99):6.1f}/{r[-1] / 1e3:6.1f} >1ms {over:4d}  {reason}: {where}")


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: trace-waits.py TRACE.txt (go tool trace -d=parsed output)')
    main(sys.argv[1])
