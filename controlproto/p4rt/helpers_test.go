package p4rt

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rule"
)

// fakeDev records the frames the switch sends out of a port.
type fakeDev struct {
	name string
	mu   sync.Mutex
	sent [][]byte
}

func (d *fakeDev) Send(frames [][]byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range frames {
		d.sent = append(d.sent, append([]byte(nil), f...))
	}
	return len(frames), nil
}
func (d *fakeDev) Link() afpacket.LinkInfo {
	return afpacket.LinkInfo{Name: d.name, AdminUp: true, OperUp: true, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
}
func (d *fakeDev) Stats() (afpacket.Stats, error) { return afpacket.Stats{}, nil }
func (d *fakeDev) take() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sent
	d.sent = nil
	return s
}

// ctrl hands the pipeline's packet-ins to the server.
type ctrl struct{ s *Server }

func (c ctrl) PacketIn(pi *rule.PacketIn) int    { return c.s.PacketIn(pi) }
func (c ctrl) FlowRemoved(*rule.FlowRemoved) int { return 0 }
func (c ctrl) PortStatus(*rule.PortStatus) int   { return 0 }
func (c ctrl) Connections() int                  { return c.s.Connections() }
func (c ctrl) Controllers() int                  { return c.s.Connections() }

// rig is a pipeline switch with fake ports, a P4Runtime server on a real
// TCP listener and a client connection to it.
type rig struct {
	sw   *pipeline.Switch
	srv  *Server
	devs []*fakeDev
	conn *grpc.ClientConn
	cl   p4v1.P4RuntimeClient
	addr string
	// stop stops the server the last serve started and waits for it
	// (idempotent): a test changes the server's configuration only after.
	stop func()
}

func newRig(t testing.TB, ports, maxFlows int) *rig {
	t.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	sw, err := pipeline.New(pipeline.Config{DatapathID: 1, Tables: NumPipelineTables, MaxFlows: maxFlows, Classifier: eng})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sw: sw}
	for i := 1; i <= ports; i++ {
		d := &fakeDev{name: "p" + string(rune('0'+i))}
		r.devs = append(r.devs, d)
		if err := sw.AddPort(uint32(i), d); err != nil {
			t.Fatal(err)
		}
	}
	r.srv, err = New(Config{DeviceID: 1, Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	sw.SetController(ctrl{r.srv})
	r.serve(t, nil)
	return r
}

// serve starts the server on 127.0.0.1:0 and dials it.
func (r *rig) serve(t testing.TB, dialOpts []grpc.DialOption) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx, l) }()
	r.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(r.stop)
	if dialOpts == nil {
		dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	r.conn, err = grpc.Dial(r.addr, dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	r.cl = p4v1.NewP4RuntimeClient(r.conn)
}

// streamClient is one StreamChannel.
type streamClient struct {
	t      testing.TB
	s      p4v1.P4Runtime_StreamChannelClient
	cancel context.CancelFunc
	msgs   chan *p4v1.StreamMessageResponse
	end    chan error
}

func (r *rig) open(t testing.TB) *streamClient { return openOn(t, r.cl) }

// openOn opens a stream on the given client.
func openOn(t testing.TB, cl p4v1.P4RuntimeClient) *streamClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := cl.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &streamClient{t: t, s: s, cancel: cancel, msgs: make(chan *p4v1.StreamMessageResponse, 1024), end: make(chan error, 1)}
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				c.end <- err
				return
			}
			c.msgs <- m
		}
	}()
	t.Cleanup(cancel)
	return c
}

func (c *streamClient) arbitrate(hi, lo uint64) {
	c.t.Helper()
	if err := c.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{High: hi, Low: lo}}}}); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message of the given kind, skipping others.
func (c *streamClient) next(kind string) *p4v1.StreamMessageResponse {
	c.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-c.msgs:
			switch {
			case kind == "arbitration" && m.GetArbitration() != nil,
				kind == "packet" && m.GetPacket() != nil,
				kind == "error" && m.GetError() != nil:
				return m
			}
		case err := <-c.end:
			c.t.Fatalf("stream ended waiting for %s: %v", kind, err)
		case <-timeout:
			c.t.Fatalf("no %s message within 5 s", kind)
		}
	}
}

// arbCode waits for an arbitration notice and returns its status code.
func (c *streamClient) arbCode() codes.Code {
	c.t.Helper()
	return codes.Code(c.next("arbitration").GetArbitration().GetStatus().GetCode())
}

