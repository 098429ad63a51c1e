"""Mininet switch class that runs gswitchd.

GSwitch is a Mininet Switch whose start() launches the gswitchd binary
named by the GSWITCHD environment variable (default: gswitchd on PATH)
with:

  --datapath-id 0x<dpid>        Mininet's dpid (s3 -> 0x3)
  --port N=IFNAME               one per data interface, N its Mininet port
  --controller tcp:IP:PORT      one per Mininet controller, or
  --fail-mode standalone        where there is none (an L2 learning switch)
  --ctl-socket DIR/NAME.sock    a private control socket
  2> DIR/NAME.log               its log (and its pid in DIR/NAME.pid)

DIR is GSWITCH_MN_DIR, or a fresh temporary folder.  The switch runs in
the root namespace (Mininet's default for switches), like OVS.  IPv6 is
disabled on its interfaces so the kernel's own router and neighbour
solicitations stay off the links; nothing else (offloads included) is
changed: gswitchd finishes partial checksums and segments GSO frames
itself.  stop() sends SIGTERM and waits; a gswitchd that does not exit 0
within 5 s is an error (stopped_cleanly is False, and the log says why).

Use:  Mininet(topo, switch=GSwitch, controller=None)
"""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

from mininet.log import error, info
from mininet.node import Switch


class GSwitch(Switch):
    "A Mininet switch served by gswitchd."

    def __init__(self, name, failMode=None, extraArgs=None, **params):
        """failMode: 'secure' or 'standalone'; default: standalone with no
           controller, secure (gswitchd's default) with one.
           extraArgs: more gswitchd flags (list)."""
        Switch.__init__(self, name, **params)
        self.failMode = failMode
        self.extraArgs = list(extraArgs or [])
        self.proc = None
        self.nControllers = 0
        self.logf = None
        self.exitCode = None
        self.stoppedCleanly = None
        base = os.environ.get('GSWITCH_MN_DIR')
        if base:
            os.makedirs(base, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix='gswitch-%s-' % name, dir=base)
        self.ctlSocket = os.path.join(self.dir, name + '.sock')
        self.logPath = os.path.join(self.dir, name + '.log')

    @classmethod
    def setup(cls):
        "Check the binary exists."
        binary = cls.binary()
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise Exception('gswitchd binary %r not found: set GSWITCHD' %
                            binary)

    @staticmethod
    def binary():
        return os.environ.get('GSWITCHD', 'gswitchd')

    def dataIntfs(self):
        "Our data interfaces and their OpenFlow port numbers."
        return [(port, intf) for port, intf in sorted(self.intfs.items())
                if intf.name != 'lo' and port > 0]

    def args(self, controllers):
        "gswitchd's command line."
        args = [self.binary(), '--datapath-id', '0x' + self.dpid,
                '--ctl-socket', self.ctlSocket]
        for port, intf in self.dataIntfs():
            args += ['--port', '%d=%s' % (port, intf.name)]
        for c in controllers:
            args += ['--controller', 'tcp:%s:%d' % (c.IP(), c.port)]
        mode = self.failMode or ('secure' if controllers else 'standalone')
        args += ['--fail-mode', mode]
        return args + self.extraArgs

    def start(self, controllers):
        "Bring the interfaces up (IPv6 off) and launch gswitchd."
        self.setup()
        for _, intf in self.dataIntfs():
            path = '/proc/sys/net/ipv6/conf/%s/disable_ipv6' % intf.name
            if os.path.exists(path):
                with open(path, 'w') as f:
                    f.write('1')
            self.cmd('ip link set dev %s up' % intf.name)
        args = self.args(controllers)
        self.nControllers = len(controllers)
        info('*** %s: %s\n' % (self.name, ' '.join(args)))
        self.logf = open(self.logPath, 'ab')
        # Its own session: Mininet's cleanup and the shell's signals do
        # not reach it; stop() does.
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=self.logf,
                                     start_new_session=True)
        # For a harness that must clean up after a killed Mininet.
        with open(os.path.join(self.dir, self.name + '.pid'), 'w') as f:
            f.write('%d\n' % self.proc.pid)
        deadline = time.time() + 10
        while not os.path.exists(self.ctlSocket):
            if self.proc.poll() is not None:
                raise Exception('%s: gswitchd exited at start (%d):\n%s' %
                                (self.name, self.proc.returncode, self.log()))
            if time.time() > deadline:
                raise Exception('%s: gswitchd made no control socket in '
                                '10 s:\n%s' % (self.name, self.log()))
            time.sleep(0.05)

    def log(self):
        try:
            with open(self.logPath, errors='replace') as f:
                return f.read()
        except OSError as e:
            return str(e)

    def ctl(self, what):
        """GET /v1/WHAT from gswitchd's control socket (HTTP over a unix
           socket); the decoded JSON answer."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(self.ctlSocket)
            s.sendall(('GET /v1/%s HTTP/1.0\r\nHost: gswitchd\r\n\r\n' %
                       what).encode())
            data = b''
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        head, _, body = data.partition(b'\r\n\r\n')
        if not head.startswith(b'HTTP/1.') or b' 200 ' not in head.split(
                b'\r\n')[0]:
            raise Exception('%s: /v1/%s: %r' % (self.name, what, head))
        return json.loads(body)

    def connected(self):
        "Running, and (with controllers) connected to one."
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            st = self.ctl('stats')
        except Exception:  # pylint: disable=broad-except
            return False
        if not self.nControllers:
            return True
        return st.get('Controller', 0) > 0

    def stopDaemon(self):
        "SIGTERM gswitchd and wait for it; records whether it exited 0."
        if self.proc is None:
            return self.stoppedCleanly
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exitCode = self.proc.wait(5)
            self.stoppedCleanly = self.exitCode == 0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exitCode = self.proc.wait()
            self.stoppedCleanly = False
        if not self.stoppedCleanly:
            error('*** %s: gswitchd did not stop cleanly (exit %s):\n%s\n' %
                  (self.name, self.exitCode, self.log()))
        self.proc = None
        if self.logf:
            self.logf.close()
            self.logf = None
        return self.stoppedCleanly

    @classmethod
    def batchShutdown(cls, switches, run=None):
        "Stop every gswitchd (Mininet then skips stop())."
        for s in switches:
            s.stopDaemon()
        for s in switches:
            Switch.stop(s, deleteIntfs=True)
        return switches

    def stop(self, deleteIntfs=True):
        "Stop gswitchd, then let Mininet delete the interfaces."
        self.stopDaemon()
        Switch.stop(self, deleteIntfs)


switches = {'gswitch': GSwitch}
