package agent

import (
	"net"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/route"
)

// The accessors below return the parts New built, for tests and
// benchmarks that drive the same graph as gswitchd. The parts are the
// agent's: callers use them (a FlowMod on Switch, a route added to
// RouteTable, lookups on Engine) but neither close nor reconfigure them,
// and not after Run has returned or Close.

// Config returns the effective configuration.
func (d *Agent) Config() Config { return d.st.Config }

// Engine returns the lookup backend every table is served by.
func (d *Agent) Engine() *gpu.Engine { return d.eng }

// Switch returns the OpenFlow pipeline. Changes made on it directly pass
// no control-plane guard (OpenFlow returns that the guarded switch refuses
// them while P4Runtime owns it).
func (d *Agent) Switch() *pipeline.Switch { return d.sw }

// OpenFlow returns the OpenFlow agent (controllers and listeners).
func (d *Agent) OpenFlow() *openflow.Agent { return d.agent }

// P4RT returns the P4Runtime server; nil with p4rt listen off, or when
// the default address was taken.
func (d *Agent) P4RT() *p4rt.Server { return d.p4 }

// Router returns the L3 router; nil without router ports.
func (d *Agent) Router() *l3.Router { return d.router }

// RouteTable returns route table id; nil when no router port uses it.
func (d *Agent) RouteTable(id uint32) *route.Table { return d.routes[id] }

// Port returns the AF_PACKET port of switch port no; nil when none.
func (d *Agent) Port(no uint32) *afpacket.Port { return d.ports[no] }

// TableIDs returns the engine table-id ranges handed out: the flow
// tables', the LPM-shaped flow tables' and the router's.
func (d *Agent) TableIDs() []IDRange { return d.ids.Ranges() }

// CtlSocket returns the control socket's path.
func (d *Agent) CtlSocket() string { return d.st.CtlSocket }

// MetricsAddr returns the metrics server's address; nil when off.
func (d *Agent) MetricsAddr() net.Addr { return addrOf(d.metL) }

// P4RTAddr returns the P4Runtime server's address; nil when off.
func (d *Agent) P4RTAddr() net.Addr { return addrOf(d.p4L) }

func addrOf(l net.Listener) net.Addr {
	if l == nil {
		return nil
	}
	return l.Addr()
}
