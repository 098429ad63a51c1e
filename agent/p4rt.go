package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/netrack/openflow/ofp"
	"gopkg.in/yaml.v3"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/tables/rule"
)

// P4RTConfig configures the P4Runtime server (the YAML file's p4rt:).
type P4RTConfig struct {
	// Listen is the gRPC address, HOST:PORT; "off" disables the server.
	Listen   string `yaml:"listen"`
	DeviceID uint64 `yaml:"device_id"`
	// TLS: with certificate and private_key the server speaks TLS; with
	// ca_cert too, clients may present certificates it checks, and with
	// require_client_cert they must (mutual TLS).
	Certificate       string `yaml:"certificate"`
	PrivateKey        string `yaml:"private_key"`
	CACert            string `yaml:"ca_cert"`
	RequireClientCert bool   `yaml:"require_client_cert"`
	// Reflection registers gRPC server reflection (grpcurl without .proto
	// files).
	Reflection bool `yaml:"reflection"`
	// ConnectionTimeout bounds a new connection's handshake (TLS and the
	// HTTP/2 preface and settings): a client that sends half a preface
	// and goes silent is closed after it. KeepaliveTime is how long a
	// connection may be quiet before the server pings it, and
	// KeepaliveTimeout how long the ping's answer may take before the
	// connection is closed (a controller that vanished without a FIN).
	ConnectionTimeout time.Duration `yaml:"connection_timeout"`
	KeepaliveTime     time.Duration `yaml:"keepalive_time"`
	KeepaliveTimeout  time.Duration `yaml:"keepalive_timeout"`

	// implicitListen: Listen came from the embedded default (DefaultConfig,
	// or Flags without a file's p4rt listen or --p4rt-listen); only the
	// default address so obtained may be skipped when it is in use.
	implicitListen bool
}

// p4rtFlags are the P4Runtime flags.
type p4rtFlags struct {
	listen, cert, key, ca        string
	deviceID                     uint64
	requireClient, refl          bool
	connTimeout, kaTime, kaLimit time.Duration
}

func (p *p4rtFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.listen, "p4rt-listen", "", "P4Runtime gRPC server address: `HOST:PORT` (default 127.0.0.1:9559; off: no server)")
	fs.Uint64Var(&p.deviceID, "p4rt-device-id", 0, "P4Runtime device id: `N` (default 1)")
	fs.StringVar(&p.cert, "p4rt-tls-certificate", "", "P4Runtime over TLS: the server's certificate, PEM `FILE`")
	fs.StringVar(&p.key, "p4rt-tls-private-key", "", "P4Runtime over TLS: the server's private key, PEM `FILE`")
	fs.StringVar(&p.ca, "p4rt-tls-ca-cert", "", "P4Runtime over TLS: CA certificate(s) that sign client certificates, PEM `FILE`")
	fs.BoolVar(&p.requireClient, "p4rt-require-client-cert", false, "P4Runtime over TLS: clients must present a certificate the CA signed (mutual TLS)")
	fs.BoolVar(&p.refl, "p4rt-reflection", false, "P4Runtime: register gRPC server reflection (for grpcurl)")
	fs.DurationVar(&p.connTimeout, "p4rt-connection-timeout", 0, "P4Runtime: a new connection's handshake (TLS, HTTP/2 preface) must finish within `DURATION` (default 10s)")
	fs.DurationVar(&p.kaTime, "p4rt-keepalive-time", 0, "P4Runtime: ping a connection quiet for `DURATION` (default 1m)")
	fs.DurationVar(&p.kaLimit, "p4rt-keepalive-timeout", 0, "P4Runtime: close a connection whose ping is not answered within `DURATION` (default 20s)")
}

func (p *p4rtFlags) override(set map[string]bool, c *P4RTConfig) {
	setIf(set, "p4rt-listen", &c.Listen, p.listen)
	setIf(set, "p4rt-device-id", &c.DeviceID, p.deviceID)
	setIf(set, "p4rt-tls-certificate", &c.Certificate, p.cert)
	setIf(set, "p4rt-tls-private-key", &c.PrivateKey, p.key)
	setIf(set, "p4rt-tls-ca-cert", &c.CACert, p.ca)
	setIf(set, "p4rt-require-client-cert", &c.RequireClientCert, p.requireClient)
	setIf(set, "p4rt-reflection", &c.Reflection, p.refl)
	setIf(set, "p4rt-connection-timeout", &c.ConnectionTimeout, p.connTimeout)
	setIf(set, "p4rt-keepalive-time", &c.KeepaliveTime, p.kaTime)
	setIf(set, "p4rt-keepalive-timeout", &c.KeepaliveTimeout, p.kaLimit)
	if set["p4rt-listen"] {
		c.implicitListen = false
	}
}

