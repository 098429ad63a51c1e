package integration

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gswitch/gswitch/controlproto/p4rt"
)

// The P4Runtime tests run gswitchd with its P4Runtime server in the switch
// namespace and drive it over gRPC: from this process (a socket created in
// that namespace) and with grpcurl, a client the project did not write.

// startP4RT starts gswitchd with P4Runtime on a free port of the switch
// namespace's loopback and returns the daemon and the address.
func startP4RT(t *testing.T, tp *topo, extra ...string) (*daemon, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(20000))
	d := startGswitchd(t, tp, append([]string{"--p4rt-listen", addr}, extra...)...)
	return d, addr
}

// p4conn dials addr inside namespace ns: the socket is created there and
// stays there, whichever goroutine uses it.
func p4conn(t *testing.T, ns, addr string) p4v1.P4RuntimeClient {
	t.Helper()
	cl, err := p4connCreds(t, ns, addr, insecure.NewCredentials())
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// nsDialer dials inside namespace ns: the socket is created there and
// stays there, whichever goroutine uses it.
func nsDialer(ns string) func(ctx context.Context, a string) (net.Conn, error) {
	return func(ctx context.Context, a string) (net.Conn, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return nil, err
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			return nil, err
		}
		var d net.Dialer
		c, derr := d.DialContext(ctx, "tcp", a)
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", err))
		}
		return c, derr
	}
}

// p4connCreds is p4conn with transport credentials; it returns the last
// Capabilities error when the server cannot be reached with them.
func p4connCreds(t *testing.T, ns, addr string, creds credentials.TransportCredentials) (p4v1.P4RuntimeClient, error) {
	t.Helper()
	dial := nsDialer(ns)
	conn, err := grpc.Dial(addr, grpc.WithContextDialer(dial), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cl := p4v1.NewP4RuntimeClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Capabilities(ctx, &p4v1.CapabilitiesRequest{})
		cancel()
		if err == nil {
			return cl, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("P4Runtime server at %s (netns %s) unreachable: %w", addr, ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// p4primary opens a stream, becomes primary with election id 1 and
// commits gswitch's pipeline; it returns the stream's received messages.
func p4primary(t *testing.T, cl p4v1.P4RuntimeClient) (p4v1.P4Runtime_StreamChannelClient, <-chan *p4v1.StreamMessageResponse) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := cl.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}}}}); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *p4v1.StreamMessageResponse, 256)
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	select {
	case m := <-msgs:
		if m.GetArbitration().GetStatus().GetCode() != 0 {
			t.Fatalf("arbitration: %v, want OK", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no arbitration answer")
	}
	if err := p4commit(cl); err != nil {
		t.Fatal(err)
	}
	return s, msgs
}

// p4commit commits gswitch's pipeline (VERIFY_AND_COMMIT) as primary 1.
func p4commit(cl p4v1.P4RuntimeClient) error {
	_, err := cl.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1},
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, Config: &p4v1.ForwardingPipelineConfig{P4Info: p4rt.P4Info()}})
	return err
}

func p4write(t *testing.T, cl p4v1.P4RuntimeClient, ups ...*p4v1.Update) {
	t.Helper()
	if _, err := cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Updates: ups}); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func p4upd(typ p4v1.Update_Type, te *p4v1.TableEntry) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}}
}

func p4act(id uint32, params ...[]byte) *p4v1.TableAction {
	a := &p4v1.Action{ActionId: id}
	for i, p := range params {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: uint32(i + 1), Value: p})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
}

func p4ternary(id uint32, v, m []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: v, Mask: m}}}
}

func hostMAC(i int) []byte { return []byte{2, 0, 0, 0, 0, byte(i)} }

var bcast = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// l2Entry forwards frames to host i's MAC out of port i.
func l2Entry(i int) *p4v1.Update {
	return p4upd(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: p4rt.TableL2, Action: p4act(p4rt.ActionForward, []byte{byte(i)}),
		Match: []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: hostMAC(i)}}}}})
}

// aclEntry builds an ACL entry from ternary fields.
func aclEntry(typ p4v1.Update_Type, prio int32, a *p4v1.TableAction, fms ...*p4v1.FieldMatch) *p4v1.Update {
	return p4upd(typ, &p4v1.TableEntry{TableId: p4rt.TableACL, Priority: prio, Action: a, Match: fms})
}

