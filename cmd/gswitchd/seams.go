package main

import (
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/pipeline"
)

// The pipeline implements the control protocols' seams in tables/rule
// types without importing them (datapath imports nothing of
// controlproto); these assertions are where the compiler checks it.
var (
	_ openflow.Switch         = (*pipeline.Switch)(nil)
	_ openflow.GroupSwitch    = (*pipeline.Switch)(nil)
	_ openflow.MeterSwitch    = (*pipeline.Switch)(nil)
	_ openflow.PortModSwitch  = (*pipeline.Switch)(nil)
	_ openflow.TableModSwitch = (*pipeline.Switch)(nil)
	_ openflow.QueueSwitch    = (*pipeline.Switch)(nil)
	_ p4rt.Switch             = (*pipeline.Switch)(nil)
	_ pipeline.Controller     = (*openflow.Agent)(nil)
)