// primary opens a stream and makes it primary with election id (0, id).
func (r *rig) primary(t testing.TB, id uint64) *streamClient {
	t.Helper()
	c := r.open(t)
	c.arbitrate(0, id)
	if got := c.arbCode(); got != codes.OK {
		t.Fatalf("arbitration with election id %d: status %s, want OK", id, got)
	}
	return c
}

func (r *rig) setPipeline(t testing.TB, id uint64) {
	t.Helper()
	_, err := r.cl.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: id}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: P4Info(), P4DeviceConfig: []byte("gswitch"), Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 42}}})
	if err != nil {
		t.Fatal(err)
	}
}

// ready returns a rig with a primary (election id 1) and the pipeline.
func ready(t testing.TB, ports int) (*rig, *streamClient) {
	r := newRig(t, ports, 0)
	c := r.primary(t, 1)
	r.setPipeline(t, 1)
	return r, c
}

func (r *rig) write(atom p4v1.WriteRequest_Atomicity, ups ...*p4v1.Update) error {
	_, err := r.cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Atomicity: atom, Updates: ups})
	return withDetails(err)
}

// withDetails adds the per-update errors to a Write error's text.
func withDetails(err error) error {
	if err == nil {
		return nil
	}
	st := grpcstatus.Convert(err)
	var msgs []string
	for i, d := range st.Details() {
		if pe, ok := d.(*p4v1.Error); ok && pe.GetCanonicalCode() != 0 {
			msgs = append(msgs, fmt.Sprintf("update %d: %s: %s", i, codes.Code(pe.GetCanonicalCode()), pe.GetMessage()))
		}
	}
	if len(msgs) == 0 {
		return err
	}
	return &detailErr{err, strings.Join(msgs, "; ")}
}

type detailErr struct {
	err error
	msg string
}

func (e *detailErr) Error() string                  { return e.err.Error() + " [" + e.msg + "]" }
func (e *detailErr) GRPCStatus() *grpcstatus.Status { return grpcstatus.Convert(e.err) }

func (r *rig) read(t testing.TB, es ...*p4v1.Entity) []*p4v1.Entity {
	t.Helper()
	s, err := r.cl.Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1, Entities: es})
	if err != nil {
		t.Fatal(err)
	}
	var out []*p4v1.Entity
	for {
		resp, err := s.Recv()
		if err != nil {
			if grpcstatus.Code(err) != codes.OK && err.Error() != "EOF" {
				t.Fatalf("read: %v", err)
			}
			return out
		}
		out = append(out, resp.GetEntities()...)
	}
}

func upd(typ p4v1.Update_Type, te *p4v1.TableEntry) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}}
}

func ins(te *p4v1.TableEntry) *p4v1.Update { return upd(p4v1.Update_INSERT, te) }

func act(id uint32, params ...[]byte) *p4v1.TableAction {
	a := &p4v1.Action{ActionId: id}
	for i, p := range params {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: uint32(i + 1), Value: p})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
}

func exact(id uint32, v []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}}
}
func lpm(id uint32, v []byte, plen int32) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: plen}}}
}
func ternary(id uint32, v, m []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: v, Mask: m}}}
}
func rng(id uint32, lo, hi []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: lo, High: hi}}}
}

func l2Entry(mac []byte, port byte) *p4v1.TableEntry {
	return &p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, mac)}, Action: act(ActionForward, []byte{port})}
}

func ipv4Entry(addr []byte, plen int32, a *p4v1.TableAction) *p4v1.TableEntry {
	return &p4v1.TableEntry{TableId: TableIPv4, Match: []*p4v1.FieldMatch{lpm(1, addr, plen)}, Action: a}
}

var (
	macA = []byte{2, 0, 0, 0, 0, 1}
	macB = []byte{2, 0, 0, 0, 0, 2}
)

// udpFrame builds an Ethernet/IPv4/UDP frame from macA to macB.
func udpFrame(t testing.TB, src, dst string, sport, dport uint16) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload("hello p4rt")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// code returns an RPC error's code; details returns its per-update codes.
func code(err error) codes.Code { return grpcstatus.Code(err) }

func details(t testing.TB, err error) []codes.Code {
	t.Helper()
	st := grpcstatus.Convert(err)
	var out []codes.Code
	for _, d := range st.Details() {
		pe, ok := d.(*p4v1.Error)
		if !ok {
			t.Fatalf("detail %T, want *p4v1.Error", d)
		}
		out = append(out, codes.Code(pe.GetCanonicalCode()))
	}
	return out
}