// TestP4RuntimeL2AndACL: hosts 1 and 2 reach each other through l2_exact
// entries (and ACL entries that send each one's broadcasts to the other);
// an ACL drop entry for ICMP stops the ping, and deleting it lets it
// through again. The direct counters count the echo requests.
func TestP4RuntimeL2AndACL(t *testing.T) {
	tp := newTopo(t, 2)
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	p4primary(t, cl)
	if err := tp.ping(t, 1, "10.0.0.2", 1); err == nil {
		t.Fatal("ping went through before any entry")
	}
	ones := []byte{0xff, 0xff, 0xff, 0xff}
	p4write(t, cl, l2Entry(1), l2Entry(2),
		aclEntry(p4v1.Update_INSERT, 10, p4act(p4rt.ActionForward, []byte{2}), p4ternary(1, []byte{1}, ones), p4ternary(3, bcast, bcast)),
		aclEntry(p4v1.Update_INSERT, 10, p4act(p4rt.ActionForward, []byte{1}), p4ternary(1, []byte{2}, ones), p4ternary(3, bcast, bcast)))
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatal(err)
	}
	drop := func(typ p4v1.Update_Type) *p4v1.Update {
		return aclEntry(typ, 100, p4act(p4rt.ActionDrop), p4ternary(7, []byte{1}, []byte{0xff})) // ip_proto ICMP
	}
	p4write(t, cl, drop(p4v1.Update_INSERT))
	if err := tp.ping(t, 1, "10.0.0.2", 2); err == nil {
		t.Fatal("ping went through the ACL drop entry")
	}
	q := &p4v1.TableEntry{TableId: p4rt.TableACL, Priority: 100, Match: []*p4v1.FieldMatch{p4ternary(7, []byte{1}, []byte{0xff})}, CounterData: &p4v1.CounterData{}}
	rs, err := cl.Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: q}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil || len(resp.GetEntities()) != 1 {
		t.Fatalf("read of the drop entry: %v, %v", resp, err)
	}
	if n := resp.GetEntities()[0].GetTableEntry().GetCounterData().GetPacketCount(); n < 2 {
		t.Errorf("the drop entry counted %d packets, want at least the 2 echo requests", n)
	}
	p4write(t, cl, drop(p4v1.Update_DELETE))
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatalf("after deleting the drop entry: %v", err)
	}
}

