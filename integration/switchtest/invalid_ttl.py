# An os-ken app (OpenFlow 1.3) for gswitch's invalid-TTL integration test
# (integration/switchtest_gaps_test.go): it installs
#   in_port=1,ip -> dec_nw_ttl,output:2   and   in_port=2,ip -> output:1
# sets miss_send_len 64 and, when GSWITCH_ASYNC_INVALID_TTL=1, asks for
# packet-ins of reason OFPR_INVALID_TTL with SET_ASYNC (OpenFlow 1.3 has no
# OFPC_INVALID_TTL_TO_CONTROLLER). It logs, in a fixed form the test reads:
#   READY dpid=N                        (after the barrier reply)
#   PACKET_IN reason=R in_port=P table_id=T total_len=L data_len=D ttl=X
#
# Run: osken-manager --ofp-tcp-listen-port PORT integration/switchtest/invalid_ttl.py

import os

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ipv4, packet
from os_ken.ofproto import ofproto_v1_3


class InvalidTTL13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPSetConfig(dp, ofp.OFPC_FRAG_NORMAL, 64))
        if os.environ.get("GSWITCH_ASYNC_INVALID_TTL") == "1":
            pin = 1 << ofp.OFPR_NO_MATCH | 1 << ofp.OFPR_ACTION | 1 << ofp.OFPR_INVALID_TTL
            dp.send_msg(parser.OFPSetAsync(dp, [pin, 0], [7, 7], [15, 0]))
        for in_port, actions in [
            (1, [parser.OFPActionDecNwTtl(), parser.OFPActionOutput(2)]),
            (2, [parser.OFPActionOutput(1)]),
        ]:
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=10, instructions=inst,
                                          match=parser.OFPMatch(in_port=in_port, eth_type=0x0800)))
        dp.send_msg(parser.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev):
        self.logger.info("READY dpid=%d", ev.msg.datapath.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        ip = packet.Packet(msg.data).get_protocol(ipv4.ipv4)
        self.logger.info("PACKET_IN reason=%d in_port=%d table_id=%d total_len=%d data_len=%d ttl=%d",
                         msg.reason, msg.match['in_port'], msg.table_id, msg.total_len, len(msg.data),
                         ip.ttl if ip else -1)
