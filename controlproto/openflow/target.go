package openflow

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultPort is the IANA OpenFlow port.
const DefaultPort = 6653

// Target is a parsed connection target.
type Target struct {
	Passive bool   // ptcp:, ptls:, pssl: listen
	TLS     bool   // tls:, ssl:, ptls:, pssl:
	Addr    string // host:port to dial, or [ip]:port to listen on
}

// ParseTarget reads Open vSwitch's syntax: "tcp:HOST[:PORT]" (an active
// connection; an IPv6 host in brackets) and "ptcp:[PORT][:IP]" (a passive
// listener, on every address when IP is empty), and the same over TLS as
// "ssl:" and "pssl:" (Open vSwitch's names) or "tls:" and "ptls:". PORT
// defaults to 6653.
func ParseTarget(s string) (Target, error) {
	scheme, rest, _ := strings.Cut(s, ":")
	switch scheme {
	case "tcp", "tls", "ssl":
		host, port, err := splitHostPort(rest)
		if err != nil || host == "" {
			return Target{}, fmt.Errorf("openflow: bad target %q: want %s:HOST[:PORT]", s, scheme)
		}
		return Target{TLS: scheme != "tcp", Addr: net.JoinHostPort(host, port)}, nil
	case "ptcp", "ptls", "pssl":
		port, ip, _ := strings.Cut(rest, ":")
		if port == "" {
			port = strconv.Itoa(DefaultPort)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
			return Target{}, fmt.Errorf("openflow: bad target %q: want %s:[PORT][:IP]", s, scheme)
		}
		ip = strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]")
		if ip != "" && net.ParseIP(ip) == nil {
			return Target{}, fmt.Errorf("openflow: bad target %q: %q is not an IP address", s, ip)
		}
		return Target{Passive: true, TLS: scheme != "ptcp", Addr: net.JoinHostPort(ip, port)}, nil
	}
	return Target{}, fmt.Errorf("openflow: bad target %q: want tcp:, ssl:/tls: HOST[:PORT] or ptcp:, pssl:/ptls: [PORT][:IP]", s)
}

// splitHostPort splits HOST[:PORT], with the default port.
func splitHostPort(s string) (host, port string, err error) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "", "", fmt.Errorf("bad port %q", p)
		}
		return h, p, nil
	}
	if strings.Count(s, ":") > 0 && !strings.HasPrefix(s, "[") {
		return "", "", fmt.Errorf("bad address %q", s)
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), strconv.Itoa(DefaultPort), nil
}
