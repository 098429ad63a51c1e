#!/usr/bin/python3
"""sctp_checksum.py — shows why no switch can pass the Switch Test Tool's
SCTP set-field tests under Python 3 (os-ken 2.5.0).

os_ken/lib/packet/sctp.py computes the checksum it writes into a
serialized SCTP header with `for c in str(data)`: under Python 3
str(bytearray(...)) is the text "bytearray(b'...')", so the CRC32c is
taken over that text and not over the packet. The tool serializes the
expected egress packet that way and compares it byte for byte with what the
switch sent. For every SCTP set-field test in the given pattern files this
prints the checksum the tool expects, the CRC32c of the expected packet
(RFC 9260), and what a switch sends from the tool's ingress packet when it
recomputes the CRC32c (gswitchd, Open vSwitch on a valid packet) or
carries the ingress packet's error through (Open vSwitch): neither equals
the expected value, so every such test fails on the checksum alone.

Usage: sctp_checksum.py PATTERN.json... (e.g. the 17_SCTP_* and 18_SCTP_*
files of ../shared/data/ryu-of13/action/25_SET_FIELD).
"""
import json
import struct
import sys

from os_ken.lib.packet import packet
from os_ken.lib.packet import sctp

from os_ken.tests.switch import tester

ENV = vars(tester)  # the names the tool evaluates its packet texts with


def crc32c(data):
    c = 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return ~c & 0xffffffff


def build(lines):
    p = eval('/'.join(lines), ENV)
    p.serialize()
    return p


def sctp_bytes(p):
    """The SCTP packet's bytes (header and chunks) of a serialized packet."""
    data = bytes(p.data)
    n = sum(len(x) for x in p.protocols[:p.protocols.index(p.get_protocol(sctp.sctp))]
            if not isinstance(x, (bytes, bytearray)))
    return data[n:]


def correct(sc):
    """The CRC32c of an SCTP packet, as its header carries it."""
    return crc32c(sc[:8] + b'\0\0\0\0' + sc[12:])


def field(sc):
    return struct.unpack('<I', sc[8:12])[0]


def main(paths):
    fails = 0
    for path in paths:
        tests = json.load(open(path))
        for t in tests[1:]:
            for case in t['tests']:
                if 'egress' not in case or not isinstance(case['egress'], list):
                    continue
                ing, eg = sctp_bytes(build(case['ingress'])), sctp_bytes(build(case['egress']))
                want = field(eg)
                new = bytearray(ing)
                new[0:4] = eg[0:4]  # the ports the set-field writes
                recomputed = correct(bytes(new))
                carried = field(ing) ^ correct(ing) ^ recomputed
                ok = want in (recomputed, carried)
                fails += not ok
                print('%-70.70s expected %08x (CRC32c of that packet %08x); switch sends %08x recomputed, %08x carried: %s'
                      % (t['description'], want, correct(eg), recomputed, carried, 'passable' if ok else 'NOT passable'))
    print('%d SCTP set-field tests cannot pass' % fails)


if __name__ == '__main__':
    main(sys.argv[1:])
