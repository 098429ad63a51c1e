# A learning switch for gswitch's integration tests (os-ken, OpenFlow 1.3),
# after os_ken/app/simple_switch_13.py: a table-miss entry sends every
# unknown packet to the controller; on a packet-in the source MAC address
# is learned on its port and, once the destination is known, a flow
# (in_port, eth_src, eth_dst -> output) is installed so that the rest of
# the conversation stays in the switch. PORT_STATUS messages are logged
# in a fixed form that the tests read:
#   PORT_STATUS dpid=N port=N name=NAME reason=ADD|DELETE|MODIFY link=up|down
#
# Run: osken-manager --ofp-tcp-listen-port PORT integration/osken/learning_switch.py

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, ether_types, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mac_to_port = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features_handler(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        # Table-miss: everything unknown goes to the controller, whole.
        actions = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        self.add_flow(dp, 0, parser.OFPMatch(), actions)
        self.logger.info("SWITCH_CONNECTED dpid=%d", dp.id)

    def add_flow(self, dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in_handler(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match['in_port']
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)
        if not eth or eth[0].ethertype == ether_types.ETH_TYPE_LLDP:
            return
        src, dst = eth[0].src, eth[0].dst
        table = self.mac_to_port.setdefault(dp.id, {})
        table[src] = in_port
        out_port = table.get(dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_dst=dst, eth_src=src)
            self.add_flow(dp, 1, match, actions)
            self.logger.info("FLOW_ADDED dpid=%d in_port=%d eth_src=%s eth_dst=%s out=%d", dp.id, in_port, src, dst, out_port)
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=in_port,
                                        actions=actions, data=msg.data))

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def port_status_handler(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        reason = {ofp.OFPPR_ADD: 'ADD', ofp.OFPPR_DELETE: 'DELETE',
                  ofp.OFPPR_MODIFY: 'MODIFY'}.get(msg.reason, str(msg.reason))
        link = 'down' if msg.desc.state & ofp.OFPPS_LINK_DOWN else 'up'
        name = msg.desc.name.decode() if isinstance(msg.desc.name, bytes) else msg.desc.name
        self.logger.info("PORT_STATUS dpid=%d port=%d name=%s reason=%s link=%s",
                         msg.datapath.id, msg.desc.port_no, name, reason, link)