// checkP4RT validates the p4rt: settings and loads the TLS files; it
// returns a nil tls.Config for plain gRPC.
func checkP4RT(c *Config) (*tls.Config, error) {
	p := c.P4RT
	if p.Listen == "off" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(p.Listen); err != nil {
		return nil, configErr("p4rt listen %q: want HOST:PORT or off", p.Listen)
	}
	if p.DeviceID == 0 {
		return nil, configErr("p4rt device_id 0: want 1..2^64-1")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"connection_timeout", p.ConnectionTimeout}, {"keepalive_time", p.KeepaliveTime}, {"keepalive_timeout", p.KeepaliveTimeout}} {
		if d.v < 0 || d.v > 24*time.Hour {
			return nil, configErr("p4rt %s %s: want 0 (the default) to 24h", d.name, d.v)
		}
	}
	if p.Certificate == "" && p.PrivateKey == "" {
		if p.CACert != "" || p.RequireClientCert {
			return nil, configErr("p4rt: ca_cert and require_client_cert need TLS (certificate and private_key)")
		}
		return nil, nil
	}
	if p.Certificate == "" || p.PrivateKey == "" {
		return nil, configErr("p4rt: TLS needs both certificate (--p4rt-tls-certificate) and private_key (--p4rt-tls-private-key)")
	}
	cert, err := loadKeyPair("p4rt", p.Certificate, p.PrivateKey)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if p.CACert != "" {
		pool, err := loadCAPool("p4rt", p.CACert)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if p.RequireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	} else if p.RequireClientCert {
		return nil, configErr("p4rt: require_client_cert needs ca_cert (--p4rt-tls-ca-cert) to check them")
	}
	return cfg, nil
}

// One control plane at a time. The P4 program's tables are the pipeline's
// tables 0..3, the same tables an OpenFlow controller programs, so the two
// cannot share them. Until a P4Runtime client commits a pipeline the
// switch is OpenFlow's; the commit is refused (FAILED_PRECONDITION) while
// an OpenFlow controller is connected, and from the commit on the switch
// is P4Runtime's until gswitchd stops: the commit clears tables 0..3, the
// OpenFlow agent still answers (features, stats, port and flow dumps) but
// refuses every change (FLOW_MOD, GROUP_MOD, METER_MOD, PORT_MOD,
// PACKET_OUT) with an EPERM error, and packet-ins go to the P4Runtime
// primary.

// ofGuard is the switch the OpenFlow agent drives: the pipeline, whose
// changing calls fail while P4Runtime owns it.
type ofGuard struct {
	*pipeline.Switch
	p4 func() *p4rt.Server
}

func (g ofGuard) owned() bool { s := g.p4(); return s != nil && s.Owns() }

// p4Owned is the detail of the errors the guard returns.
const p4Owned = "the switch is programmed over P4Runtime"

func (g ofGuard) FlowMod(fm *rule.FlowMod) error {
	if g.owned() {
		return &openflow.Error{Type: ofp.ErrTypeFlowModFailed, Code: ofp.ErrCodeFlowModFailedPerm, Detail: p4Owned}
	}
	return g.Switch.FlowMod(fm)
}

func (g ofGuard) GroupMod(gm *rule.GroupMod) error {
	if g.owned() {
		return &openflow.Error{Type: ofp.ErrTypeGroupModFailed, Code: ofp.ErrCodeGroupModPerm, Detail: p4Owned}
	}
	return g.Switch.GroupMod(gm)
}

func (g ofGuard) MeterMod(mm *rule.MeterMod) error {
	if g.owned() {
		return &openflow.Error{Type: ofp.ErrTypeMeterModFailed, Code: ofp.ErrCodeMeterModFailedUnknown, Detail: p4Owned}
	}
	return g.Switch.MeterMod(mm)
}

func (g ofGuard) PortMod(pm *rule.PortMod) error {
	if g.owned() {
		return &openflow.Error{Type: ofp.ErrTypePortModFailed, Code: ofp.ErrCodePortModFailedPerm, Detail: p4Owned}
	}
	return g.Switch.PortMod(pm)
}

