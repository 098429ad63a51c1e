package openflow

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	of "github.com/netrack/openflow"
)

// testPKI is a CA made in the test and certificates it signed.
type testPKI struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	pool   *x509.CertPool
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gswitch test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: x509.NewCertPool(), serial: 1}
	p.pool.AddCert(ca)
	return p
}

// issue returns a certificate for 127.0.0.1, for servers and clients,
// with its PEM forms.
func (p *testPKI) issue(t *testing.T, cn string) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c, certPEM, keyPEM
}

// helloAndFeatures does the controller's side of a handshake on c and
// checks the FEATURES_REPLY.
func helloAndFeatures(t *testing.T, c net.Conn) {
	t.Helper()
	ct := &ctl{t: t, c: c}
	if h, _ := ParseHeader(ct.recv()); h.Type != of.TypeHello {
		t.Fatalf("first message is %s, want a hello", h.Type)
	}
	ct.send(EncodeHello(1))
	ct.send(msg(of.TypeFeaturesRequest, 2, ""))
	if r := ct.expect(of.TypeFeaturesReply, 2); be64(r[8:]) != 1 {
		t.Fatalf("features reply %x", r)
	}
}

// TestTLSPassive serves a pssl: listener that requires controllers'
// certificates signed by the test CA.
func TestTLSPassive(t *testing.T) {
	pki := newTestPKI(t)
	srv, _, _ := pki.issue(t, "switch")
	cli, _, _ := pki.issue(t, "controller")
	a := NewAgent(newTableSwitch(1, 4), Options{Logf: t.Logf, HelloTimeout: 2 * time.Second, TLSServer: &tls.Config{
		Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool,
	}})
	tg, err := ParseTarget("pssl:0:127.0.0.1")
	if err != nil || !tg.TLS || !tg.Passive {
		t.Fatalf("%+v %v", tg, err)
	}
	l, err := a.listen(tg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.ServeListener(ctx, l) }()
	defer func() { cancel(); <-done }()

	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{cli}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	helloAndFeatures(t, c)

	// Without a client certificate the handshake fails: no HELLO comes.
	bad, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pki.pool})
	if err == nil {
		defer bad.Close()
		bad.SetReadDeadline(time.Now().Add(3 * time.Second))
		if m, err := ReadMessage(bad); err == nil {
			t.Fatalf("a controller without a certificate got %x", m)
		}
	}
	// A plain TCP client gets no OpenFlow either.
	plain, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Write(EncodeHello(1))
	plain.SetReadDeadline(time.Now().Add(3 * time.Second))
	if m, err := ReadMessage(plain); err == nil && m[0] == Version && m[1] == byte(of.TypeHello) {
		t.Fatalf("a plain TCP client got a HELLO")
	}
}

// TestTLSActive connects to a controller over ssl: with mutual
// authentication.
func TestTLSActive(t *testing.T) {
	pki := newTestPKI(t)
	srv, _, _ := pki.issue(t, "controller")
	cli, _, _ := pki.issue(t, "switch")
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := NewAgent(newTableSwitch(1, 4), Options{Logf: t.Logf, MinBackoff: 10 * time.Millisecond,
		TLSClient: &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{cli}}})
	if err := NewAgent(newTableSwitch(1, 4), Options{}).ConnectTarget(context.Background(), "ssl:127.0.0.1:1"); err == nil {
		t.Fatal("an ssl: target without Options.TLSClient was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ConnectTarget(ctx, "ssl:"+l.Addr().String()) }()
	defer func() { cancel(); <-done }()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	helloAndFeatures(t, c)
	if cs := c.(*tls.Conn).ConnectionState(); len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != "switch" {
		t.Fatalf("peer certificates %v", cs.PeerCertificates)
	}
}

// TestTLSOvsOfctl runs ovs-ofctl over ssl: against a pssl: listener.
func TestTLSOvsOfctl(t *testing.T) {
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Fatalf("ovs-ofctl not found (%v): install the Debian package openvswitch-common", err)
	}
	pki := newTestPKI(t)
	srv, _, _ := pki.issue(t, "switch")
	_, certPEM, keyPEM := pki.issue(t, "controller")
	dir := t.TempDir()
	files := map[string][]byte{"ca.pem": pki.caPEM, "cert.pem": certPEM, "key.pem": keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := NewAgent(newTableSwitch(2, 4), Options{Logf: t.Logf, TLSServer: &tls.Config{
		Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool,
	}})
	l, err := a.listen(Target{Passive: true, TLS: true, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.ServeListener(ctx, l) }()
	defer func() { cancel(); <-done }()
	out, err := ovsOfctl(t, "--private-key="+filepath.Join(dir, "key.pem"), "--certificate="+filepath.Join(dir, "cert.pem"),
		"--ca-cert="+filepath.Join(dir, "ca.pem"), "show", "ssl:"+l.Addr().String())
	if err != nil || !strings.Contains(out, "OFPT_FEATURES_REPLY (OF1.3)") {
		t.Fatalf("ovs-ofctl show over ssl: %v\n%s", err, out)
	}
}
