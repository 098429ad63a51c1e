package rule

import "github.com/gswitch/gswitch/tables/flow"

// Features describes the switch.
type Features struct {
	DatapathID   uint64
	NBuffers     uint32 // packets the switch can buffer (0: none)
	NTables      uint8
	Capabilities Capabilities
	Desc         Desc
	// MaxEntries is each table's capacity.
	MaxEntries uint32
}

// Capabilities say which statistics and functions the switch has.
type Capabilities uint32

// The capabilities (OpenFlow 1.3's bits).
const (
	CapFlowStats   Capabilities = 1 << 0
	CapTableStats  Capabilities = 1 << 1
	CapPortStats   Capabilities = 1 << 2
	CapGroupStats  Capabilities = 1 << 3
	CapIPReasm     Capabilities = 1 << 5
	CapQueueStats  Capabilities = 1 << 6
	CapPortBlocked Capabilities = 1 << 8
)

// Desc is free-form text about the switch.
type Desc struct {
	Manufacturer, Hardware, Software, Serial, Datapath string
}

// PacketOut sends a packet through a list of actions.
type PacketOut struct {
	BufferID uint32 // NoBuffer: the packet is Data
	InPort   uint32 // the input port the actions see (PortController for none)
	Actions  []Action
	Data     []byte
}

// Why a packet goes to the controller.
const (
	ReasonNoMatch    = 0 // the table-miss entry sent it
	ReasonAction     = 1 // an output to PortController
	ReasonInvalidTTL = 2 // a TTL decrement reached 0
)

// PacketIn is a packet sent to the controller.
type PacketIn struct {
	Reason  uint8 // Reason*
	TableID uint8
	Cookie  uint64
	// Match holds the packet's pipeline fields (in_port at least).
	Match flow.Match
	// MaxLen truncates Data (MaxLenNoBuffer: the whole packet). For
	// ReasonInvalidTTL the protocol edge truncates to its own limit
	// instead (no action gives a max_len).
	MaxLen uint16
	Data   []byte
}
