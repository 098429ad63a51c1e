package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pemFiles writes a test CA and certificates it signed for cns, as PEM
// files in dir: ca.pem and <cn>-cert.pem, <cn>-key.pem.
func pemFiles(t *testing.T, dir string, cns ...string) {
	t.Helper()
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gswitch integration CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for i, cn := range cns {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(cn+"-cert.pem", "CERTIFICATE", der)
		write(cn+"-key.pem", "PRIVATE KEY", kder)
	}
}

// TestTLSListenerWithOvsOfctl: gswitchd with a ptls: listener and its
// certificate files; ovs-ofctl connects over ssl: with a certificate the
// same CA signed, adds a flow and dumps it; a client without a
// certificate is refused.
func TestTLSListenerWithOvsOfctl(t *testing.T) {
	tp := newTopo(t, 2)
	dir := t.TempDir()
	pemFiles(t, dir, "switch", "ofctl")
	port := 16000 + mrand.IntN(20000)
	d := startGswitchd(t, tp, "--listen", fmt.Sprintf("ptls:%d", port),
		"--tls-private-key", filepath.Join(dir, "switch-key.pem"),
		"--tls-certificate", filepath.Join(dir, "switch-cert.pem"),
		"--tls-ca-cert", filepath.Join(dir, "ca.pem"))
	d.ofPort = port
	d.ofSSL = []string{"--private-key=" + filepath.Join(dir, "ofctl-key.pem"),
		"--certificate=" + filepath.Join(dir, "ofctl-cert.pem"), "--ca-cert=" + filepath.Join(dir, "ca.pem")}
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err = d.ofctl(t, "show"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("ovs-ofctl over ssl: cannot reach gswitchd's ptls: listener: %v", err)
	}
	d.mustOfctl(t, "add-flow", "in_port=1,actions=output:2")
	d.mustOfctl(t, "add-flow", "in_port=2,actions=output:1")
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Fatal(err)
	}
	if dump := d.mustOfctl(t, "dump-flows"); strings.Count(dump, "n_packets=") != 2 {
		t.Fatalf("dump-flows over ssl: want the 2 flows added:\n%s", dump)
	}

	// A client whose certificate another CA signed is refused (it
	// trusts gswitchd's CA, so only the server's check can fail it).
	other := t.TempDir()
	pemFiles(t, other, "stranger")
	d.ofSSL = []string{"--private-key=" + filepath.Join(other, "stranger-key.pem"),
		"--certificate=" + filepath.Join(other, "stranger-cert.pem"), "--ca-cert=" + filepath.Join(dir, "ca.pem")}
	if out, err := d.ofctl(t, "dump-flows"); err == nil {
		t.Fatalf("ovs-ofctl with a certificate of another CA was served:\n%s", out)
	}
}
