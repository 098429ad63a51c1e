package agent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/route"
)

// TestStaticRoutes checks that the routes: list becomes validated routes,
// with the defaults (table 254, weight 1) filled in.
func TestStaticRoutes(t *testing.T) {
	c := Config{
		Router: RouterConfig{Ports: []RouterPortConfig{{Port: 1}, {Port: 2, Table: 100}}},
		Routes: []StaticRouteConfig{
			{Prefix: "10.9.0.0/16", NextHops: []NextHopConfig{{Gateway: "10.0.1.2", Port: 1}, {Gateway: "10.0.2.2", Port: 2, Weight: 3}}},
			{Table: 100, Prefix: "2001:db8:9::/48", NextHops: []NextHopConfig{{Port: 2}}, Metric: 5},
		},
	}
	rs, err := staticRoutes(&c)
	if err != nil {
		t.Fatal(err)
	}
	want := []route.Route{
		{Table: 254, Prefix: netip.MustParsePrefix("10.9.0.0/16"), Source: "static", NextHops: []route.NextHop{
			{Gateway: netip.MustParseAddr("10.0.1.2"), Port: 1, Weight: 1}, {Gateway: netip.MustParseAddr("10.0.2.2"), Port: 2, Weight: 3}}},
		{Table: 100, Prefix: netip.MustParsePrefix("2001:db8:9::/48"), Source: "static", Metric: 5, NextHops: []route.NextHop{{Port: 2, Weight: 1}}},
	}
	if len(rs) != 2 || !rs[0].Equal(want[0]) || !rs[1].Equal(want[1]) {
		t.Fatalf("got %v\nwant %v", rs, want)
	}
}

// TestRouteConfigMistakes: every bad static route and kernel_fib setting
// is a one-line configuration error naming the entry and the fault.
func TestRouteConfigMistakes(t *testing.T) {
	base := Config{Router: RouterConfig{Ports: []RouterPortConfig{{Port: 1}, {Port: 2, Table: 100}}}}
	nh := []NextHopConfig{{Gateway: "10.0.1.2", Port: 1}}
	cases := map[string]struct {
		routes []StaticRouteConfig
		kfib   KernelFIBConfig
		want   string
	}{
		"bad prefix":       {routes: []StaticRouteConfig{{Prefix: "10.0.0/8", NextHops: nh}}, want: "routes[0] (10.0.0/8): prefix"},
		"host bits":        {routes: []StaticRouteConfig{{Prefix: "10.1.2.3/8", NextHops: nh}}, want: "host bits set (want 10.0.0.0/8)"},
		"no next hop":      {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8"}}, want: "no next hop"},
		"bad gateway":      {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: []NextHopConfig{{Gateway: "x", Port: 1}}}}, want: `gateway "x" is not an address`},
		"family":           {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: []NextHopConfig{{Gateway: "2001:db8::1", Port: 1}}}}, want: "not of the prefix's family"},
		"not router port":  {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: []NextHopConfig{{Port: 3}}}}, want: "port 3 is not a router port"},
		"unused table":     {routes: []StaticRouteConfig{{Table: 7, Prefix: "10.0.0.0/8", NextHops: nh}}, want: "table 7 is no router port's table"},
		"duplicate":        {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: nh}, {Prefix: "10.0.0.0/8", NextHops: nh}}, want: "already given in routes[0]"},
		"weight":           {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: []NextHopConfig{{Port: 1, Weight: 1 << 20}}}}, want: "weight 1048576 not in 1..65536"},
		"same next hop":    {routes: []StaticRouteConfig{{Prefix: "10.0.0.0/8", NextHops: append(nh, nh[0])}}, want: "repeats an earlier one"},
		"kfib table":       {kfib: KernelFIBConfig{Table: 9}, want: "kernel_fib: table 9 is no router port's table"},
		"kfib buffer":      {kfib: KernelFIBConfig{Table: 100, ReceiveBuffer: -1}, want: "receive_buffer -1"},
		"kfib netns":       {kfib: KernelFIBConfig{Table: 254, Netns: "a/b"}, want: `netns "a/b"`},
		"kfib without tbl": {kfib: KernelFIBConfig{Netns: "x"}, want: "need kernel_fib.table"},
	}
	for name, c := range cases {
		cfg := base
		cfg.Routes, cfg.KernelFIB = c.routes, c.kfib
		_, err := staticRoutes(&cfg)
		if err == nil {
			err = checkKernelFIB(&cfg)
		}
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line configuration error with %q", name, err, c.want)
		}
	}
	cfg := base
	cfg.KernelFIB = KernelFIBConfig{Table: 100, ReceiveBuffer: 1 << 20}
	if err := checkKernelFIB(&cfg); err != nil {
		t.Errorf("a good kernel_fib: %v", err)
	}
}

// TestKernelFIBFlags checks that the flags override the file's kernel_fib.
func TestKernelFIBFlags(t *testing.T) {
	f := newFlags()
	if err := f.fs.Parse([]string{"--kernel-fib-table", "100", "--kernel-fib-receive-buffer", "65536", "--kernel-fib-netns", "r1"}); err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := f.override(&c); err != nil {
		t.Fatal(err)
	}
	if c.KernelFIB != (KernelFIBConfig{Table: 100, ReceiveBuffer: 65536, Netns: "r1"}) {
		t.Fatalf("kernel_fib from flags: %+v", c.KernelFIB)
	}
}
