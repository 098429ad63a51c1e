package rule

// Reserved port numbers (OpenFlow 1.3 §4.5's reserved ports, with its
// numbering): ordinary ports are 1..PortMax.
const (
	PortMax        uint32 = 0xffffff00
	PortInPort     uint32 = 0xfffffff8 // the packet's input port
	PortTable      uint32 = 0xfffffff9 // the flow tables (packet-out only)
	PortNormal     uint32 = 0xfffffffa // the switch's L2 learning switch
	PortFlood      uint32 = 0xfffffffb // every port but the input
	PortAll        uint32 = 0xfffffffc // every port but the input
	PortController uint32 = 0xfffffffd // the controller (a packet-in)
	PortLocal      uint32 = 0xfffffffe // the host's own interface into the switch
	PortAny        uint32 = 0xffffffff // none, or any in a filter
)

// Other reserved values.
const (
	GroupMax       uint32 = 0xffffff00 // the last ordinary group id
	GroupAll       uint32 = 0xfffffffc // every group (deletes, statistics)
	GroupAny       uint32 = 0xffffffff // none, or any in a filter
	TableMax       uint8  = 0xfe       // the last table id
	TableAll       uint8  = 0xff       // every table (deletes, statistics)
	NoBuffer       uint32 = 0xffffffff // a packet the switch keeps no buffer of
	MaxLenNoBuffer uint16 = 0xffff     // send the whole packet to the controller
	QueueAll       uint32 = 0xffffffff // every queue (statistics)
)

// Port configuration bits (a controller sets them with a PortMod).
const (
	PortConfigDown       uint32 = 1 << 0 // administratively down: nothing sent or received
	PortConfigNoRecv     uint32 = 1 << 2 // drop what the port receives
	PortConfigNoFwd      uint32 = 1 << 5 // drop what would leave through the port
	PortConfigNoPacketIn uint32 = 1 << 6 // no packet-ins for the port's packets
	// PortConfigAll covers the bits a PortMod may set.
	PortConfigAll = PortConfigDown | PortConfigNoRecv | PortConfigNoFwd | PortConfigNoPacketIn
)

// Port state bits.
const (
	PortStateLinkDown uint32 = 1 << 0
	PortStateBlocked  uint32 = 1 << 1
	PortStateLive     uint32 = 1 << 2
)

// Port feature bits (current, advertised, supported and peer features).
const (
	PortFeature10GbFD  uint32 = 1 << 6
	PortFeatureCopper  uint32 = 1 << 11
	PortFeaturesAll    uint32 = 1<<16 - 1
	PortSpeed10GbpsKbs uint32 = 10_000_000
)

// Port describes one port.
type Port struct {
	No         uint32
	HWAddr     [6]byte
	Name       string
	Config     uint32 // PortConfig* bits
	State      uint32 // PortState* bits
	Curr       uint32 // PortFeature* bits
	Advertised uint32
	Supported  uint32
	Peer       uint32
	CurrSpeed  uint32 // kbps
	MaxSpeed   uint32 // kbps
}

// Why a port changed.
const (
	PortAdded    = 0
	PortDeleted  = 1
	PortModified = 2
)

// PortStatus tells the controller a port changed, and how (Port*).
type PortStatus struct {
	Reason uint8
	Port   Port
}

// PortStats are one port's counters.
type PortStats struct {
	PortNo                          uint32
	RxPackets, TxPackets            uint64
	RxBytes, TxBytes                uint64
	RxDropped, TxDropped            uint64
	RxErrors, TxErrors              uint64
	RxFrameErr, RxOverErr, RxCRCErr uint64
	Collisions                      uint64
	DurationSec, DurationNsec       uint32
}

// PortMod configures a port: the Config bits under Mask change; Advertise,
// when not zero, replaces what the port advertises. HWAddr must be the
// port's (a guard against configuring the wrong port).
type PortMod struct {
	PortNo    uint32
	HWAddr    [6]byte
	Config    uint32
	Mask      uint32
	Advertise uint32
}

// Apply returns the port's configuration after the PortMod.
func (pm *PortMod) Apply(config uint32) uint32 {
	return config&^pm.Mask | pm.Config&pm.Mask
}

// TableMod configures a flow table. OpenFlow 1.3 deprecates the
// configuration: Config carries nothing a switch acts on.
type TableMod struct {
	TableID uint8
	Config  uint32
}

// Queue is a port's queue: MinRate and MaxRate in tenths of a percent of
// the port's speed, above 1000 for none.
type Queue struct {
	ID      uint32
	Port    uint32
	MinRate uint16
	MaxRate uint16
}

// QueueStats are one queue's counters.
type QueueStats struct {
	PortNo, QueueID           uint32
	TxBytes, TxPackets        uint64
	TxErrors                  uint64
	DurationSec, DurationNsec uint32
}
