/*
 * gswitch.p4: the fixed pipeline of gswitch, as seen by P4Runtime.
 *
 * gswitch is a fixed-function target: this program is not compiled for it.
 * It documents, in P4_16 (v1model style), what the pipeline does; its
 * P4Info (gswitch.p4info.txtpb, written by hand to match this source) is
 * what a controller loads with SetForwardingPipelineConfig. The server
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

@controller_header("packet_in")
header packet_in_t {
    port_t ingress_port;   // the port the packet arrived on
}

@controller_header("packet_out")
header packet_out_t {
    port_t egress_port;    // the port the controller's packet leaves on
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
    direct_counter(CounterType.packets_and_bytes) l2_counter;
    direct_counter(CounterType.packets_and_bytes) ipv4_counter;
    direct_counter(CounterType.packets_and_bytes) ipv6_counter;
    direct_counter(CounterType.packets_and_bytes) acl_counter;

    // forward: the packet leaves on port (a later table may override).
    action forward(port_t port) { meta.egress_port = port; meta.drop = 0; meta.to_cpu = 0; }
    // drop: the packet is dropped unless a later table forwards it.
    action drop() { meta.drop = 1; meta.to_cpu = 0; }
    // send_to_cpu: the packet goes to the primary controller as a PacketIn
    // with its ingress_port.
    action send_to_cpu() { meta.to_cpu = 1; meta.drop = 0; }
    // set_macs: rewrite the Ethernet addresses.
    action set_macs(mac_t src_mac, mac_t dst_mac) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
    }
    // decrement_ttl: IPv4 TTL or IPv6 hop limit minus one; a packet whose
    // TTL would reach 0 is dropped.
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
    action set_next_hop(port_t port, mac_t src_mac, mac_t dst_mac) {
        set_macs(src_mac, dst_mac);
        decrement_ttl();
        forward(port);
    }

    table l2_exact {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; drop; send_to_cpu; @defaultonly NoAction; }
        default_action = NoAction();
        counters = l2_counter;
        size = 65536;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_next_hop; forward; drop; send_to_cpu; decrement_ttl; @defaultonly NoAction; }
        default_action = NoAction();
        counters = ipv4_counter;
        size = 65536;
    }
    table ipv6_lpm {
        key = { hdr.ipv6.dst_addr: lpm; }
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
    table acl {
        key = {
            meta.ingress_port:      ternary @name("ingress_port");
            hdr.ethernet.src_addr:  ternary @name("eth_src");
            hdr.ethernet.dst_addr:  ternary @name("eth_dst");
            hdr.ethernet.ether_type: ternary @name("eth_type");
            hdr.ipv4.src_addr:      ternary @name("ipv4_src");
            hdr.ipv4.dst_addr:      ternary @name("ipv4_dst");
            meta.ip_proto:          ternary @name("ip_proto");
            meta.l4_src_port:       range   @name("l4_src_port");
            meta.l4_dst_port:       range   @name("l4_dst_port");
            hdr.ipv6.src_addr:      ternary @name("ipv6_src");
            hdr.ipv6.dst_addr:      ternary @name("ipv6_dst");
        }
        actions = { forward; drop; send_to_cpu; set_macs; decrement_ttl; NoAction; }
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

control GswitchEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) { apply { } }

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