// TestP4RuntimeLPMRouting: host 3 moves to 10.0.3.0/24; hosts 1 and 3 use
// a router MAC as their gateway, and ipv4_lpm entries route between them
// (set_next_hop: MACs rewritten, TTL decremented: the replies arrive with
// TTL 63).
func TestP4RuntimeLPMRouting(t *testing.T) {
	tp := newTopo(t, 3)
	router := "02:aa:00:00:00:fe"
	routerMAC := []byte{2, 0xaa, 0, 0, 0, 0xfe}
	h1, h3 := tp.hosts[0], tp.hosts[2]
	sh(t, "ip", "-n", h3, "addr", "flush", "dev", "eth0")
	sh(t, "ip", "-n", h3, "addr", "add", "10.0.3.3/24", "dev", "eth0")
	sh(t, "ip", "-n", h3, "route", "add", "default", "via", "10.0.3.254")
	sh(t, "ip", "-n", h3, "neigh", "add", "10.0.3.254", "lladdr", router, "dev", "eth0")
	sh(t, "ip", "-n", h1, "route", "add", "10.0.3.0/24", "via", "10.0.0.254")
	sh(t, "ip", "-n", h1, "neigh", "add", "10.0.0.254", "lladdr", router, "dev", "eth0")
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	p4primary(t, cl)
	route := func(dst []byte, plen int32, port int) *p4v1.Update {
		return p4upd(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: p4rt.TableIPv4,
			Match:  []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: dst, PrefixLen: plen}}}},
			Action: p4act(p4rt.ActionSetNextHop, []byte{byte(port)}, routerMAC, hostMAC(port))})
	}
	p4write(t, cl, route([]byte{10, 0, 3, 0}, 24, 3), route([]byte{10, 0, 0, 1}, 32, 1))
	out, err := exec.Command("ip", "netns", "exec", h1, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", "10.0.3.3").CombinedOutput()
	if err != nil {
		t.Fatalf("ping across the route: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ttl=63") {
		t.Errorf("replies without the routed TTL 63:\n%s", out)
	}
}

// TestP4RuntimePacketInOut: an ACL entry punts ARP to the controller (a
// PacketIn with ingress_port 1 when host 1 looks for a neighbour); a
// PacketOut with egress_port 2 reaches host 2.
func TestP4RuntimePacketInOut(t *testing.T) {
	tp := newTopo(t, 2)
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	s, msgs := p4primary(t, cl)
	p4write(t, cl, aclEntry(p4v1.Update_INSERT, 5, p4act(p4rt.ActionSendToCPU), p4ternary(4, []byte{8, 6}, []byte{0xff, 0xff})))
	_ = tp.ping(t, 1, "10.0.0.2", 1) // its ARP request is punted
	deadline := time.After(5 * time.Second)
	for got := false; !got; {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("stream closed")
			}
			pin := m.GetPacket()
			if pin == nil {
				continue
			}
			if len(pin.GetPayload()) < 14 || pin.GetPayload()[12] != 8 || pin.GetPayload()[13] != 6 || len(pin.GetMetadata()) != 1 ||
				pin.GetMetadata()[0].GetMetadataId() != 1 || string(pin.GetMetadata()[0].GetValue()) != "\x01" {
				t.Fatalf("packet-in %v: want an ARP frame with ingress_port 1", pin)
			}
			got = true
		case <-deadline:
			t.Fatal("no packet-in within 5 s")
		}
	}
	rx := func() int {
		out := sh(t, "ip", "netns", "exec", tp.hosts[1], "cat", "/sys/class/net/eth0/statistics/rx_packets")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rx()
	frame := append(append(append([]byte{}, hostMAC(2)...), hostMAC(1)...), 0x88, 0xb5) // local experimental ethertype
	frame = append(frame, make([]byte, 46)...)
	for range 5 {
		if err := s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: frame,
			Metadata: []*p4v1.PacketMetadata{{MetadataId: 1, Value: []byte{2}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(5 * time.Second); rx()-before < 5; {
		if time.Now().After(end) {
			t.Fatalf("host 2 received %d of the 5 packet-outs", rx()-before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestP4RuntimeOwnsTheSwitch: one control plane at a time. A commit is
// refused while an OpenFlow connection is open (ovs-ofctl monitor holds
// one); once a pipeline is committed, the OpenFlow agent refuses flow
// changes.
func TestP4RuntimeOwnsTheSwitch(t *testing.T) {
	tp := newTopo(t, 2)
	addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(20000))
	d := startWithListener(t, tp, "--p4rt-listen", addr)
	d.mustOfctl(t, "add-flow", "in_port=1,actions=output:2")
	mon := exec.Command("ip", "netns", "exec", tp.sw, "ovs-ofctl", "-O", "OpenFlow13", "--unixctl="+filepath.Join(t.TempDir(), "mon.ctl"),
		"monitor", fmt.Sprintf("tcp:127.0.0.1:%d", d.ofPort))
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	monDone := make(chan struct{})
	go func() { mon.Wait(); close(monDone) }()
	defer func() { mon.Process.Kill(); <-monDone }()
	ctlBin := gswitchctlBin.build(t)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command(ctlBin, "show", "--socket", d.ctl, "--json", "stats").CombinedOutput()
		var st struct{ Controller int }
		if json.Unmarshal(out, &st) == nil && st.Controller >= 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("gswitchd does not count ovs-ofctl monitor's connection:\n%s", out)
		}
	}
	cl := p4conn(t, tp.sw, addr)
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		// p4primary commits; make a stream primary first without it.
		if err = p4commit(cl); err != nil && !strings.Contains(err.Error(), "PermissionDenied") {
			break
		}
		if err != nil { // not primary yet: a stream
			s, serr := cl.StreamChannel(context.Background())
			if serr != nil {
				t.Fatal(serr)
			}
			if serr := s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
				DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}}}}); serr != nil {
				t.Fatal(serr)
			}
			if _, serr := s.Recv(); serr != nil {
				t.Fatal(serr)
			}
			defer s.CloseSend()
		}
	}
	if err == nil || !strings.Contains(err.Error(), "FailedPrecondition") || !strings.Contains(err.Error(), "OpenFlow") {
		t.Fatalf("commit with ovs-ofctl monitor connected: %v, want FAILED_PRECONDITION naming the OpenFlow connection", err)
	}
	mon.Process.Kill()
	<-monDone
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = p4commit(cl); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("commit after ovs-ofctl monitor left: %v", err)
		}
	}
	out, err := d.ofctl(t, "add-flow", "in_port=2,actions=output:1")
	if err == nil || !strings.Contains(strings.ToUpper(out), "PERM") {
		t.Fatalf("ovs-ofctl add-flow after the P4Runtime commit: %v\n%s\nwant an EPERM error", err, out)
	}
	if dump := d.mustOfctl(t, "dump-flows"); strings.Contains(dump, "in_port=1") {
		t.Errorf("the OpenFlow entry survived the commit (tables 0..3 are cleared):\n%s", dump)
	}
}

