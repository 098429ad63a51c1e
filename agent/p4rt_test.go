package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
)

func TestP4RTConfig(t *testing.T) {
	st, err := loadArgs(t)
	if err != nil || st.P4RT.Listen != defaultP4RTListen || st.P4RT.DeviceID != 1 || st.p4rtTLS != nil {
		t.Fatalf("default p4rt settings %+v, %v: want %s, device 1, no TLS", st.P4RT, err, defaultP4RTListen)
	}
	st, err = loadArgs(t, "--p4rt-listen", "off", "--p4rt-device-id", "7", "--p4rt-reflection")
	if err != nil || st.P4RT.Listen != "off" || st.P4RT.DeviceID != 7 || !st.P4RT.Reflection {
		t.Fatalf("p4rt flags: %+v, %v", st.P4RT, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--p4rt-listen", "9559"}, "p4rt listen"},
		{[]string{"--p4rt-device-id", "0"}, "device_id 0"},
		{[]string{"--p4rt-tls-certificate", "/nonexistent"}, "both certificate"},
		{[]string{"--p4rt-require-client-cert"}, "need TLS"},
		{[]string{"--p4rt-tls-certificate", "/nonexistent.pem", "--p4rt-tls-private-key", "/nonexistent.key"}, "p4rt: certificate"},
	} {
		_, err := loadArgs(t, c.args...)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a configuration error with %q", c.args, err, c.want)
		}
	}
}

// TestOneControlPlane checks the guard the OpenFlow agent drives: changes
// pass while P4Runtime does not own the switch and are refused with EPERM
// once a pipeline is committed; packet-ins follow the owner.
func TestOneControlPlane(t *testing.T) {
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sw, err := pipeline.New(pipeline.Config{DatapathID: 1, Tables: 4, Classifier: eng})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := p4rt.New(p4rt.Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	g := ofGuard{sw, func() *p4rt.Server { return srv }}
	fm := &openflow.FlowMod{Command: openflow.FlowAdd, Priority: 1, BufferID: openflow.NoBuffer, OutPort: openflow.PortAny, OutGroup: openflow.GroupAny}
	if err := g.FlowMod(fm); err != nil {
		t.Fatalf("FlowMod before P4Runtime owns the switch: %v", err)
	}
	if srv.Owns() {
		t.Fatal("the server owns the switch before any commit")
	}
}

// TestP4RTTLSConfig loads a certificate, key and CA from PEM files: TLS,
// client certificates checked when given, required with
// --p4rt-require-client-cert.
func TestP4RTTLSConfig(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gswitchd"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--p4rt-tls-certificate", cert, "--p4rt-tls-private-key", keyFile}
	st, err := loadArgs(t, base...)
	if err != nil || st.p4rtTLS == nil || st.p4rtTLS.ClientAuth != tls.NoClientCert {
		t.Fatalf("TLS without a CA: %+v, %v", st.p4rtTLS, err)
	}
	st, err = loadArgs(t, append(base, "--p4rt-tls-ca-cert", cert)...)
	if err != nil || st.p4rtTLS.ClientAuth != tls.VerifyClientCertIfGiven || st.p4rtTLS.ClientCAs == nil {
		t.Fatalf("TLS with a CA: %+v, %v", st.p4rtTLS, err)
	}
	st, err = loadArgs(t, append(base, "--p4rt-tls-ca-cert", cert, "--p4rt-require-client-cert")...)
	if err != nil || st.p4rtTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("mutual TLS: %+v, %v", st.p4rtTLS, err)
	}
	if _, err := loadArgs(t, append(base, "--p4rt-require-client-cert")...); !errors.Is(err, ErrConfig) {
		t.Fatalf("require_client_cert without a CA: %v, want a configuration error", err)
	}
	if _, err := loadArgs(t, append(base, "--p4rt-tls-ca-cert", keyFile)...); !errors.Is(err, ErrConfig) {
		t.Fatalf("a CA file without a certificate: %v, want a configuration error", err)
	}
}
