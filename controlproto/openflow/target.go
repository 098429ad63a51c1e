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
	Passive bool   // ptcp: listen
	Addr    string // host:port to dial, or [ip]:port to listen on
}

// ParseTarget reads Open vSwitch's syntax: "tcp:HOST[:PORT]" (an active
// connection; an IPv6 host in brackets) and "ptcp:[PORT][:IP]" (a passive
// listener, on every address when IP is empty). PORT defaults to 6653.
func ParseTarget(s string) (Target, error) {
	switch {
	case strings.HasPrefix(s, "tcp:"):
		host, port, err := splitHostPort(strings.TrimPrefix(s, "tcp:"))
		if err != nil || host == "" {
			return Target{}, fmt.Errorf("openflow: bad target %q: want tcp:HOST[:PORT]", s)
		}
		return Target{Addr: net.JoinHostPort(host, port)}, nil
	case strings.HasPrefix(s, "ptcp:"):
		port, ip, _ := strings.Cut(strings.TrimPrefix(s, "ptcp:"), ":")
		if port == "" {
			port = strconv.Itoa(DefaultPort)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
			return Target{}, fmt.Errorf("openflow: bad target %q: want ptcp:[PORT][:IP]", s)
		}
		ip = strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]")
		if ip != "" && net.ParseIP(ip) == nil {
			return Target{}, fmt.Errorf("openflow: bad target %q: %q is not an IP address", s, ip)
		}
		return Target{Passive: true, Addr: net.JoinHostPort(ip, port)}, nil
	}
	return Target{}, fmt.Errorf("openflow: bad target %q: want tcp:HOST[:PORT] or ptcp:[PORT][:IP]", s)
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
