package afpacket

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// ErrNoInterface is wrapped by the error Open returns for an interface that
// does not exist.
var ErrNoInterface = errors.New("no such interface")

// LinkInfo is what the agent needs to know of a Linux interface.
type LinkInfo struct {
	Name  string
	Index int
	MTU   int
	MAC   net.HardwareAddr
	// AdminUp is IFF_UP: the interface was set up.
	AdminUp bool
	// OperUp is RFC 2863 operational state "up": it can pass packets (a
	// veth is up only when both ends are).
	OperUp bool
	// Deleted is set on the last event of an interface that was removed.
	Deleted bool
}

// String formats the state as "name(index) up/down mtu N mac M".
func (l LinkInfo) String() string {
	st := "down"
	if l.OperUp {
		st = "up"
	} else if l.AdminUp {
		st = "admin-up, no carrier"
	}
	if l.Deleted {
		st = "deleted"
	}
	return fmt.Sprintf("%s(%d) %s mtu %d mac %s", l.Name, l.Index, st, l.MTU, l.MAC)
}

// linkInfo converts netlink's view of an interface.
func linkInfo(l netlink.Link) LinkInfo {
	a := l.Attrs()
	return LinkInfo{
		Name:    a.Name,
		Index:   a.Index,
		MTU:     a.MTU,
		MAC:     append(net.HardwareAddr(nil), a.HardwareAddr...),
		AdminUp: a.Flags&net.FlagUp != 0,
		OperUp:  a.OperState == netlink.OperUp,
	}
}

// LookupLink resolves an interface by name through netlink.
func LookupLink(name string) (LinkInfo, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return LinkInfo{}, fmt.Errorf("afpacket: interface %q: %w", name, ErrNoInterface)
		}
		return LinkInfo{}, fmt.Errorf("afpacket: looking up interface %q: %w", name, err)
	}
	return linkInfo(l), nil
}
