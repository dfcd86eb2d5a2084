package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
)

// selfSigned writes a certificate for 127.0.0.1, signed by itself, and its
// key into dir, and returns their files and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xdp5g test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600))
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

const testToken = "xdp5g-test-token-0123456789"

// writeToken writes token into a file of dir and returns its path.
func writeToken(t *testing.T, dir, token string) string {
	t.Helper()
	path := filepath.Join(dir, "token")
	must(t, os.WriteFile(path, []byte(token+"\n"), 0o600))
	return path
}

// With a token and TLS the REST API speaks HTTPS, and serves only the
// requests that carry the token, reads and writes alike: the others get
// 401 and change nothing. Its health needs no token.
func TestRESTTokenAndTLS(t *testing.T) {
	e := newEnv(t)
	certFile, keyFile, roots := selfSigned(t, e.dir)
	e.api = []string{"token_file: " + writeToken(t, e.dir, testToken), fmt.Sprintf("tls: {cert_file: %s, key_file: %s}", certFile, keyFile)}
	cfg := e.config(t)
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	client := &api.Client{URL: "https://" + cfg.API.Listen, HTTP: https, Token: testToken}
	stop := runDaemonWith(t, cfg, client)
	defer func() { must(t, stop()) }()
	ctx := context.Background()

	anonymous := &api.Client{URL: client.URL, HTTP: https}
	must(t, anonymous.Ready(ctx))
	for _, c := range []struct {
		name   string
		client *api.Client
	}{{"without a token", anonymous}, {"with another token", &api.Client{URL: client.URL, HTTP: https, Token: strings.ToUpper(testToken)}}} {
		for what, call := range map[string]func() error{
			"create": func() error { _, err := c.client.Create(ctx, []byte(doc)); return err },
			"list":   func() error { _, err := c.client.Sessions(ctx); return err },
		} {
			var refused *api.Error
			if err := call(); !errors.As(err, &refused) || refused.Status != http.StatusUnauthorized || refused.Field != "Authorization" {
				t.Errorf("%s %s: %v, want 401 naming Authorization", what, c.name, err)
			}
		}
	}
	list := func() []json.RawMessage {
		body, err := client.Sessions(ctx)
		must(t, err)
		var l struct{ Sessions []json.RawMessage }
		must(t, json.Unmarshal(body, &l))
		return l.Sessions
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("sessions after the refused requests: %s", l)
	}
	_, err := client.Create(ctx, []byte(doc))
	must(t, err)
	if l := list(); len(l) != 1 {
		t.Errorf("sessions after the create with the token: %s", l)
	}
	plain := &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 5 * time.Second}, Token: testToken}
	if _, err := plain.Sessions(ctx); err == nil {
		t.Error("plain HTTP was served")
	}
}

// A token or a certificate that cannot serve stops the start, with the
// setting at fault, before the data path is touched.
func TestRESTSettingsStopTheStart(t *testing.T) {
	for _, c := range []struct {
		name  string
		api   func(e *env) []string
		field string
	}{
		{name: "missing token file", field: "api.token_file",
			api: func(e *env) []string { return []string{"token_file: " + filepath.Join(e.dir, "none")} }},
		{name: "short token", field: "api.token_file",
			api: func(e *env) []string { return []string{"token_file: " + writeToken(t, e.dir, "short")} }},
		{name: "token of two words", field: "api.token_file",
			api: func(e *env) []string { return []string{"token_file: " + writeToken(t, e.dir, testToken+" "+testToken)} }},
		{name: "key of another certificate", field: "api.tls",
			api: func(e *env) []string {
				certFile, _, _ := selfSigned(t, e.dir)
				other := t.TempDir()
				_, keyFile, _ := selfSigned(t, other)
				return []string{fmt.Sprintf("tls: {cert_file: %s, key_file: %s}", certFile, keyFile)}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.api = c.api(e)
			err := Run(context.Background(), e.config(t), slog.New(slog.DiscardHandler))
			if err == nil || !strings.HasPrefix(err.Error(), c.field+": ") {
				t.Fatalf("Run = %v, want an error naming %s", err, c.field)
			}
			if _, err := os.Stat(e.pin); !os.IsNotExist(err) {
				t.Errorf("Run opened the data path before failing: %v", err)
			}
		})
	}
}
