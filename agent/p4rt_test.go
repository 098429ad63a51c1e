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
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rule"
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
	fm := &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny}
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

// TestP4RTExplicitDefaultListenInUse holds the default P4Runtime address
// (or finds it held) and starts an agent on it: given with --p4rt-listen
// (or a file's p4rt listen), even equal to the default, the start fails
// naming the address; left to the default, the agent runs without
// P4Runtime.
func TestP4RTExplicitDefaultListenInUse(t *testing.T) {
	if l, err := net.Listen("tcp", defaultP4RTListen); err == nil {
		defer l.Close()
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("cannot hold %s: %v", defaultP4RTListen, err)
	}
	dir := t.TempDir()
	base := []string{"--backend", "cpu", "--ctl-socket", filepath.Join(dir, "s.sock"), "--metrics", ""}
	yamlFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(yamlFile, []byte("p4rt:\n  listen: "+defaultP4RTListen+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--p4rt-listen", defaultP4RTListen}, {"--config", yamlFile}} {
		st, err := loadArgs(t, append(slices.Clone(base), args...)...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := start(st, quietLog(), nil)
		if err == nil {
			a.Close()
			t.Fatalf("%v with %s in use: the agent started, want an error", args, defaultP4RTListen)
		}
		if !strings.Contains(err.Error(), "p4rt listen") {
			t.Errorf("%v: error %v, want it to name p4rt listen", args, err)
		}
	}
	st, err := loadArgs(t, base...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(st, quietLog(), nil)
	if err != nil {
		t.Fatalf("the default address in use, not given: %v, want a start without P4Runtime", err)
	}
	defer a.Close()
	if a.P4RT() != nil {
		t.Fatal("P4Runtime server running on an address in use")
	}
}

// TestP4RTConnectionFlags reads the connection limits from flags and
// refuses negative ones.
func TestP4RTConnectionFlags(t *testing.T) {
	st, err := loadArgs(t)
	if err != nil || st.P4RT.ConnectionTimeout != 10*time.Second || st.P4RT.KeepaliveTime != time.Minute || st.P4RT.KeepaliveTimeout != 20*time.Second {
		t.Fatalf("defaults %+v, %v: want 10s, 1m, 20s", st.P4RT, err)
	}
	st, err = loadArgs(t, "--p4rt-connection-timeout", "2s", "--p4rt-keepalive-time", "30s", "--p4rt-keepalive-timeout", "5s")
	if err != nil || st.P4RT.ConnectionTimeout != 2*time.Second || st.P4RT.KeepaliveTime != 30*time.Second || st.P4RT.KeepaliveTimeout != 5*time.Second {
		t.Fatalf("flags %+v, %v", st.P4RT, err)
	}
	if _, err := loadArgs(t, "--p4rt-keepalive-time", "-1s"); err == nil || !strings.Contains(err.Error(), "keepalive_time") {
		t.Fatalf("negative keepalive: %v", err)
	}
}

// TestP4RTPlaintextBeyondLoopbackWarns: plaintext P4Runtime on every
// address is logged as a warning; on loopback it is not.
func TestP4RTPlaintextBeyondLoopbackWarns(t *testing.T) {
	for _, c := range []struct {
		listen string
		warn   bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		dir := t.TempDir()
		st, err := loadArgs(t, "--backend", "cpu", "--ctl-socket", filepath.Join(dir, "s.sock"), "--metrics", "", "--p4rt-listen", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		a, err := start(st, slog.New(slog.NewTextHandler(&buf, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		if got := strings.Contains(buf.String(), "plaintext P4Runtime reachable beyond loopback"); got != c.warn {
			t.Errorf("listen %s: warning %v, want %v\n%s", c.listen, got, c.warn, buf.String())
		}
	}
}
