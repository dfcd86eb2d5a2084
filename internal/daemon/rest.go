package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
)

// minTokenLength bounds the bearer token from below: 16 characters of
// base64 are 96 bits.
const minTokenLength = 16

// rest is the REST API's server for a whole run: it answers its health at
// once and serves the API once the daemon is ready (api.Gate).
type rest struct {
	gate   *api.Gate
	srv    *http.Server
	token  string     // "" for none
	served chan error // what Serve returned
	// shutdown stops serving, waiting shutdownTimeout at most for the
	// requests in flight.
	shutdown func() error
}

// serveREST listens on api.listen, with TLS when configured, and serves
// the gate. A busy port, or a token or certificate that cannot be read,
// stops the start before the data path is touched.
func serveREST(cfg config.API, log *slog.Logger) (*rest, error) {
	token, err := readToken(cfg.TokenFile, log)
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("api.tls: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("api.listen: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	r := &rest{gate: api.NewGate(), token: token, served: make(chan error, 1)}
	r.srv = &http.Server{Handler: r.gate, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)} // TLS handshakes that fail, say
	go func() { r.served <- r.srv.Serve(ln) }()
	var once sync.Once
	r.shutdown = func() (err error) { // nil after the first call
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			err = r.srv.Shutdown(ctx)
			// Serve may not hold the listener yet, and would then close it
			// only after Run returned: a start right after a failed one
			// found the port busy.
			_ = ln.Close() // closed already when Serve held it
		})
		return err
	}
	log.Info("serving the REST API", "listen", ln.Addr().String(), "tls", tlsConfig != nil, "token", token != "")
	return r, nil
}

// ready serves the API of the services from now on, behind the token if
// there is one.
func (r *rest) ready(sv api.Services) {
	h := api.NewHandler(sv)
	if r.token != "" {
		h = api.RequireToken(r.token, h, sv.Log)
	}
	r.gate.Ready(h)
}

// readToken reads the bearer token of api.token_file: its one line, of
// minTokenLength characters at least. "" for no file.
func readToken(path string, log *slog.Logger) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("api.token_file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	switch {
	case strings.ContainsAny(token, " \t\r\n"):
		return "", fmt.Errorf("api.token_file: %s holds more than one word; a token is one line without spaces", path)
	case len(token) < minTokenLength:
		return "", fmt.Errorf("api.token_file: %s holds %d characters; a token has %d at least, such as the output of `head -c 32 /dev/urandom | base64`",
			path, len(token), minTokenLength)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("api.token_file can be read by other users than its owner", "file", path, "mode", fi.Mode().Perm())
	}
	return token, nil
}
