package agent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/datapath/l3"
)

func TestRouterPortFlag(t *testing.T) {
	rp, err := parseRouterPortFlag("2=10.0.1.1/24,2001:db8:1::1/64,table=100,mac=02:00:00:00:00:09")
	if err != nil {
		t.Fatal(err)
	}
	if rp.Port != 2 || len(rp.Addresses) != 2 || rp.Table != 100 || rp.MAC != "02:00:00:00:00:09" {
		t.Fatalf("%+v", rp)
	}
	for _, bad := range []string{"", "x=10.0.0.1/24", "1", "1=", "1=10.0.0.1/24,table=x", "1=10.0.0.1/24,vrf=3"} {
		if _, err := parseRouterPortFlag(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("--router-port %q: %v, want a configuration error", bad, err)
		}
	}
}

func TestCheckRouter(t *testing.T) {
	ports := []PortConfig{{Number: 1, Interface: "a"}, {Number: 2, Interface: "b"}}
	rs, err := checkRouter(RouterConfig{Neighbours: "kernel", Ports: []RouterPortConfig{
		{Port: 1, Addresses: []string{"10.0.1.1/24", "2001:db8:1::1/64"}},
		{Port: 2, Addresses: []string{"10.0.2.1/24"}, Table: 7, MAC: "02:00:00:00:00:02"},
	}}, ports)
	if err != nil {
		t.Fatal(err)
	}
	if rs.mode != l3.NeighKernel || len(rs.ports) != 2 || rs.ports[0].Table != defaultRouteTable || rs.ports[1].Table != 7 ||
		rs.ports[1].MAC != (l3.MAC{2, 0, 0, 0, 0, 2}) || rs.ports[0].Addrs[1] != netip.MustParsePrefix("2001:db8:1::1/64") {
		t.Fatalf("%+v", rs)
	}
	for _, c := range []struct {
		rc   RouterConfig
		want string
	}{
		{RouterConfig{Neighbours: "arp"}, "neighbour mode"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 3, Addresses: []string{"10.0.0.1/24"}}}}, "no such port"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1}}}, "no addresses"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.0.1"}}}}, "want ADDR/LEN"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.0.0/24"}}}}, "subnet's own address"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"fe80::1/64"}}}}, "link-local"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.0.1/24"}, MAC: "01:00:5e:00:00:01"}}}, "unicast Ethernet"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.0.1/24"}}, {Port: 2, Addresses: []string{"10.0.0.1/24"}}}}, "given to ports 1 and 2"},
		{RouterConfig{Ports: []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.0.1/24"}}, {Port: 1, Addresses: []string{"10.0.1.1/24"}}}}, "given twice"},
	} {
		_, err := checkRouter(c.rc, ports)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a configuration error saying %q", c.rc, err, c.want)
		}
	}
}

func TestRouterYAML(t *testing.T) {
	var c Config
	if err := decodeYAML(&c, defaultConfig, "default"); err != nil {
		t.Fatal(err)
	}
	if c.Router.Neighbours != "own" || len(c.Router.Ports) != 0 {
		t.Fatalf("default router section: %+v", c.Router)
	}
	y := "router:\n  neighbours: kernel\n  ports:\n    - port: 3\n      addresses: [10.0.3.1/24, 2001:db8:3::1/64]\n      table: 100\n      mac: 02:00:00:00:03:01\n"
	if err := decodeYAML(&c, []byte(y), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	rs, err := checkRouter(c.Router, []PortConfig{{Number: 3, Interface: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if rs.mode != l3.NeighKernel || len(rs.ports) != 1 || rs.ports[0].Table != 100 || len(rs.ports[0].Addrs) != 2 {
		t.Fatalf("%+v", rs)
	}
	if err := decodeYAML(&c, []byte("router:\n  vrf: 3\n"), "bad.yaml"); !errors.Is(err, ErrConfig) {
		t.Fatalf("an unknown router key: %v, want a configuration error", err)
	}
}
