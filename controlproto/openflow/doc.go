// Package openflow is the switch side of OpenFlow 1.3 (wire version 0x04):
// it decodes what controllers send, checks it completely, hands it to a
// Switch as values of gswitch's protocol-free rule model (tables/rule),
// and encodes replies and asynchronous messages from them. It holds no
// tables; the datapath (datapath/pipeline) implements Switch without
// importing this package: the seam is expressed in tables/rule types
// only, and Go's structural typing does the rest.
//
// # Layers
//
// Codec (wire.go, match.go, action.go, instruction.go, flowmod.go,
// messages.go, multipart.go). Messages are decoded from byte slices by
// bounds-checked, fixed-offset reads; every decoder returns a value or an
// *Error carrying the OFPT_ERROR type and code OpenFlow 1.3.5 gives (§7.4.4),
// and never panics (each decoder has a fuzz test). Translation happens
// once, here: a FLOW_MOD becomes a rule.FlowMod whose Match is a
// tables/flow Match (decoded through this package's Match, which also
// keeps the fields in the controller's order and the encoded form), built with SetField per OXM TLV and then CheckField
// per field (prerequisites may come in any order, as in Open vSwitch) and
// Validate (an OXM's payload is the field's width in bytes, but for
// mpls_label and ipv6_flabel, 20-bit fields carried in 4 bytes whose spare
// top bits must be zero: oxmSize, fromWire and toWire convert, in matches,
// set_field and TABLE_FEATURES alike); tables/flow's typed errors map onto
// OFPBMC_* codes (ErrorFor),
// and so do flow.ErrOverlap and flow.ErrTableFull onto OFPFMFC_OVERLAP and
// OFPFMFC_TABLE_FULL when a Switch returns them. Instructions and actions
// become rule.Instructions and []rule.Action (the model keeps OpenFlow
// 1.3's numbering of actions, group types and flags, so the translation
// is one of equal values). The match and instructions are also kept as
// sent, in the model's opaque rule.Echo, which the switch stores and
// returns untouched, so that flow stats and FLOW_REMOVED echo them byte
// for byte, as the os-ken switch test tool requires; entries installed
// otherwise (by P4Runtime, say) are encoded from their values
// (EncodeMatch, EncodeInstructions).
//
// Errors. A Switch refuses with the model's *rule.Error (a Kind and a
// detail) or tables/flow's typed errors; ErrorFor maps them onto
// OFPT_ERROR types and codes with one table (errors.go: ruleCodes; a
// missing port, rule.NoSuchPort, is the BAD_PORT code of the request's
// error type). TestRuleCodes pins the pairs, so that what the os-ken
// switch test tool sees does not change when the model does.
//
// Session (session.go, handle.go). One goroutine per connection reads and
// handles messages strictly in order, so a reply, and in particular a
// BARRIER_REPLY, is sent only after every earlier message was handled; the
// barrier also waits for Switch.Barrier, which returns when earlier changes
// are visible to the datapath. Replies go through a bounded queue drained by
// a writer goroutine: at most outQueue messages and Options.MaxOutputBytes
// bytes. A reply that does not fit waits for the writer, so the reading
// goroutine stops reading and a peer's unread requests stay in its own
// socket; every write has the deadline Options.WriteTimeout, and a reply
// that waits that long for room closes the connection (ErrNotReading,
// Agent.OutputDrops): a peer that stops reading is dropped, and its
// connection pins at most one reply being built and MaxOutputBytes.
// Handshake: HELLO within Options.HelloTimeout, with a version bitmap
// naming 1.3 only; a peer whose bitmap (or, without one, whose version)
// excludes 1.3 gets HELLO_FAILED/OFPHFC_INCOMPATIBLE with a text
// explanation and is dropped. Keepalive: after Options.EchoInterval
// without any message the agent sends ECHO_REQUEST, and drops the
// connection when nothing arrives within EchoTimeout; the timeout runs
// from when the request was due, whether or not it could be queued.
// Handled: ECHO, FEATURES, GET_CONFIG/SET_CONFIG
// (miss_send_len, which also cuts packet-ins of reason INVALID_TTL; only
// OFPC_FRAG_NORMAL: OpenFlow 1.3 has no OFPC_INVALID_TTL_TO_CONTROLLER,
// SET_ASYNC's OFPR_INVALID_TTL bit asks for those packet-ins, off by
// default as in Open vSwitch), FLOW_MOD, PACKET_OUT, BARRIER,
// ROLE_REQUEST, GET_ASYNC/SET_ASYNC, and the multipart requests DESC, FLOW,
// AGGREGATE, TABLE, PORT_STATS, PORT_DESC and TABLE_FEATURES (read only: the
// reply describes what this package decodes); GROUP_MOD, METER_MOD,
// PORT_MOD, TABLE_MOD, QUEUE_GET_CONFIG and the group, meter and queue
// multipart requests when the Switch has the optional interfaces (below).
// Requests in several parts (OFPMPF_REQ_MORE) are joined per xid, several
// open at once (Options.MaxMultipartOpen, Options.MaxMultipartRequest bytes
// in all) and interleaved with other requests, as in Open vSwitch;
// replies longer than a message are split with OFPMPF_REPLY_MORE. Every
// other message type gets OFPBRC_BAD_TYPE, other multipart types
// OFPBRC_BAD_MULTIPART, experimenter ones OFPBRC_BAD_EXPERIMENTER
// (OFPBRC_BAD_LEN when shorter than ofp_experimenter_header), a wrong
// version OFPBRC_BAD_VERSION, and every error carries the offending xid and
// the first 64 bytes of the message. testdata/malformed holds a golden
// corpus of malformed messages and their exact errors (TestMalformedCorpus).
//
// Agent (agent.go, target.go). An Agent serves one Switch over any number of
// connections: passive ("ptcp:PORT[:IP]", "pssl:", ServeListener), active
// ("tcp:HOST[:PORT]", "ssl:", Connect, ConnectTarget, reconnecting with
// exponential back-off from Options.MinBackoff to MaxBackoff), or any
// net.Conn (Serve). It keeps what
// connections share: roles and the master election generation id
// (§6.3.5: a MASTER or SLAVE request whose generation id is older, by
// wrapping signed comparison, than the last one seen fails with
// OFPRRFC_STALE; a new master demotes the old one to slave; a slave's
// FLOW_MOD, PACKET_OUT, GROUP_MOD, PORT_MOD, TABLE_MOD and METER_MOD get
// OFPBRC_IS_SLAVE). PacketIn, FlowRemoved and PortStatus send the
// asynchronous messages to the connections whose role and async
// configuration (DefaultAsync until SET_ASYNC) accept their reason; a
// connection whose queue is full drops them rather than stall the caller,
// and packet-ins are limited per connection by a token bucket
// (Options.PacketInRate and PacketInBurst, as Open vSwitch's
// controller_rate_limit and controller_burst_limit; ratelimit.go), the
// excess counted by Agent.PacketInsLimited.
//
// # Groups, meters, ports, tables and queues
//
// group.go, meter.go and portmod.go decode GROUP_MOD (add, modify, delete
// incl. OFPG_ALL; all, select, indirect and fast-failover groups; buckets
// with weight, watch_port, watch_group and actions), METER_MOD (add,
// modify, delete incl. OFPM_ALL; kbps or pktps, burst, stats; drop and
// DSCP-remark bands), PORT_MOD, TABLE_MOD (1.3: only the deprecated config
// bits, ignored) and QUEUE_GET_CONFIG_REQUEST, and encode the GROUP,
// GROUP_DESC, GROUP_FEATURES, METER, METER_CONFIG, METER_FEATURES and
// QUEUE multipart replies. The agent serves them through optional
// interfaces a Switch may implement (switch.go: GroupSwitch, MeterSwitch,
// PortModSwitch, TableModSwitch, QueueSwitch), found by type assertion; a
// Switch without one answers as before (OFPBRC_BAD_TYPE,
// OFPBRC_BAD_MULTIPART). With GroupSwitch a FLOW_MOD or PACKET_OUT whose
// group action names a missing group gets OFPBAC_BAD_OUT_GROUP; with
// MeterSwitch a meter instruction naming a missing meter
// OFPMMFC_UNKNOWN_METER (OFPMMFC_INVALID_METER for 0 and reserved ids);
// with QueueSwitch a set_queue naming a queue no port has
// OFPBAC_BAD_QUEUE. These are front checks: the Switch checks again when
// it applies the change. PORT_MOD is checked against Ports() (port,
// hardware address, advertised features) before PortModSwitch.PortMod.
//
// The decoders check what does not depend on the switch's state (codes
// from §7.4.4: OFPGMFC_BAD_COMMAND, BAD_TYPE, INVALID_GROUP (reserved ids;
// an indirect group with other than one bucket, as Open vSwitch and OFTest
// have it), BAD_BUCKET, BAD_WATCH, LOOP for a group forwarding to or
// watching itself; OFPMMFC_BAD_COMMAND, INVALID_METER, BAD_FLAGS (kbps and
// pktps together, unknown bits), BAD_BAND, BAD_RATE, BAD_BAND_VALUE,
// OUT_OF_BANDS; OFPPMFC_*, OFPTMFC_*, OFPQOFC_BAD_PORT; what a group says
// about itself is rule.CheckGroup's, mapped). tables/rule's GroupTable
// and MeterTable implement the rest for a Switch, their error kinds
// mapping onto these codes: existence (GROUP_EXISTS,
// UNKNOWN_GROUP, METER_EXISTS, UNKNOWN_METER), limits (OUT_OF_GROUPS,
// OUT_OF_BUCKETS, OUT_OF_METERS, OUT_OF_BANDS, BAD_BURST), references
// between groups (a missing forwarded-to group is OFPBAC_BAD_OUT_GROUP as
// in Open vSwitch, a missing watched group OFPGMFC_BAD_WATCH, a cycle
// through actions or watch groups OFPGMFC_LOOP, deleting a group another
// forwards to or watches OFPGMFC_CHAINED_GROUP), deletes returning the
// ids whose flow entries the switch removes, flow reference counts
// (AddFlowRef, ReleaseFlowRef) for ref_count and flow_count, counters,
// configurations echoed as sent (burst_size included, as the os-ken test
// tool checks), bucket selection for the datapath (GroupTable.Pick:
// weighted by hash, liveness through watched ports and groups), and a
// token bucket per band (Meter.Allow: the highest-rate exceeded band
// applies; RemarkDSCP raises an AF code point's drop precedence).
//
// # TLS
//
// "ssl:HOST[:PORT]" and "tls:..." connect, "pssl:[PORT][:IP]" and "ptls:"
// listen, with Options.TLSClient and Options.TLSServer (crypto/tls: mutual
// authentication is the caller's ClientAuth/ClientCAs and Certificates).
// Open vSwitch spells them ssl:/pssl:; both spellings are accepted.
//
// # Concurrency
//
// A Switch is called from every connection's goroutine and must be safe
// for concurrent use. Agent.mu guards the connection set, each
// connection's role, async configuration and packet-in token bucket, and
// the generation id; it is
// never held while calling the Switch or writing to a connection. A
// session's SwitchConfig, Features copy and pending multipart request
// belong to its reading goroutine.
//
// # Open vSwitch's extensions
//
// Two things OpenFlow 1.3 leaves out are accepted as Open vSwitch accepts
// and sends them in OpenFlow 1.3 (ovs-ofctl -O OpenFlow13), so that rule
// sets such as ClassBench's (port ranges, TCP flags) install unchanged:
// tcp_flags as the ONF experimenter OXM field ONFOXM_ET_TCP_FLAGS (class
// 0xffff, field 42, experimenter id 0x4f4e4600 before the value and mask;
// the OpenFlow 1.5 basic field 42 stays OFPBMC_BAD_FIELD), and masks on the
// transport ports (tcp, udp and sctp src and dst; 1.3's table 11 makes them
// exact-only). EncodeMatch writes both the same way and never drops a bit
// of a match: a mask no one allows is written as it is, so DecodeMatch
// refuses it (MatchEncodable tells beforehand).
//
// # What is not supported yet
//
// Setting table features, bundles (1.4), auxiliary connections, packet
// buffering (n_buffers is the Switch's, and a buffer id with none gets
// OFPBRC_BUFFER_UNKNOWN), experimenter OXM classes (but the ONF's tcp_flags,
// below), actions, instructions, meter bands and messages, IP fragment handling
// other than NORMAL, the virtual meters OFPM_SLOWPATH and OFPM_CONTROLLER
// (OFPMMFC_INVALID_METER), and FLOW_REMOVED with reason GROUP_DELETE for
// the entries a group or meter deletion removes (the Switch sends it if it
// wants). The agent does not send PORT_STATUS after PORT_MOD itself; the
// Switch does, through Agent.PortStatus. Role changes send no ROLE_STATUS
// (a 1.4 message). Duplicate instructions get OFPBIC_UNSUP_INST, since 1.3
// has no OFPBIC_DUP_INST.
//
// # github.com/netrack/openflow
//
// The project pins github.com/netrack/openflow v0.1.0 for the wire format.
// This package uses its message-type, error type/code and multipart type
// constants (checked against the 1.3.5 spec) and none of its codecs: it
// decodes through io.Reader and reflection without bounds on lengths taken
// from the wire, and is wrong or incomplete for 1.3 in ways that matter
// here. XM.readFrom halves odd masked lengths silently and reads
// experimenter OXMs (which carry a 4-byte experimenter id) as plain ones;
// Match.ReadFrom ignores trailing bytes shorter than a TLV header;
// HelloElems.ReadFrom has a value receiver, so decoded hello elements are
// lost; HelloElemVersionBitmap.WriteTo counts its padding in the element's
// length, which OpenFlow excludes; and nothing there checks a field's size, maskability,
// duplicates or prerequisites, which is where the OFPBMC_* codes come
// from. So the codec here is this package's own.
package openflow
