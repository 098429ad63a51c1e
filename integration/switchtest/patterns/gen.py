#!/usr/bin/python3
"""gen.py — writes gswitch's own Switch Test Tool patterns for groups and
meters (group/*.json, meter/*.json beside this file), in the format of
os_ken/tests/switch/tester.py: a file is [description, test, ...]; a test
has "prerequisite" messages (OFPGroupMod, OFPMeterMod, OFPFlowMod, sent to
the target in order) and "tests": an "ingress" packet with the "egress"
packet expected on the tester's port 2, or "ingress" "packets" sent at
"pktps" for "duration_time" seconds with "egress" "throughput" rates that
the tester's flows (matching in_port 2 or 3, and more) must count within
10%.

The shared pattern set (../shared/data/ryu-of13) has no group or meter
patterns; these cover all, select (equal and weighted), indirect and
fast-failover groups and meters with drop bands in kb/s and packets/s with
a burst and DSCP-remark bands.

The tool checks absolute rates, but its Python sender does not keep the
rate it is given on a busy 2-core machine (asked for 200 or 300 packets/s
it sent 148 to 250 in the first runs). So a test whose expected rates
follow from the offered rate (the copies of an all group, the split of a
select group, the remarked part of a DSCP-remark band) offers 300
packets/s through a regulator: a drop meter of REG packets/s on the
table-0 flow, before the group or the meter under test. What passes the
regulator is REG packets/s however slow the sender, as long as it sends
more than that; the regulator is itself a meter test.

Each file's single-packet tests go to NAME.json (quick: the CI subset
runs them), its rate tests to NAME_rate.json (6 to 12 s each: the full
run, GSWITCH_SWITCHTEST=full).

Run: integration/switchtest/patterns/gen.py (rewrites the .json files).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

ETH_IPV4 = "ethernet(dst='22:22:22:22:22:22', src='12:11:11:11:11:11', ethertype=2048)"
ETH_IPV6 = "ethernet(dst='22:22:22:22:22:22', src='12:11:11:11:11:11', ethertype=34525)"
ETH_ARP = "ethernet(dst='22:22:22:22:22:22', src='12:11:11:11:11:11', ethertype=2054)"
IPV4 = "ipv4(tos=32, proto=6, src='192.168.10.10', dst='192.168.20.20', ttl=64)"
IPV6 = "ipv6(dst='20::20', flow_label=100, src='10::10', nxt=6, hop_limit=64, traffic_class=32)"
TCP = "tcp(dst_port=2222, option=bytes(b'\\x00' * 4), src_port=11111)"
ARP = "arp(dst_ip='192.168.20.20', dst_mac='22:22:22:22:22:22', opcode=1, src_ip='192.168.10.10', src_mac='12:11:11:11:11:11')"
PAYLOAD = "bytes(b'\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\t\\n\\x0b\\x0c\\r\\x0e\\x0f\\x10\\x11\\x12\\x13\\x14\\x15\\x16\\x17\\x18\\x19\\x1a\\x1b\\x1c\\x1d\\x1e\\x1f')"

# Flows of random addresses and ports (the tool evaluates the text again
# for every packet when it holds "randint"), for select groups, whose
# bucket is chosen per flow.
RAND_IPV4 = ("ipv4(tos=32, proto=6, src='10.%d.%d.%d' % (randint(0, 255), randint(0, 255), randint(1, 254)), "
             "dst='192.168.20.20', ttl=64)")
RAND_TCP = "tcp(dst_port=2222, src_port=randint(1024, 65535))"
BULK = "bytes(b'\\x11' * 900)"  # 958-byte frames with eth/ipv4/tcp


def out(port):
    return {"OFPActionOutput": {"port": port}}


def set_field(field, value):
    return {"OFPActionSetField": {"field": {"OXMTlv": {"field": field, "value": value}}}}


def apply(*actions):
    return {"OFPInstructionActions": {"actions": list(actions), "type": 4}}


def flow(instructions, in_port=1, table_id=0):
    return {"OFPFlowMod": {"table_id": table_id, "match": {"OFPMatch": {"oxm_fields": [
        {"OXMTlv": {"field": "in_port", "value": in_port}}]}}, "instructions": instructions}}


def group(gid, gtype, buckets):
    return {"OFPGroupMod": {"group_id": gid, "type": gtype, "buckets": buckets}}


def bucket(actions, weight=0, watch_port=None):
    b = {"actions": actions}
    if weight:
        b["weight"] = weight
    if watch_port is not None:
        b["watch_port"] = watch_port
    return {"OFPBucket": b}


def match(**fields):
    order = ["in_port", "eth_type", "ip_dscp"]
    return {"oxm_fields": [{"OXMTlv": {"field": f, "value": fields[f]}} for f in order if f in fields]}


def rates(*pairs):
    """pairs: (match fields dict, unit, value)."""
    return {"throughput": [dict({"OFPMatch": match(**m)}, **{unit: v}) for m, unit, v in pairs]}


def packets(data, pktps, seconds=6):
    return {"packets": {"data": data, "pktps": pktps, "duration_time": seconds}}


REG = 150  # packets/s let through by the regulator meter (id 100)


def regulator():
    return meter_mod(100, OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, {"OFPMeterBandDrop": {"rate": REG, "burst_size": 10}})


def regulated(*instructions, goto=None):
    """A table-0 flow for in_port 1: the regulator, then instructions."""
    ins = [{"OFPInstructionMeter": {"meter_id": 100}}] + list(instructions)
    if goto is not None:
        ins.append({"OFPInstructionGotoTable": {"table_id": goto}})
    return flow(ins)


def test(desc, prereq, tests):
    return {"description": desc, "prerequisite": prereq, "tests": tests}


OFPGT_ALL, OFPGT_SELECT, OFPGT_INDIRECT, OFPGT_FF = 0, 1, 2, 3
OFPMF_KBPS, OFPMF_PKTPS, OFPMF_BURST, OFPMF_STATS = 1, 2, 4, 8

IPV4_PKT = [ETH_IPV4, IPV4, TCP, PAYLOAD]
IPV6_PKT = [ETH_IPV6, IPV6, TCP, PAYLOAD]
ARP_PKT = [ETH_ARP, ARP]


def one(ingress, egress):
    return [{"ingress": ingress, "egress": egress}]


def group_files():
    files = {}
    # all: every bucket gets a copy; single packets check port 2 (with the
    # bucket's own set-field), a stream checks ports 2 and 3.
    all_ = ["group: 00_ALL"]
    for name, pkt in [("ipv4/tcp", IPV4_PKT), ("ipv6/tcp", IPV6_PKT), ("arp", ARP_PKT)]:
        all_.append(test(
            "ethernet/%s-->'in_port=1,actions=group:all(actions=set_field:aa:aa:aa:aa:aa:aa->eth_dst,output:2/actions=output:3)'" % name,
            [group(1, OFPGT_ALL, [bucket([set_field("eth_dst", "aa:aa:aa:aa:aa:aa"), out(2)]), bucket([out(3)])]),
             flow([apply({"OFPActionGroup": {"group_id": 1}})])],
            one(pkt, [pkt[0].replace("dst='22:22:22:22:22:22'", "dst='aa:aa:aa:aa:aa:aa'")] + pkt[1:])))
    all_.append(test(
        "300pktps(ethernet/ipv4/tcp)-->'in_port=1,meter:drop(rate=%dpktps),actions=group:all(actions=output:2/actions=output:3)'" % REG,
        [regulator(), group(1, OFPGT_ALL, [bucket([out(2)]), bucket([out(3)])]),
         regulated(apply({"OFPActionGroup": {"group_id": 1}}))],
        [{"ingress": packets([ETH_IPV4, IPV4, TCP, BULK], 300),
          "egress": rates(({"in_port": 2}, "pktps", REG), ({"in_port": 3}, "pktps", REG))}]))
    files["00_ALL.json"] = all_

    # select: one live bucket per flow, by weight; random flows split.
    sel = ["group: 01_SELECT"]
    # Random flows split binomially: of 1,800 packets (12 s at REG), a
    # bucket's share of a third is off by more than 10% with a
    # probability of about 0.3% (3 sigma), a share of a half far less.
    for w2, w3 in [(1, 1), (1, 2)]:
        r2 = REG * w2 / (w2 + w3)
        sel.append(test(
            "300pktps(random ethernet/ipv4/tcp flows)-->'in_port=1,meter:drop(rate=%dpktps),actions=group:select(weight=%d,actions=output:2/weight=%d,actions=output:3)'" % (REG, w2, w3),
            [regulator(), group(1, OFPGT_SELECT, [bucket([out(2)], weight=w2), bucket([out(3)], weight=w3)]),
             regulated(apply({"OFPActionGroup": {"group_id": 1}}))],
            [{"ingress": packets([ETH_IPV4, RAND_IPV4, RAND_TCP, BULK], 300, 12),
              "egress": rates(({"in_port": 2}, "pktps", r2), ({"in_port": 3}, "pktps", REG - r2))}]))
    # A bucket of weight 0 is never chosen (§5.6.1).
    sel.append(test(
        "ethernet/ipv4/tcp-->'in_port=1,actions=group:select(weight=0,actions=output:3/weight=1,actions=output:2)'",
        [group(1, OFPGT_SELECT, [bucket([out(3)], weight=0), bucket([out(2)], weight=1)]),
         flow([apply({"OFPActionGroup": {"group_id": 1}})])],
        one(IPV4_PKT, IPV4_PKT)))
    files["01_SELECT.json"] = sel

    # indirect: the one bucket, shared by two flows.
    ind = ["group: 02_INDIRECT"]
    for name, pkt in [("ipv4/tcp", IPV4_PKT), ("ipv6/tcp", IPV6_PKT), ("arp", ARP_PKT)]:
        ind.append(test(
            "ethernet/%s-->'in_port=1,actions=group:indirect(actions=set_field:aa:aa:aa:aa:aa:aa->eth_src,output:2)'" % name,
            [group(1, OFPGT_INDIRECT, [bucket([set_field("eth_src", "aa:aa:aa:aa:aa:aa"), out(2)])]),
             flow([apply({"OFPActionGroup": {"group_id": 1}})]),
             flow([apply({"OFPActionGroup": {"group_id": 1}})], in_port=3)],
            one(pkt, [pkt[0].replace("src='12:11:11:11:11:11'", "src='aa:aa:aa:aa:aa:aa'")] + pkt[1:])))
    files["02_INDIRECT.json"] = ind

    # fast failover: the first live bucket. The tool cannot take a port
    # down, so a bucket watching port 4 (no such port: never live) stands
    # for a dead link, and ports 2 and 3 are up.
    ff = ["group: 03_FF"]
    for desc, buckets, pkts in [
        ("watch_port=2,actions=output:2/watch_port=3,actions=output:3", [bucket([out(2)], watch_port=2), bucket([out(3)], watch_port=3)], None),
        ("watch_port=4,actions=output:3/watch_port=2,actions=output:2", [bucket([out(3)], watch_port=4), bucket([out(2)], watch_port=2)], None),
        ("watch_port=4,actions=output:2/watch_port=3,actions=output:3", [bucket([out(2)], watch_port=4), bucket([out(3)], watch_port=3)], "rate"),
    ]:
        if pkts is None:
            tests = one(IPV4_PKT, IPV4_PKT)
            d = "ethernet/ipv4/tcp-->'in_port=1,actions=group:ff(%s)'" % desc
            ff.append(test(d, [group(1, OFPGT_FF, buckets), flow([apply({"OFPActionGroup": {"group_id": 1}})])], tests))
        else:
            tests = [{"ingress": packets([ETH_IPV4, IPV4, TCP, BULK], 300),
                      "egress": rates(({"in_port": 3}, "pktps", REG))}]
            d = "300pktps(ethernet/ipv4/tcp)-->'in_port=1,meter:drop(rate=%dpktps),actions=group:ff(%s)'" % (REG, desc)
            ff.append(test(d, [regulator(), group(1, OFPGT_FF, buckets), regulated(apply({"OFPActionGroup": {"group_id": 1}}))], tests))
    files["03_FF.json"] = ff
    return files


def meter_mod(mid, flags, band):
    return {"OFPMeterMod": {"meter_id": mid, "flags": flags, "bands": [band]}}


def meter_flow(mid):
    return flow([{"OFPInstructionMeter": {"meter_id": mid}}, apply(out(2))])


def meter_files():
    files = {}
    # 958-byte frames at 300 packets/s: 2,299 kb/s offered (kb = 1000 bits);
    # the tool's kbps is 1024 bits/s, so a meter of R kb/s shows R*1000/1024.
    drop = ["meter: 01_DROP"]
    for rate in (1000, 500):
        drop.append(test(
            "300pktps(ethernet/ipv4/tcp)-->'in_port=1,meter:drop(rate=%dkbps,burst=100kb),actions=output:2'" % rate,
            [meter_mod(1, OFPMF_KBPS | OFPMF_BURST | OFPMF_STATS, {"OFPMeterBandDrop": {"rate": rate, "burst_size": 100}}), meter_flow(1)],
            [{"ingress": packets([ETH_IPV4, IPV4, TCP, BULK], 300),
              "egress": rates(({"in_port": 2}, "kbps", round(rate * 1000 / 1024)))}]))
    for rate in (100, 50):
        drop.append(test(
            "300pktps(ethernet/ipv4/tcp)-->'in_port=1,meter:drop(rate=%dpktps,burst=10),actions=output:2'" % rate,
            [meter_mod(1, OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, {"OFPMeterBandDrop": {"rate": rate, "burst_size": 10}}), meter_flow(1)],
            [{"ingress": packets([ETH_IPV4, IPV4, TCP, BULK], 300),
              "egress": rates(({"in_port": 2}, "pktps", rate))}]))
    # Under the rate nothing is dropped.
    drop.append(test(
        "ethernet/ipv4/tcp-->'in_port=1,meter:drop(rate=100pktps,burst=10),actions=output:2'",
        [meter_mod(1, OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, {"OFPMeterBandDrop": {"rate": 100, "burst_size": 10}}), meter_flow(1)],
        one(IPV4_PKT, IPV4_PKT)))
    files["01_DROP.json"] = drop

    # DSCP remark: AF11 (dscp 10, tos 40) over the rate leaves as AF12
    # (dscp 12), the rest as sent.
    af11 = IPV4.replace("tos=32", "tos=40")
    remark = ["meter: 02_DSCP_REMARK"]
    # The regulator (table 0) lets REG packets/s through to table 1, whose
    # flow's meter remarks what exceeds its band.
    for unit, flags, rate, burst in [("pktps", OFPMF_PKTPS, 50, 10), ("kbps", OFPMF_KBPS, 500, 100)]:
        under = rate if unit == "pktps" else round(rate * 1000 / 958 / 8)  # packets/s under the band
        remark.append(test(
            "300pktps(ethernet/ipv4(dscp=10)/tcp)-->'in_port=1,meter:drop(rate=%dpktps),goto_table:1','table_id=1,meter:dscp_remark(rate=%d%s,burst=%d,prec_level=1),actions=output:2'" % (REG, rate, unit, burst),
            [regulator(), meter_mod(1, flags | OFPMF_BURST | OFPMF_STATS,
                                    {"OFPMeterBandDscpRemark": {"rate": rate, "burst_size": burst, "prec_level": 1}}),
             regulated(goto=1),
             flow([{"OFPInstructionMeter": {"meter_id": 1}}, apply(out(2))], table_id=1)],
            [{"ingress": packets([ETH_IPV4, af11, TCP, BULK], 300),
              "egress": rates(({"in_port": 2, "eth_type": 2048, "ip_dscp": 10}, "pktps", under),
                              ({"in_port": 2, "eth_type": 2048, "ip_dscp": 12}, "pktps", REG - under))}]))
    remark.append(test(
        "ethernet/ipv4(dscp=10)/tcp-->'in_port=1,meter:dscp_remark(rate=100pktps,burst=10,prec_level=1),actions=output:2'",
        [meter_mod(1, OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
                   {"OFPMeterBandDscpRemark": {"rate": 100, "burst_size": 10, "prec_level": 1}}), meter_flow(1)],
        one([ETH_IPV4, af11, TCP, PAYLOAD], [ETH_IPV4, af11, TCP, PAYLOAD])))
    files["02_DSCP_REMARK.json"] = remark
    return files


def is_rate(t):
    return any(isinstance(c["ingress"], dict) for c in t["tests"])


def main():
    """Writes each file's single-packet tests to NAME.json (a second or
    so each: the CI subset runs them) and its rate tests to NAME_rate.json
    (6 to 12 s each: the full run)."""
    for folder, files in [("group", group_files()), ("meter", meter_files())]:
        os.makedirs(os.path.join(HERE, folder), exist_ok=True)
        for name, content in files.items():
            desc, tests = content[0], content[1:]
            base = name[:-len(".json")]
            for suffix, part in [("", [t for t in tests if not is_rate(t)]), ("_rate", [t for t in tests if is_rate(t)])]:
                if not part:
                    continue
                with open(os.path.join(HERE, folder, base + suffix + ".json"), "w") as f:
                    json.dump([desc + (" (rate)" if suffix else "")] + part, f, indent=1)
                    f.write("\n")


if __name__ == "__main__":
    main()