func (g ofGuard) PacketOut(po *rule.PacketOut) error {
	if g.owned() {
		return &openflow.Error{Type: ofp.ErrTypeBadRequest, Code: ofp.ErrCodeBadRequestPerm, Detail: p4Owned}
	}
	return g.Switch.PacketOut(po)
}

// controllers is the pipeline's controller side: the OpenFlow agent, and
// the P4Runtime server once it owns the switch (packet-ins go to it then).
type controllers struct {
	of *openflow.Agent
	p4 *p4rt.Server // nil when off
}

func (c controllers) PacketIn(pi *rule.PacketIn) int {
	if c.p4 != nil && c.p4.Owns() {
		return c.p4.PacketIn(pi)
	}
	return c.of.PacketIn(pi)
}

func (c controllers) FlowRemoved(fr *rule.FlowRemoved) int { return c.of.FlowRemoved(fr) }
func (c controllers) PortStatus(ps *rule.PortStatus) int   { return c.of.PortStatus(ps) }

// Connections and Controllers count a P4Runtime server that owns the
// switch as a connected controller: standalone fail mode does not turn
// the P4 tables into a learning switch.
func (c controllers) Connections() int { return c.of.Connections() + c.p4owns() }
func (c controllers) Controllers() int { return c.of.Controllers() + c.p4owns() }

func (c controllers) p4owns() int {
	if c.p4 != nil && c.p4.Owns() {
		return 1
	}
	return 0
}

// startP4RT creates the P4Runtime server and its listener (nothing when
// p4rt listen is off).
func (d *Agent) startP4RT() error {
	p := d.st.P4RT
	if p.Listen == "off" {
		return nil
	}
	var err error
	d.p4, err = p4rt.New(p4rt.Config{DeviceID: p.DeviceID, Switch: d.sw, Tables: d.st.Tables, TLS: d.st.p4rtTLS, Reflection: p.Reflection, Logger: d.log.With("component", "p4rt"),
		ConnectionTimeout: p.ConnectionTimeout, KeepaliveTime: p.KeepaliveTime, KeepaliveTimeout: p.KeepaliveTimeout,
		Claim: func() error {
			if n := d.agent.Connections(); n > 0 {
				return fmt.Errorf("%d OpenFlow connection(s) open: one control plane at a time", n)
			}
			return nil
		}})
	if err != nil {
		return err
	}
	if d.p4L, err = net.Listen("tcp", p.Listen); err != nil {
		if p.implicitListen && p.Listen == defaultP4RTListen && errors.Is(err, syscall.EADDRINUSE) {
			// Several gswitchd on one host (a Mininet topology) cannot all
			// have the default address: those that come later run without
			// P4Runtime, saying so. An address the user gave (a file's
			// p4rt listen, --p4rt-listen), even the default one, must work.
			d.log.Warn("p4rt: the default address is in use; P4Runtime is off (set --p4rt-listen)", "listen", p.Listen, "err", err)
			d.p4 = nil
			return nil
		}
		return fmt.Errorf("p4rt listen: %w", err)
	}
	d.log.Info("p4rt: serving P4Runtime", "listen", d.p4L.Addr().String(), "device_id", p.DeviceID, "tls", d.st.p4rtTLS != nil)
	if d.st.p4rtTLS == nil && !loopbackOnly(d.p4L.Addr()) {
		d.log.Warn("p4rt: plaintext P4Runtime reachable beyond loopback: any host that reaches it can become the primary controller and program the switch (docs/p4runtime.md: Security)",
			"listen", d.p4L.Addr().String())
	}
	return nil
}

// loopbackOnly reports whether a listener's address is reachable from
// this host only.
func loopbackOnly(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// defaultP4RTListen is default.yaml's p4rt listen address: the port
// P4Runtime clients expect.
const defaultP4RTListen = "127.0.0.1:9559"

func (d *Agent) serveP4RT(ctx context.Context) error {
	err := d.p4.Serve(ctx, d.p4L)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// p4rtListenIn reports whether a configuration file sets p4rt listen (the
// file decoded without error already).
func p4rtListenIn(data []byte) bool {
	var f struct {
		P4RT struct {
			Listen *string `yaml:"listen"`
		} `yaml:"p4rt"`
	}
	return yaml.Unmarshal(data, &f) == nil && f.P4RT.Listen != nil
}
