package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCert writes a self-signed certificate for 127.0.0.1 and its key.
func testCert(t *testing.T) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certPath, keyPath, pool
}

// With --tls-cert and --tls-key every route is HTTPS over HTTP/1.1, the
// edge still tracks the connection under TLS (it counts it, and shutdown
// waits for it), and a plain-HTTP request to the TLS port is not served.
func TestServeTLS(t *testing.T) {
	cert, key, pool := testCert(t)
	ts := startServer(t, func(c *Config) { c.TLSCert, c.TLSKey = cert, key })
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get("https://" + ts.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.TLS == nil || res.ProtoMajor != 1 {
		t.Fatalf("GET /healthz over TLS: %d %s, TLS %v", res.StatusCode, res.Proto, res.TLS != nil)
	}
	if n := ts.s.edge.Count(); n != 1 {
		t.Errorf("the edge tracks %d connections, want the TLS one", n)
	}
	res, err = http.Get("http://" + ts.addr + "/healthz")
	if err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS port")
		}
	}
}

// One flag without the other, or a pair that does not load, fails the
// start.
func TestTLSFlagsChecked(t *testing.T) {
	cert, key, _ := testCert(t)
	other, _, _ := testCert(t)
	for _, c := range []struct{ cert, key, want string }{
		{cert, "", "go together"},
		{"", key, "go together"},
		{other, key, "--tls-cert/--tls-key"},
		{filepath.Join(t.TempDir(), "none.pem"), key, "--tls-cert/--tls-key"},
	} {
		cfg := Config{TLSCert: c.cert, TLSKey: c.key}
		if _, err := cfg.tlsConfig(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cert %q key %q: %v, want an error saying %s", c.cert, c.key, err, c.want)
		}
	}
}
