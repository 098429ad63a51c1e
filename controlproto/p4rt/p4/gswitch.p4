/*
 * gswitch.p4: the fixed pipeline of gswitch, as seen by P4Runtime.
 *
 * gswitch is a fixed-function target: this program is not compiled for it.
 * It documents, in P4_16 (v1model style), what the pipeline does; its
 * P4Info (gswitch.p4info.txtpb) is what a controller loads with
 * SetForwardingPipelineConfig. Every table, action, direct counter,
 * controller header, match field and parameter carries an @id equal to its
 * P4Info id, so that p4c derives the same P4Info from this source:
 *   p4c-bm2-ss --arch v1model --p4runtime-files gswitch.p4info.txtpb gswitch.p4
 * (core.p4's NoAction has no @id: p4c gives it the id derived from its
 * name, 0x01445b37, which is the P4Info's.) The server
 * (controlproto/p4rt) compiles each table entry into OpenFlow-style flow
 * entries of the datapath's pipeline tables 0..3 (see doc.go).
 *
 * Ports are gswitch's 32-bit port numbers (OpenFlow numbering, 1..0xffffff00),
 * not v1model's 9-bit ones; CPU_PORT stands for the controller (packet-in).
 */
#include <core.p4>
#include <v1model.p4>

typedef bit<32> port_t;
typedef bit<48> mac_t;

const port_t CPU_PORT = 0xfffffffd;

@controller_header("packet_in") @id(0x04000001)
header packet_in_t {
    @id(1) port_t ingress_port;   // the port the packet arrived on
}

@controller_header("packet_out") @id(0x04000002)
header packet_out_t {
    @id(1) port_t egress_port;    // the port the controller's packet leaves on
}

header ethernet_t { mac_t dst_addr; mac_t src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> dscp_ecn; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset;
    bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
header ipv6_t {
    bit<4> version; bit<8> traffic_class; bit<20> flow_label;
    bit<16> payload_len; bit<8> next_hdr; bit<8> hop_limit;
    bit<128> src_addr; bit<128> dst_addr;
}
header l4_ports_t { bit<16> src_port; bit<16> dst_port; }

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    ipv6_t       ipv6;
    l4_ports_t   l4;        // TCP or UDP only
}

struct metadata_t {
    port_t  ingress_port;
    port_t  egress_port;
    bit<1>  to_cpu;
    bit<1>  drop;
    bit<1>  ttl_expired; // a later forward does not bring the packet back
    bit<8>  ip_proto;
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<16> mcast_grp;   // set_multicast_group's group (0: none)
}

parser GswitchParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT[8:0]: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { pkt.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        meta.ip_proto = hdr.ipv4.protocol;
        transition select(hdr.ipv4.protocol) { 6: parse_l4; 17: parse_l4; default: accept; }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        meta.ip_proto = hdr.ipv6.next_hdr;
        transition select(hdr.ipv6.next_hdr) { 6: parse_l4; 17: parse_l4; default: accept; }
    }
    state parse_l4 {
        pkt.extract(hdr.l4);
        meta.l4_src_port = hdr.l4.src_port;
        meta.l4_dst_port = hdr.l4.dst_port;
        transition accept;
    }
}

control GswitchVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control GswitchIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t std) {
    @id(0x13000001) direct_counter(CounterType.packets_and_bytes) l2_counter;
    @id(0x13000002) direct_counter(CounterType.packets_and_bytes) ipv4_counter;
    @id(0x13000003) direct_counter(CounterType.packets_and_bytes) ipv6_counter;
    @id(0x13000004) direct_counter(CounterType.packets_and_bytes) acl_counter;

    // forward: the packet leaves on port (a later table may override).
    @id(0x01000002)
    action forward(@id(1) port_t port) { meta.egress_port = port; meta.drop = 0; meta.to_cpu = 0; meta.mcast_grp = 0; }
    // drop: the packet is dropped unless a later table forwards it.
    @id(0x01000003)
    action drop() { meta.drop = 1; meta.to_cpu = 0; meta.mcast_grp = 0; }
    // send_to_cpu: the packet goes to the primary controller as a PacketIn
    // with its ingress_port.
    @id(0x01000004)
    action send_to_cpu() { meta.to_cpu = 1; meta.drop = 0; meta.mcast_grp = 0; }
    // set_multicast_group (the ACL's only, the last table: nothing later
    // overrides it): the packet is replicated to the multicast group's
    // replicas (PacketReplicationEngineEntry), each a copy out of one port;
    // the copy to the port the packet came in on is pruned (egress).
    @id(0x01000008)
    action set_multicast_group(@id(1) bit<16> group_id) {
        meta.mcast_grp = group_id; meta.drop = 0; meta.to_cpu = 0;
    }
    // set_macs: rewrite the Ethernet addresses.
    @id(0x01000006)
    action set_macs(@id(1) mac_t src_mac, @id(2) mac_t dst_mac) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
    }
    // decrement_ttl: IPv4 TTL or IPv6 hop limit minus one; a packet whose
    // TTL would reach 0 is dropped.
    @id(0x01000007)
    action decrement_ttl() {
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ttl <= 1) { meta.drop = 1; meta.to_cpu = 0; meta.ttl_expired = 1; }
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
        if (hdr.ipv6.isValid()) {
            if (hdr.ipv6.hop_limit <= 1) { meta.drop = 1; meta.to_cpu = 0; meta.ttl_expired = 1; }
            hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
        }
    }
    // set_next_hop: route to a neighbour: MACs, TTL, egress port.
    @id(0x01000005)
    action set_next_hop(@id(1) port_t port, @id(2) mac_t src_mac, @id(3) mac_t dst_mac) {
        set_macs(src_mac, dst_mac);
        decrement_ttl();
        forward(port);
    }

    @id(0x02000001)
    table l2_exact {
        key = { hdr.ethernet.dst_addr: exact @id(1); }
        actions = { forward; drop; send_to_cpu; @defaultonly NoAction; }
        default_action = NoAction();
        counters = l2_counter;
        size = 65536;
    }
    @id(0x02000002)
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm @id(1); }
        actions = { set_next_hop; forward; drop; send_to_cpu; decrement_ttl; @defaultonly NoAction; }
        default_action = NoAction();
        counters = ipv4_counter;
        size = 65536;
    }
    @id(0x02000003)
    table ipv6_lpm {
        key = { hdr.ipv6.dst_addr: lpm @id(1); }
        actions = { set_next_hop; forward; drop; send_to_cpu; decrement_ttl; @defaultonly NoAction; }
        default_action = NoAction();
        counters = ipv6_counter;
        size = 65536;
    }
    // acl: ternary and range matches over L2 fields and the IPv4 or IPv6
    // 5-tuple. A port range matches TCP and UDP packets only. An entry
    // matches IPv4 addresses or IPv6 addresses, not both (a packet has one
    // or the other): the server refuses one that names both. The IPv6
    // fields come last so that the older fields keep their P4Info ids.
    @id(0x02000004)
    table acl {
        key = {
            meta.ingress_port:      ternary @name("ingress_port") @id(1);
            hdr.ethernet.src_addr:  ternary @name("eth_src") @id(2);
            hdr.ethernet.dst_addr:  ternary @name("eth_dst") @id(3);
            hdr.ethernet.ether_type: ternary @name("eth_type") @id(4);
            hdr.ipv4.src_addr:      ternary @name("ipv4_src") @id(5);
            hdr.ipv4.dst_addr:      ternary @name("ipv4_dst") @id(6);
            meta.ip_proto:          ternary @name("ip_proto") @id(7);
            meta.l4_src_port:       range   @name("l4_src_port") @id(8);
            meta.l4_dst_port:       range   @name("l4_dst_port") @id(9);
            hdr.ipv6.src_addr:      ternary @name("ipv6_src") @id(10);
            hdr.ipv6.dst_addr:      ternary @name("ipv6_dst") @id(11);
        }
        actions = { forward; drop; send_to_cpu; set_macs; decrement_ttl; set_multicast_group; NoAction; }
        default_action = NoAction();
        counters = acl_counter;
        size = 16384;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            std.egress_spec = (bit<9>)hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        meta.ingress_port = (port_t)std.ingress_port;
        meta.drop = 1;               // nothing forwards: drop
        l2_exact.apply();
        if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); }
        else if (hdr.ipv6.isValid()) { ipv6_lpm.apply(); }
        acl.apply();
        if (meta.ttl_expired == 1) {
            mark_to_drop(std);
        } else if (meta.mcast_grp != 0) {
            std.mcast_grp = meta.mcast_grp;
        } else if (meta.to_cpu == 1) {
            std.egress_spec = CPU_PORT[8:0];
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.ingress_port;
        } else if (meta.drop == 1) {
            mark_to_drop(std);
        } else {
            std.egress_spec = (bit<9>)meta.egress_port;
        }
    }
}

// Egress prunes the replica of a multicast packet that would leave by the
// port it came in on (as OpenFlow's ALL group and flood do).
control GswitchEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    apply {
        if (std.mcast_grp != 0 && std.egress_port == std.ingress_port) { mark_to_drop(std); }
    }
}

control GswitchComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp_ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GswitchDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.l4);
    }
}

V1Switch(GswitchParser(), GswitchVerifyChecksum(), GswitchIngress(),
         GswitchEgress(), GswitchComputeChecksum(), GswitchDeparser()) main;
