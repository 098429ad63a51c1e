package p4rt

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"
)

// TestArbitration runs three clients through primary changes (§5).
func TestArbitration(t *testing.T) {
	r := newRig(t, 1, 0)
	a := r.open(t)
	a.arbitrate(0, 5)
	if c := a.arbCode(); c != codes.OK {
		t.Fatalf("first client: %s, want OK (primary)", c)
	}
	b := r.open(t)
	b.arbitrate(0, 3)
	if m := b.next("arbitration").GetArbitration(); codes.Code(m.GetStatus().GetCode()) != codes.AlreadyExists || m.GetElectionId().GetLow() != 5 {
		t.Fatalf("lower id: %v, want ALREADY_EXISTS with the primary's id 5", m)
	}
	// b may read but not write.
	_, err := r.cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 3}})
	if code(err) != codes.PermissionDenied {
		t.Fatalf("write from a backup: %v, want PERMISSION_DENIED", err)
	}
	if _, err := r.cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1}); code(err) != codes.PermissionDenied {
		t.Fatalf("write without an election id: %v, want PERMISSION_DENIED", err)
	}
	if _, err := r.cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 2, ElectionId: &p4v1.Uint128{Low: 5}}); code(err) != codes.NotFound {
		t.Fatalf("write to device 2: %v, want NOT_FOUND", err)
	}
	// A third client with a higher id takes over: everyone is told.
	c := r.open(t)
	c.arbitrate(1, 0)
	if code := c.arbCode(); code != codes.OK {
		t.Fatalf("higher id: %s, want OK", code)
	}
	for name, s := range map[string]*streamClient{"old primary": a, "backup": b} {
		if m := s.next("arbitration").GetArbitration(); codes.Code(m.GetStatus().GetCode()) != codes.AlreadyExists || m.GetElectionId().GetHigh() != 1 {
			t.Errorf("%s after the change: %v, want ALREADY_EXISTS with id 1:0", name, m)
		}
	}
	if _, err := r.cl.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 5}}); code(err) != codes.PermissionDenied {
		t.Fatalf("write from the old primary: %v, want PERMISSION_DENIED", err)
	}
	// An election id in use ends the stream with INVALID_ARGUMENT.
	d := r.open(t)
	d.arbitrate(0, 3)
	select {
	case err := <-d.end:
		if grpcstatus.Code(err) != codes.InvalidArgument {
			t.Fatalf("duplicate election id: stream ended with %v, want INVALID_ARGUMENT", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("duplicate election id: the stream stayed open")
	}
	// A wrong device id ends the stream with NOT_FOUND.
	e := r.open(t)
	if err := e.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 9, ElectionId: &p4v1.Uint128{Low: 99}}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-e.end; grpcstatus.Code(err) != codes.NotFound {
		t.Fatalf("device 9: stream ended with %v, want NOT_FOUND", err)
	}
	// The primary leaves: the others hear there is no primary.
	c.cancel()
	for name, s := range map[string]*streamClient{"a": a, "b": b} {
		if code := s.arbCode(); code != codes.NotFound {
			t.Errorf("%s after the primary left: %s, want NOT_FOUND", name, code)
		}
	}
	// a comes back with an id at least the highest seen.
	a.arbitrate(1, 0)
	if code := a.arbCode(); code != codes.OK {
		t.Fatalf("re-election with 1:0: %s, want OK", code)
	}
	if code := b.arbCode(); code != codes.AlreadyExists {
		t.Fatalf("backup after the re-election: %s, want ALREADY_EXISTS", code)
	}
	if n := r.srv.Connections(); n != 2 {
		t.Errorf("Connections %d, want 2", n)
	}
}

func TestPacketOut(t *testing.T) {
	r, c := ready(t, 3)
	f := udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2)
	send := func(s *streamClient, md ...*p4v1.PacketMetadata) {
		t.Helper()
		if err := s.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: f, Metadata: md}}}); err != nil {
			t.Fatal(err)
		}
	}
	send(c, &p4v1.PacketMetadata{MetadataId: 1, Value: []byte{0, 0, 0, 3}})
	deadline := time.Now().Add(5 * time.Second)
	var got [][]byte
	for len(got) == 0 && time.Now().Before(deadline) {
		got = r.devs[2].take()
		time.Sleep(time.Millisecond)
	}
	if len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("packet-out to port 3: port 3 got %d frames", len(got))
	}
	for _, bad := range [][]*p4v1.PacketMetadata{
		nil,
		{{MetadataId: 2, Value: []byte{1}}},
		{{MetadataId: 1, Value: []byte{9}}},
		{{MetadataId: 1, Value: []byte{1, 0, 0, 0, 0}}},
		{{MetadataId: 1, Value: []byte{1}}, {MetadataId: 1, Value: []byte{2}}},
	} {
		send(c, bad...)
		e := c.next("error").GetError()
		want := codes.InvalidArgument
		if len(bad) == 1 && len(bad[0].GetValue()) == 5 {
			want = codes.OutOfRange
		}
		if codes.Code(e.GetCanonicalCode()) != want || e.GetPacketOut() == nil {
			t.Errorf("packet-out with metadata %v: %v, want %s with the packet", bad, e, want)
		}
	}
	b := r.open(t)
	b.arbitrate(0, 0) // id 0:0 is below the primary's: a backup
	b.arbCode()
	send(b, &p4v1.PacketMetadata{MetadataId: 1, Value: []byte{2}})
	if e := b.next("error").GetError(); codes.Code(e.GetCanonicalCode()) != codes.PermissionDenied {
		t.Fatalf("packet-out from a backup: %v, want PERMISSION_DENIED", e)
	}
	if n := len(r.devs[1].take()); n != 0 {
		t.Fatalf("a backup's packet-out went out (%d frames)", n)
	}
}

// TestMutualTLS serves over TLS with client certificates required: a
// client with a certificate from the CA gets through; one without, or
// with one from another CA, does not.
func TestMutualTLS(t *testing.T) {
	ca, caKey := newCert(t, "ca", nil, nil)
	srvCert := leaf(t, "127.0.0.1", ca, caKey)
	cliCert := leaf(t, "client", ca, caKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	r := newRig(t, 1, 0)
	r.conn.Close()
	r.stop() // the plain server reads cfg while it starts
	r.srv.cfg.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	r.serve(t, []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cliCert}, ServerName: "127.0.0.1"}))})
	if _, err := r.cl.Capabilities(context.Background(), &p4v1.CapabilitiesRequest{}); err != nil {
		t.Fatalf("mTLS client: %v", err)
	}
	conn, err := grpc.Dial(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p4v1.NewP4RuntimeClient(conn).Capabilities(ctx, &p4v1.CapabilitiesRequest{}); err == nil {
		t.Fatal("a client without a certificate got through")
	}
	// A certificate from another CA is refused too.
	other, otherKey := newCert(t, "other-ca", nil, nil)
	stranger := leaf(t, "stranger", other, otherKey)
	conn2, err := grpc.Dial(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{stranger}, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := p4v1.NewP4RuntimeClient(conn2).Capabilities(ctx, &p4v1.CapabilitiesRequest{}); err == nil {
		t.Fatal("a client with a certificate of another CA got through")
	}
}

func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func leaf(t *testing.T, cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	c, k := newCert(t, cn, ca, caKey)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k}
}
