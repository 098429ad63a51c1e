package filter

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Names resolves the named ports and protocols of the language, as libpcap
// does through getaddrinfo and getprotobyname: from the services(5) and
// protocols(5) databases. Host and network names are not resolved (no DNS
// in a filter compiler): they are errors.
type Names struct {
	tcp, udp map[string]int // service name or alias -> port
	protos   map[string]int // protocol name or alias -> number
}

// ParseNames reads services(5) and protocols(5) text; either may be nil.
func ParseNames(services, protocols io.Reader) *Names {
	n := &Names{tcp: map[string]int{}, udp: map[string]int{}, protos: map[string]int{}}
	if services != nil {
		sc := bufio.NewScanner(services)
		for sc.Scan() {
			f := fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			pp := strings.SplitN(f[1], "/", 2)
			if len(pp) != 2 {
				continue
			}
			port, err := strconv.Atoi(pp[0])
			if err != nil || port < 0 || port > 65535 {
				continue
			}
			var m map[string]int
			switch pp[1] {
			case "tcp":
				m = n.tcp
			case "udp":
				m = n.udp
			default:
				continue
			}
			for _, name := range append([]string{f[0]}, f[2:]...) {
				if _, dup := m[name]; !dup {
					m[name] = port
				}
			}
		}
	}
	if protocols != nil {
		sc := bufio.NewScanner(protocols)
		for sc.Scan() {
			f := fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			num, err := strconv.Atoi(f[1])
			if err != nil || num < 0 || num > 255 {
				continue
			}
			for _, name := range append([]string{f[0]}, f[2:]...) {
				if _, dup := n.protos[name]; !dup {
					n.protos[name] = num
				}
			}
		}
	}
	return n
}

func fields(line string) []string {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	return strings.Fields(line)
}

var (
	systemOnce  sync.Once
	systemNames *Names
)

// SystemNames reads /etc/services and /etc/protocols once (Debian package
// netbase); missing files give empty tables.
func SystemNames() *Names {
	systemOnce.Do(func() {
		var s, p io.Reader
		if f, err := os.Open("/etc/services"); err == nil {
			defer f.Close()
			s = f
		}
		if f, err := os.Open("/etc/protocols"); err == nil {
			defer f.Close()
			p = f
		}
		systemNames = ParseNames(s, p)
	})
	return systemNames
}

// port resolves a service name as pcap_nametoport: TCP's number wins, and
// a name with the same number for TCP and UDP means both.
func (n *Names) port(name string) (port int, proto int, ok bool) {
	t, tok := n.tcp[name]
	u, uok := n.udp[name]
	switch {
	case tok && uok && t == u:
		return t, protoUndef, true
	case tok:
		return t, ipTCP, true
	case uok:
		return u, ipUDP, true
	}
	return 0, 0, false
}

// portRange resolves "A-B" as pcap_nametoportrange.
func (n *Names) portRange(s string) (p1, p2, proto int, ok bool) {
	if a, b, ok := scanRange(s); ok {
		return a, b, protoUndef, true
	}
	i := strings.IndexByte(s, '-')
	if i < 0 {
		return 0, 0, 0, false
	}
	p1, pr1, ok1 := n.port(s[:i])
	p2, pr2, ok2 := n.port(s[i+1:])
	if !ok1 || !ok2 {
		return 0, 0, 0, false
	}
	if pr1 != pr2 {
		pr1 = protoUndef
	}
	return p1, p2, pr1, true
}

// scanRange is sscanf("%d-%d").
func scanRange(s string) (int, int, bool) {
	a, rest, ok := scanInt(s)
	if !ok || !strings.HasPrefix(rest, "-") {
		return 0, 0, false
	}
	b, _, ok := scanInt(rest[1:])
	return a, b, ok
}

func scanInt(s string) (int, string, bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	j := i
	v := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 10 {
		v = v*10 + int(s[j]-'0')
		j++
	}
	if j == i {
		return 0, s, false
	}
	if neg {
		v = -v
	}
	return v, s[j:], true
}

var etherProtoNames = map[string]uint32{"aarp": 0x80f3, "arp": etherARP, "atalk": 0x809b, "decnet": 0x6003,
	"ip": etherIP, "ip6": etherIPv6, "lat": 0x6004, "loopback": 0x9000, "mopdl": 0x6001, "moprc": 0x6002,
	"rarp": etherRARP, "sca": 0x6007, "iso": 0xfe, "stp": 0x42, "ipx": 0xe0, "netbeui": 0xf0}
