// Command ipshim stands in for iproute2's ip on a machine without it (the
// device machine has no iproute2 and no network to install it from): it
// does, through netlink, the few ip commands that the integration tests'
// namespace topologies use, so that a test binary built elsewhere runs
// there unchanged with ipshim first in PATH under the name ip:
//
//	ip netns add|del NAME
//	ip netns exec NAME CMD [ARG...]
//	ip -n NS link set DEV up
//	ip -n NS link add DEV type veth peer name PEER [netns NS2]
//	ip -n NS addr add ADDR/LEN dev DEV
//
// netns exec enters the namespace on the calling thread and executes CMD
// there (without ip's remount of /sys). Where CMD is ping or sysctl and the
// machine has none, ipshim answers itself: ping -c N ... DST succeeds when
// a TCP connection to DST's port 7 is accepted or refused within the -W
// timeout (the peer answered), and sysctl -w K=V ... writes /proc/sys.
// Anything else exits with status 2 and says so.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ip (ipshim):", err)
		var u usage
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usage string

func (u usage) Error() string { return "unsupported: " + string(u) }

func run(args []string) error {
	ns := ""
	if len(args) >= 2 && args[0] == "-n" {
		ns, args = args[1], args[2:]
	}
	if len(args) < 2 {
		return usage(strings.Join(args, " "))
	}
	switch {
	case args[0] == "netns" && ns == "":
		return netnsCmd(args[1:])
	case args[0] == "link":
		return inHandle(ns, func(h *netlink.Handle) error { return linkCmd(h, args[1:]) })
	case args[0] == "addr" || args[0] == "address":
		return inHandle(ns, func(h *netlink.Handle) error { return addrCmd(h, args[1:]) })
	}
	return usage(strings.Join(args, " "))
}

func netnsCmd(args []string) error {
	switch {
	case args[0] == "add" && len(args) == 2:
		runtime.LockOSThread() // NewNamed enters the new namespace
		h, err := netns.NewNamed(args[1])
		if err != nil {
			return err
		}
		return h.Close()
	case (args[0] == "del" || args[0] == "delete") && len(args) == 2:
		return netns.DeleteNamed(args[1])
	case args[0] == "exec" && len(args) >= 3:
		return execIn(args[1], args[2], args[3:])
	}
	return usage("netns " + strings.Join(args, " "))
}

// execIn runs cmd in namespace name, in place of this process.
func execIn(name, cmd string, args []string) error {
	runtime.LockOSThread()
	h, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	if err := netns.Set(h); err != nil {
		return err
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		switch cmd {
		case "ping":
			return ping(args)
		case "sysctl":
			return sysctl(args)
		}
		return err
	}
	return syscall.Exec(path, append([]string{cmd}, args...), os.Environ())
}

// inHandle calls f with a netlink handle in namespace ns ("": this one).
func inHandle(ns string, f func(*netlink.Handle) error) error {
	var h *netlink.Handle
	var err error
	if ns == "" {
		h, err = netlink.NewHandle()
	} else {
		var n netns.NsHandle
		if n, err = netns.GetFromName(ns); err != nil {
			return err
		}
		defer n.Close()
		h, err = netlink.NewHandleAt(n)
	}
	if err != nil {
		return err
	}
	defer h.Close()
	return f(h)
}

func linkCmd(h *netlink.Handle, args []string) error {
	switch {
	case args[0] == "set" && len(args) == 3 && args[2] == "up":
		l, err := h.LinkByName(args[1])
		if err != nil {
			return err
		}
		return h.LinkSetUp(l)
	case args[0] == "add" && len(args) >= 6 && args[2] == "type" && args[3] == "veth" && args[4] == "peer" && args[5] == "name":
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: args[1]}, PeerName: args[6]}
		if len(args) == 9 && args[7] == "netns" {
			peer, err := netns.GetFromName(args[8])
			if err != nil {
				return err
			}
			defer peer.Close()
			v.PeerNamespace = netlink.NsFd(peer)
		} else if len(args) != 7 {
			break
		}
		return h.LinkAdd(v)
	}
	return usage("link " + strings.Join(args, " "))
}

func addrCmd(h *netlink.Handle, args []string) error {
	if len(args) != 4 || args[0] != "add" || args[2] != "dev" {
		return usage("addr " + strings.Join(args, " "))
	}
	a, err := netlink.ParseAddr(args[1])
	if err != nil {
		return err
	}
	l, err := h.LinkByName(args[3])
	if err != nil {
		return err
	}
	return h.AddrAdd(l, a)
}

// ping stands in for ping -c N [-i I] [-W W] [-n] DST: it tries a TCP
// connection to DST's port 7 up to N times, I seconds apart, and succeeds
// when one is accepted or refused within W seconds.
func ping(args []string) error {
	count, interval, wait := 1, time.Second, time.Second
	dst := ""
	for i := 0; i < len(args); i++ {
		sec := func() (time.Duration, error) {
			i++
			if i >= len(args) {
				return 0, usage("ping " + strings.Join(args, " "))
			}
			f, err := strconv.ParseFloat(args[i], 64)
			return time.Duration(f * float64(time.Second)), err
		}
		var err error
		switch args[i] {
		case "-n", "-q":
		case "-c":
			var d time.Duration
			d, err = sec()
			count = int(d / time.Second)
		case "-i":
			interval, err = sec()
		case "-W":
			wait, err = sec()
		default:
			if strings.HasPrefix(args[i], "-") {
				return usage("ping " + strings.Join(args, " "))
			}
			dst = args[i]
		}
		if err != nil {
			return err
		}
	}
	for k := 0; k < max(count, 1); k++ {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(dst, "7"), wait)
		if err == nil {
			c.Close()
			return nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		time.Sleep(interval)
	}
	return fmt.Errorf("ping %s: no answer", dst)
}

// sysctl stands in for sysctl [-q] -w KEY=VALUE...
func sysctl(args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			if strings.Trim(a, "-qw") != "" {
				return usage("sysctl " + strings.Join(args, " "))
			}
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return usage("sysctl " + a)
		}
		if err := os.WriteFile("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}