// grpcurlPath finds grpcurl in PATH or in GOPATH/bin, failing with how to
// install it.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("grpcurl is not installed: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.1")
	return ""
}

// TestP4RuntimeGrpcurl drives the server with grpcurl over server
// reflection: Capabilities, a stream that becomes primary, pipeline
// set and get, Write and Read.
func TestP4RuntimeGrpcurl(t *testing.T) {
	gc := grpcurlPath(t)
	tp := newTopo(t, 2)
	_, addr := startP4RT(t, tp, "--p4rt-reflection")
	p4conn(t, tp.sw, addr) // waits for the server
	call := func(method, data string) string {
		t.Helper()
		args := []string{"netns", "exec", tp.sw, gc, "-plaintext", "-max-time", "10"}
		if data != "" {
			args = append(args, "-d", data)
		}
		out, err := exec.Command("ip", append(args, addr, "p4.v1.P4Runtime/"+method)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", method, err, out)
		}
		return string(out)
	}
	if out := call("Capabilities", "{}"); !strings.Contains(out, p4rt.APIVersion) {
		t.Fatalf("Capabilities: %s", out)
	}
	// A StreamChannel held open by grpcurl reading requests from a pipe.
	stream := exec.Command("ip", "netns", "exec", tp.sw, gc, "-plaintext", "-d", "@", addr, "p4.v1.P4Runtime/StreamChannel")
	in, err := stream.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := stream.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stream.Stderr = os.Stderr
	if err := stream.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); stream.Wait() }()
	if _, err := io.WriteString(in, `{"arbitration": {"device_id": "1", "election_id": {"low": "7"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line := readJSONObject(t, bufio.NewReader(outPipe)); !strings.Contains(line, `"arbitration"`) || strings.Contains(line, `"code"`) {
		t.Fatalf("StreamChannel answer %s: want an arbitration with status OK (code 0 is omitted)", line)
	}
	p4info, err := protojson.Marshal(p4rt.P4Info())
	if err != nil {
		t.Fatal(err)
	}
	call("SetForwardingPipelineConfig", fmt.Sprintf(`{"device_id": "1", "election_id": {"low": "7"}, "action": "VERIFY_AND_COMMIT",
		"config": {"p4info": %s, "cookie": {"cookie": "99"}}}`, p4info))
	if out := call("GetForwardingPipelineConfig", `{"device_id": "1", "response_type": "COOKIE_ONLY"}`); !strings.Contains(out, `"99"`) || strings.Contains(out, "p4info") {
		t.Fatalf("GetForwardingPipelineConfig COOKIE_ONLY: %s", out)
	}
	mac := "AgAAAAAC" // base64 of 02:00:00:00:00:02
	call("Write", fmt.Sprintf(`{"device_id": "1", "election_id": {"low": "7"}, "updates": [{"type": "INSERT", "entity": {"table_entry": {
		"table_id": %d, "match": [{"field_id": 1, "exact": {"value": %q}}],
		"action": {"action": {"action_id": %d, "params": [{"param_id": 1, "value": "Ag=="}]}}}}}]}`, p4rt.TableL2, mac, p4rt.ActionForward))
	out := call("Read", `{"device_id": "1", "entities": [{"table_entry": {}}]}`)
	var resp struct {
		Entities []struct {
			TableEntry struct {
				TableID uint32 `json:"tableId"`
			} `json:"tableEntry"`
		} `json:"entities"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Entities) != 1 || resp.Entities[0].TableEntry.TableID != p4rt.TableL2 {
		t.Fatalf("Read of every table: %v\n%s\nwant the one l2_exact entry", err, out)
	}
	// A second write of the same entry: UNKNOWN with ALREADY_EXISTS in the details.
	args := []string{"netns", "exec", tp.sw, gc, "-plaintext", "-format-error", "-d", fmt.Sprintf(`{"device_id": "1", "election_id": {"low": "7"}, "updates": [{"type": "INSERT", "entity": {"table_entry": {
		"table_id": %d, "match": [{"field_id": 1, "exact": {"value": %q}}],
		"action": {"action": {"action_id": %d, "params": [{"param_id": 1, "value": "Ag=="}]}}}}}]}`, p4rt.TableL2, mac, p4rt.ActionForward), addr, "p4.v1.P4Runtime/Write"}
	eout, err := exec.Command("ip", args...).CombinedOutput()
	if err == nil || !strings.Contains(string(eout), `"code": 2`) || !strings.Contains(string(eout), `"canonicalCode": 6`) {
		t.Fatalf("duplicate insert with grpcurl: %v\n%s\nwant code 2 (UNKNOWN) with a p4.v1.Error detail of canonical code 6 (ALREADY_EXISTS)", err, eout)
	}
}

