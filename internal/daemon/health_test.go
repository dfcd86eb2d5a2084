package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The REST API answers its health from the moment it accepts connections:
// /healthz with 200, /readyz with 503 and what the daemon is doing. /readyz
// answers 200 only once PFCP is bound, so that PFCP requests sent right then
// are answered (the SMF sends each once).
func TestReadyMeansServing(t *testing.T) {
	e := newEnv(t)
	listen := testsupport.FreeAddr(t, "udp")
	e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h}", listen)
	cfg := e.config(t)
	smf, err := pfcptest.NewSMF("smf.xdp5g.test", netip.MustParseAddrPort(listen))
	must(t, err)
	defer smf.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(t.Output(), nil))) }()
	defer func() {
		cancel()
		must(t, <-done)
	}()
	client := &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 2 * time.Second}}
	var reasons []string // what /readyz said, each once
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		err := client.Ready(ctx)
		if err == nil {
			break
		}
		var notReady *api.Error
		if errors.As(err, &notReady) {
			if notReady.Status != http.StatusServiceUnavailable {
				t.Fatalf("/readyz: %v", err)
			}
			if len(reasons) == 0 {
				resp, err := client.HTTP.Get(client.URL + "/healthz")
				must(t, err)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("/healthz while starting: %s", resp.Status)
				}
			}
			if !slices.Contains(reasons, notReady.Msg) {
				reasons = append(reasons, notReady.Msg)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not get ready")
		}
	}
	if _, err := smf.Heartbeat(); err != nil {
		t.Errorf("a heartbeat as soon as the daemon is ready: %v", err)
	}
	if _, err := smf.Associate(); err != nil {
		t.Errorf("an association setup as soon as the daemon is ready: %v", err)
	}
	if len(reasons) == 0 || !strings.HasPrefix(reasons[0], "starting") {
		t.Errorf("/readyz said %q before 200; want 503 with what the daemon does first", reasons)
	}
	t.Logf("/readyz said %q, then 200", reasons)
}
