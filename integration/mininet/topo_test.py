#!/usr/bin/python3
"""Mininet topologies whose switches are gswitchd (gswitch.GSwitch).

  topo_test.py --topo single3|linear3 [--controller tcp:IP:PORT]
               [--iperf-seconds N]

single3: one switch, 3 hosts.  linear3: 3 switches in a line, 2 hosts
each (no loops, so standalone learning is safe).  With no --controller
the switches run in standalone fail mode (gswitchd's L2 learning);
with one, Mininet's RemoteController points every switch at it.

It pings every pair of hosts (net.pingAll), runs iperf3 for N seconds
between the first and the last host (across every switch of linear3),
stops the network (each gswitchd by SIGTERM) and prints one line:

  RESULT topo=linear3 controller=none hosts=6 switches=3 pings=30
         ping_loss=0 iperf_mbps=812.3 iperf_bytes=... clean_stop=1

The exit status is 1 when a ping was lost, iperf3 moved nothing, or a
gswitchd did not exit cleanly; 2 when the network could not be built.
Run as root with GSWITCHD set to the gswitchd binary.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=wrong-import-position
from mininet.log import setLogLevel, info, error
from mininet.net import Mininet
from mininet.node import RemoteController
from mininet.topo import LinearTopo, SingleSwitchTopo

from gswitch import GSwitch


def build(name):
    if name == 'single3':
        return SingleSwitchTopo(k=3)
    if name == 'linear3':
        return LinearTopo(k=3, n=2)
    raise SystemExit('unknown topology %r' % name)


def iperf3(client, server, seconds):
    "iperf3 from client to server; (bits/s, bytes received, error)."
    pidfile = '/tmp/gswitch-mn-iperf3-%s.pid' % server.name
    if os.environ.get('GSWITCH_MN_DIR'):
        pidfile = os.path.join(os.environ['GSWITCH_MN_DIR'],
                               'iperf3-%s.pid' % server.name)
    server.cmd('iperf3 -s -1 -p 5201 -D --logfile /dev/null -I %s' % pidfile)
    out = ''
    for _ in range(50):  # until the server listens
        out = client.cmd('timeout %d iperf3 -c %s -p 5201 -t %d -J '
                         '--connect-timeout 2000' %
                         (seconds + 10, server.IP(), seconds))
        if 'Connection refused' not in out:
            break
        time.sleep(0.1)
    # -1: the server exits after one test; this stops one never reached.
    server.cmd('kill $(cat %s) 2>/dev/null; rm -f %s' % (pidfile, pidfile))
    try:
        res = json.loads(out)
    except ValueError:
        return 0.0, 0, 'iperf3 output is not JSON: %s' % out[-2000:]
    if 'error' in res:
        return 0.0, 0, 'iperf3: %s' % res['error']
    s = res['end']['sum_received']
    return s['bits_per_second'], s['bytes'], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--topo', required=True, choices=['single3', 'linear3'])
    ap.add_argument('--controller', default='',
                    help='tcp:IP:PORT of a remote controller')
    ap.add_argument('--iperf-seconds', type=int, default=2)
    ap.add_argument('--verbosity', default='info')
    a = ap.parse_args()
    setLogLevel(a.verbosity)

    controller = None
    cname = 'none'
    if a.controller:
        proto, ip, port = a.controller.split(':')
        if proto != 'tcp':
            raise SystemExit('--controller wants tcp:IP:PORT')
        cname = a.controller

        def controller(name):  # pylint: disable=function-redefined
            return RemoteController(name, ip=ip, port=int(port))

    net = Mininet(topo=build(a.topo), switch=GSwitch, controller=controller,
                  autoSetMacs=True, waitConnected=False, build=False)
    problems = []
    try:
        net.build()
        for h in net.hosts:
            h.cmd('sysctl -qw net.ipv6.conf.all.disable_ipv6=1 '
                  'net.ipv6.conf.default.disable_ipv6=1')
        net.start()
        if not net.waitConnected(timeout=30):
            raise RuntimeError('the switches did not connect (see the '
                               'gswitchd logs: %s)' %
                               ' '.join(s.logPath for s in net.switches))
    except Exception as e:  # pylint: disable=broad-except
        error('*** cannot build the network: %s\n' % e)
        for s in net.switches:
            error('*** %s log:\n%s\n' % (s.name, s.log()))
        net.stop()
        print('RESULT topo=%s controller=%s error=build' % (a.topo, cname))
        return 2

    hosts = net.hosts
    n = len(hosts)
    loss = net.pingAll(timeout='2')
    pings = n * (n - 1)
    lost = int(round(loss * pings / 100.0))
    if lost:
        problems.append('%d of %d pings lost' % (lost, pings))

    src, dst = hosts[0], hosts[-1]
    info('*** iperf3 %s -> %s for %d s\n' % (src, dst, a.iperf_seconds))
    bps, nbytes, err = iperf3(src, dst, a.iperf_seconds)
    if err:
        problems.append(err)
    elif bps <= 0 or nbytes == 0:
        problems.append('iperf3 moved no data')

    for s in net.switches:
        try:
            st = s.ctl('stats')
            info('*** %s stats: %s\n' % (s.name, json.dumps(st)))
        except Exception as e:  # pylint: disable=broad-except
            problems.append('%s control socket: %s' % (s.name, e))

    logs = {s.name: s for s in net.switches}
    # gswitchd first, while its interfaces still exist (Mininet's stop()
    # deletes the links before it stops the switches).
    for s in net.switches:
        s.stopDaemon()
    net.stop()
    clean = all(s.stoppedCleanly for s in logs.values())
    if not clean:
        problems.append('a gswitchd did not exit cleanly on SIGTERM')
    if problems:
        for p in problems:
            error('*** problem: %s\n' % p)
        for name, s in logs.items():
            error('*** %s log (%s):\n%s\n' % (name, s.logPath, s.log()[-4000:]))

    print('RESULT topo=%s controller=%s hosts=%d switches=%d pings=%d '
          'ping_loss=%g ping_lost=%d iperf_mbps=%.1f iperf_bytes=%d '
          'clean_stop=%d' % (a.topo, cname, n, len(net.switches), pings,
                             loss, lost, bps / 1e6, nbytes, int(clean)))
    sys.stdout.flush()
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