// readJSONObject reads one JSON object grpcurl printed (it pretty-prints
// across lines).
func readJSONObject(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		var b strings.Builder
		depth := 0
		for {
			c, err := r.ReadByte()
			if err != nil {
				done <- b.String()
				return
			}
			b.WriteByte(c)
			switch c {
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					done <- b.String()
					return
				}
			}
		}
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no answer on the StreamChannel within 10 s")
		return ""
	}
}

// TestP4RuntimeMutualTLS: gswitchd serves P4Runtime over TLS and requires
// client certificates; a client with one from the CA is served, one
// without is not.
func TestP4RuntimeMutualTLS(t *testing.T) {
	tp := newTopo(t, 1)
	dir := t.TempDir()
	ca, caKey := p4cert(t, "test ca", nil, nil)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	srv, srvKey := p4cert(t, "127.0.0.1", ca, caKey)
	writePEM(t, filepath.Join(dir, "srv.pem"), "CERTIFICATE", srv.Raw)
	kder, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "srv.key"), "EC PRIVATE KEY", kder)
	cli, cliKey := p4cert(t, "controller", ca, caKey)
	_, addr := startP4RT(t, tp, "--p4rt-tls-certificate", filepath.Join(dir, "srv.pem"), "--p4rt-tls-private-key", filepath.Join(dir, "srv.key"),
		"--p4rt-tls-ca-cert", filepath.Join(dir, "ca.pem"), "--p4rt-require-client-cert")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	good := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{cli.Raw}, PrivateKey: cliKey}}})
	cl, err := p4connCreds(t, tp.sw, addr, good)
	if err != nil {
		t.Fatal(err)
	}
	p4primary(t, cl)
	noCert := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, addr, grpc.WithTransportCredentials(noCert), grpc.WithContextDialer(nsDialer(tp.sw)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := p4v1.NewP4RuntimeClient(conn).Capabilities(ctx, &p4v1.CapabilitiesRequest{}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	plain, err := grpc.DialContext(ctx, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(nsDialer(tp.sw)))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := p4v1.NewP4RuntimeClient(plain).Capabilities(ctx, &p4v1.CapabilitiesRequest{}); err == nil {
		t.Fatal("a plaintext client was served by the TLS server")
	}
}

// p4cert makes a certificate (a CA when parent is nil) with an ECDSA key.
func p4cert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
		parent, parentKey = tmpl, key
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
