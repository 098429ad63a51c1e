package agent

import (
	"flag"
	"log/slog"
	"net"
	"time"

	"github.com/gswitch/gswitch/controlproto/openflow"
)

// OpenFlowConfig holds the OpenFlow connections' limits (the YAML file's
// openflow: section; docs/openflow.md "Limits and guarantees" says what
// happens at each). Zero values take controlproto/openflow's defaults.
type OpenFlowConfig struct {
	EchoInterval  time.Duration `yaml:"echo_interval"`
	EchoTimeout   time.Duration `yaml:"echo_timeout"`
	HelloTimeout  time.Duration `yaml:"hello_timeout"`
	WriteTimeout  time.Duration `yaml:"write_timeout"`
	MaxOutput     int           `yaml:"max_output_bytes"`
	PacketInRate  int           `yaml:"controller_rate_limit"`
	PacketInBurst int           `yaml:"controller_burst_limit"`
}

// options returns the openflow.Options the limits give.
func (c OpenFlowConfig) options() openflow.Options {
	return openflow.Options{EchoInterval: c.EchoInterval, EchoTimeout: c.EchoTimeout, HelloTimeout: c.HelloTimeout,
		WriteTimeout: c.WriteTimeout, MaxOutputBytes: c.MaxOutput, PacketInRate: c.PacketInRate, PacketInBurst: c.PacketInBurst}
}

// check refuses negative limits (a negative controller_rate_limit turns
// the limit off).
func (c OpenFlowConfig) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"echo_interval", c.EchoInterval}, {"echo_timeout", c.EchoTimeout}, {"hello_timeout", c.HelloTimeout}, {"write_timeout", c.WriteTimeout}} {
		if d.v < 0 {
			return configErr("openflow: %s %v: want a positive duration (0: the default)", d.name, d.v)
		}
	}
	if c.MaxOutput < 0 || c.PacketInBurst < 0 {
		return configErr("openflow: max_output_bytes %d, controller_burst_limit %d: want 0 (the default) or more", c.MaxOutput, c.PacketInBurst)
	}
	return nil
}

// ofFlags are the flags of the OpenFlow limits.
type ofFlags struct {
	echoInterval, echoTimeout, helloTimeout, writeTimeout time.Duration
	maxOutput, rate, burst                                int
}

func (f *ofFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.echoInterval, "of-echo-interval", 0, "OpenFlow: send ECHO_REQUEST after this long without a message from the peer: `DURATION` (default 5s)")
	fs.DurationVar(&f.echoTimeout, "of-echo-timeout", 0, "OpenFlow: drop a connection with no message this long after the echo request was due: `DURATION` (default 10s)")
	fs.DurationVar(&f.helloTimeout, "of-hello-timeout", 0, "OpenFlow: drop a connection whose HELLO does not arrive in time: `DURATION` (default 10s)")
	fs.DurationVar(&f.writeTimeout, "of-write-timeout", 0, "OpenFlow: drop a connection whose peer takes a write, or room in its output queue, no faster: `DURATION` (default 10s)")
	fs.IntVar(&f.maxOutput, "of-max-output-bytes", 0, "OpenFlow: bytes queued for one connection at most; replies wait, async messages are dropped: `N` (default 4194304)")
	fs.IntVar(&f.rate, "controller-rate-limit", 0, "OpenFlow: packet-ins per second to each connection at most, the rest dropped and counted: `N` (default 1000; -1: no limit)")
	fs.IntVar(&f.burst, "controller-burst-limit", 0, "OpenFlow: packet-ins sent at once over the rate: `N` (default a quarter of the rate)")
}

func (f *ofFlags) override(set map[string]bool, c *OpenFlowConfig) {
	setIf(set, "of-echo-interval", &c.EchoInterval, f.echoInterval)
	setIf(set, "of-echo-timeout", &c.EchoTimeout, f.echoTimeout)
	setIf(set, "of-hello-timeout", &c.HelloTimeout, f.helloTimeout)
	setIf(set, "of-write-timeout", &c.WriteTimeout, f.writeTimeout)
	setIf(set, "of-max-output-bytes", &c.MaxOutput, f.maxOutput)
	setIf(set, "controller-rate-limit", &c.PacketInRate, f.rate)
	setIf(set, "controller-burst-limit", &c.PacketInBurst, f.burst)
}

// plaintextExposed returns the plaintext OpenFlow listeners among targets
// that accept connections from beyond the host: "ptcp:PORT" (every
// address) or an address that is not a loopback one. Anyone who can reach
// them can program the switch.
func plaintextExposed(targets []string) []string {
	var out []string
	for _, t := range targets {
		tg, err := openflow.ParseTarget(t)
		if err != nil || !tg.Passive || tg.TLS {
			continue
		}
		host, _, err := net.SplitHostPort(tg.Addr)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// warnPlaintext logs one warning naming the plaintext listeners reachable
// beyond loopback (Open vSwitch's ptcp:PORT[:IP] convention binds every
// address without an IP).
func warnPlaintext(log *slog.Logger, listen []string) {
	if exposed := plaintextExposed(listen); len(exposed) > 0 {
		log.Warn("plaintext OpenFlow listener reachable beyond loopback: any host that can connect can program the switch; use ptls: with client certificates, or ptcp:PORT:127.0.0.1 (docs/openflow.md, TLS)",
			"listen", exposed)
	}
}
