package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/testsupport/daemontest"
)

// The daemon restarts every restartEvery while the traffic flows.
const (
	restarts     = 3
	restartEvery = 500 * time.Millisecond
)

// sessionDocument is the demo's IPv4 session as the REST API takes it.
var sessionDocument = fmt.Sprintf(`{"seid": %d,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": %d, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": %q, "qfi": %d}},
          {"pdrId": 2, "farId": 2, "pdi": {"sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": %[3]q, "qfi": %[4]d}}],
 "fars": [{"farId": 1, "applyAction": "FORW", "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "applyAction": "FORW", "destinationInterface": "INTERFACE_VALUE_ACCESS",
           "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4",
                                                            "ipv4Address": %q, "teid": %d}}}]}`,
	demo.SEID, demo.UplinkTEID, demo.UEAddr, demo.QFI, demo.GNBAddr, demo.DownlinkTEID)

// The daemon keeps forwarding through restarts: the XDP programs stay
// attached through their pinned links and each run replaces them
// atomically, so traffic in both directions loses no packet.
func TestDaemonRestartLosesNothing(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := daemonConfig(t, tb, "")
	client, stop := startDaemon(t, cfg)
	if _, err := client.Create(t.Context(), []byte(sessionDocument)); err != nil {
		t.Fatal(err)
	}

	traffic := startFlows(t, tb)
	for i := range restarts {
		time.Sleep(restartEvery)
		began := time.Now()
		if err := stop(); err != nil {
			t.Errorf("run %d: %v", i+1, err)
		}
		client, stop = startDaemon(t, cfg)
		t.Logf("restart %d took %v", i+1, time.Since(began))
	}
	traffic.lossless(t, fmt.Sprintf("through %d restarts", restarts))
	stats, err := client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	stats.WriteTable(&table)
	t.Logf("data path counters:\n%s", &table)
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// flows are the REST session's packets (sessionDocument) sent both ways at
// rate, from the moment startFlows starts them until lossless.
type flows struct {
	dirs     []demo.Direction
	before   []uint64 // what each direction's sink had matched before
	stop     chan struct{}
	outcomes []chan flowOutcome
}

type flowOutcome struct {
	sent uint64
	err  error
}

func startFlows(t *testing.T, tb *demo.Testbed) *flows {
	t.Helper()
	f := &flows{stop: make(chan struct{})}
	for _, uplink := range []bool{true, false} {
		dir, frame := flow(tb, uplink, demo.UEPacket(demo.UEAddr, demo.DNAddr, uplink, demo.UETTL))
		before, err := dir.Sink.Counts()
		if err != nil {
			t.Fatal(err)
		}
		gen := newGenerator(t)
		done := make(chan flowOutcome, 1)
		go func() {
			sent, _, err := sendUntil(gen, dir, frame, rate, trafficgen.Options{}, f.stop)
			done <- flowOutcome{sent: sent, err: err}
		}()
		f.dirs, f.outcomes = append(f.dirs, dir), append(f.outcomes, done)
		f.before = append(f.before, before.MatchPackets)
	}
	return f
}

// sendUntil sends frame the way dir goes at rate with opts, a second's
// worth at a time, until stop is closed and for a second after; it
// returns how many frames it sent, and how many it was to send.
func sendUntil(gen *trafficgen.Generator, dir demo.Direction, frame []byte, rate uint64, opts trafficgen.Options,
	stop <-chan struct{}) (sent, asked uint64, err error) {
	opts.Rate = rate
	for last := false; !last; {
		select {
		case <-stop:
			last = true
		default:
		}
		n, _, err := dir.Send(gen, frame, rate, opts)
		sent, asked = sent+n, asked+rate
		if err != nil {
			return sent, asked, err
		}
	}
	return sent, asked, nil
}

// lossless stops the flows and fails the test for each packet lost, or
// delivered more than sent, during what happened.
func (f *flows) lossless(t *testing.T, during string) {
	t.Helper()
	close(f.stop)
	for i, dir := range f.dirs {
		o := <-f.outcomes[i]
		if o.err != nil {
			t.Fatal(o.err)
		}
		delivered, err := dir.Delivered(f.before[i] + o.sent)
		if err != nil {
			t.Fatal(err)
		}
		delivered -= f.before[i]
		lost := int64(o.sent) - int64(delivered)
		t.Logf("%s %s: sent %d, delivered %d, lost %d", dir.Name, during, o.sent, delivered, lost)
		switch {
		case lost > 0:
			t.Errorf("%s lost %d of %d packets %s", dir.Name, lost, o.sent, during)
		case lost < 0:
			t.Errorf("%s delivered %d packets more than the generator reported sending %s", dir.Name, -lost, during)
		}
	}
}

// restartPool is the UE pool of the restart tests, apart from the UE
// address of sessionDocument.
var restartPool = netip.MustParsePrefix("10.46.0.0/24")

// A restarted daemon keeps the SMFs' sessions, as the REST API's: it takes
// its PFCP state up, so the SMF sees the same Recovery Time Stamp, its
// association and session are there, forwarding, and it changes and
// deletes the session as if nothing had happened.
func TestRestartKeepsPFCPSessions(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, restartPool)
	_, stop := startDaemon(t, cfg)
	r := sessionThenStop(t, tb, cfg, stop)
	smf, sess, up, down := r.smf, r.sess, r.up, r.down
	client, stop := startDaemon(t, cfg)
	if _, err := client.Session(t.Context(), sess.SEID); err != nil {
		t.Errorf("the SMF's session after the restart: %v", err)
	}
	delivered(t, tb, "the SMF's session after the restart", up, down)
	if after := recoveryTime(t, smf); !after.Equal(r.recovery) {
		t.Errorf("Recovery Time Stamp %v after the restart, %v before; want the same", after, r.recovery)
	}
	resp, err := smf.Modify(pfcptest.HandoverRequest(sess.SEID, demo.GNBAddr, demo.DownlinkTEID+1))
	if err == nil {
		err = pfcptest.Accepted("moving the kept session's downlink", resp.Cause)
	}
	if err != nil {
		t.Error(err)
	}
	if err := smf.Delete(sess.SEID); err != nil {
		t.Error(err)
	}
	notForwarded(t, tb, client, "of the deleted session", up, down)
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// A PFCP state that was cut short is not used: the daemon says why, drops
// the SMFs' sessions (keeping the REST API's), which frees their TEIDs and
// UE addresses, and shows the SMFs a later Recovery Time Stamp, upon which
// they establish them again.
func TestRestartWithADamagedPFCPStateDropsPFCPSessions(t *testing.T) {
	tb, cfg, r := bothSessionsThenStop(t)
	smf, sess, pfcpUp, pfcpDown, before := r.smf, r.sess, r.up, r.down, r.recovery
	journals, err := filepath.Glob(filepath.Join(cfg.PFCP.StateDir, "journal-*.log"))
	if err != nil || len(journals) == 0 {
		t.Fatalf("no journal in %s: %v", cfg.PFCP.StateDir, err)
	}
	st, err := os.Stat(journals[len(journals)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(journals[len(journals)-1], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	client, stop := startDaemonLogging(t, cfg, &log)
	if line := log.line("PFCP state not restored"); !strings.Contains(line, "was written") {
		t.Errorf("the log says %q; want why the PFCP state was not restored", line)
	}
	var apiErr *api.Error
	if _, err := client.Session(t.Context(), sess.SEID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("the SMF's session after the restart: %v; want 404", err)
	}
	notForwarded(t, tb, client, "of the SMF's session after the restart", pfcpUp, pfcpDown)
	restUp, restDown := sessionFrames(tb, demo.UplinkTEID, demo.UEAddr)
	delivered(t, tb, "the REST session after the restart", restUp, restDown)
	if after := recoveryTime(t, smf); !after.After(before) {
		t.Errorf("Recovery Time Stamp %v after the restart, %v before; want a later one", after, before)
	}

	// The SMF sets the session up again on the TEID and UE address it had.
	establishAgain(t, smf, restartCPSEID, sess, "on the dropped session's TEID and UE address")
	delivered(t, tb, "the SMF's session set up again", pfcpUp, pfcpDown)
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// A state file the REST API's sessions cannot be restored from (two
// sessions on one TEID, written by hand) fails the start, and costs the
// SMFs nothing: the PFCP state is not set aside, and once the file is
// mended the next start takes the SMF's session up with the same Recovery
// Time Stamp.
func TestRestartWithAConflictingStateFileKeepsThePFCPState(t *testing.T) {
	tb, cfg, r := bothSessionsThenStop(t)
	saved, err := os.ReadFile(cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	var state struct{ Sessions []map[string]any }
	if err := json.Unmarshal(saved, &state); err != nil || len(state.Sessions) != 1 {
		t.Fatalf("the state file holds %s (%v); want the REST session", saved, err)
	}
	again := maps.Clone(state.Sessions[0])
	again["SEID"] = demo.SEID + 1
	state.Sessions = append(state.Sessions, again)
	conflicting, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.StateFile, conflicting, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := daemon.Run(t.Context(), cfg, slog.New(slog.NewTextHandler(t.Output(), nil))); err == nil || !strings.Contains(err.Error(), "is used by session") {
		t.Fatalf("start with two sessions on one TEID in the state file: %v; want the conflict", err)
	}
	if aside, _ := filepath.Glob(filepath.Join(cfg.PFCP.StateDir, "*.unusable")); len(aside) > 0 {
		t.Errorf("the PFCP state was set aside: %v", aside)
	}
	delivered(t, tb, "the SMF's session after the failed start", r.up, r.down)

	if err := os.WriteFile(cfg.StateFile, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	client, stop := startDaemonLogging(t, cfg, &log)
	if line := log.line("PFCP state"); !strings.Contains(line, "PFCP state restored") {
		t.Errorf("the log says %q; want the PFCP state restored", line)
	}
	if _, err := client.Session(t.Context(), r.sess.SEID); err != nil {
		t.Errorf("the SMF's session after the mended start: %v", err)
	}
	delivered(t, tb, "the SMF's session after the mended start", r.up, r.down)
	if after := recoveryTime(t, r.smf); !after.Equal(r.recovery) {
		t.Errorf("Recovery Time Stamp %v after the restart, %v before; want the same", after, r.recovery)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// establishAgain has an SMF associate again and establish its session
// again on the TEID and UE address it had, as an SMF does on seeing the
// UPF's later Recovery Time Stamp, failing the test unless accepted.
func establishAgain(t *testing.T, smf *pfcptest.SMF, cpSEID uint64, sess pfcptest.Session, when string) {
	t.Helper()
	if _, err := smf.Associate(); err != nil {
		t.Fatal(err)
	}
	req := smf.PDUSessionRequest(cpSEID, sess.UE, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	withFTEID(req, sess.TEID, demo.N3Addr)
	resp, err := smf.SendEstablishment(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := pfcptest.Accepted("establishment "+when, resp.Cause); err != nil {
		t.Fatal(err)
	}
}

// restartCPSEID is the SMF's SEID of the session of sessionThenStop.
const restartCPSEID = 0x5eed

// beforeRestart is an SMF's session on a daemon that was stopped: its
// frames, and the Recovery Time Stamp the SMF saw before.
type beforeRestart struct {
	smf      *pfcptest.SMF
	sess     pfcptest.Session
	up, down []byte
	recovery time.Time
}

// sessionThenStop has an SMF establish a session on the daemon running cfg,
// checks that it forwards, and stops the daemon.
func sessionThenStop(t *testing.T, tb *demo.Testbed, cfg *config.Config, stop func() error) beforeRestart {
	t.Helper()
	r := beforeRestart{smf: associatedSMF(t, cfg)}
	var err error
	if r.sess, err = r.smf.EstablishPDUSession(restartCPSEID, demo.GNBAddr, demo.DownlinkTEID, demo.QFI); err != nil {
		t.Fatal(err)
	}
	r.up, r.down = sessionFrames(tb, r.sess.TEID, r.sess.UE)
	delivered(t, tb, "the SMF's session", r.up, r.down)
	r.recovery = recoveryTime(t, r.smf)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return r
}

// bothSessionsThenStop runs a daemon with PFCP on a testbed, has it install
// the REST session of sessionDocument and an SMF's (sessionThenStop), and
// stops it.
func bothSessionsThenStop(t *testing.T) (*demo.Testbed, *config.Config, beforeRestart) {
	t.Helper()
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, restartPool)
	client, stop := startDaemon(t, cfg)
	if _, err := client.Create(t.Context(), []byte(sessionDocument)); err != nil {
		t.Fatal(err)
	}
	return tb, cfg, sessionThenStop(t, tb, cfg, stop)
}

// lockedBuffer keeps a daemon's log, written and read at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// line is the first line with s.
func (l *lockedBuffer) line(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// recoveryTime is the UPF's Recovery Time Stamp, as a Heartbeat Response
// gives it.
func recoveryTime(t *testing.T, smf *pfcptest.SMF) time.Time {
	t.Helper()
	hb, err := smf.Heartbeat()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := hb.RecoveryTimeStamp.RecoveryTimeStamp()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// withFTEID gives the uplink PDR of a pfcptest.PDUSessionRequest the
// F-TEID teid at n3 in place of CHOOSE, as an SMF that allocates TEIDs
// sends it.
func withFTEID(req *message.SessionEstablishmentRequest, teid uint32, n3 netip.Addr) {
	pdr := slices.Clone(req.CreatePDR[0].ChildIEs)
	for i, c := range pdr {
		if c.Type != ie.PDI {
			continue
		}
		pdi := slices.Clone(c.ChildIEs)
		for j, p := range pdi {
			if p.Type == ie.FTEID {
				pdi[j] = ie.NewFTEID(0x01, teid, net.IP(n3.AsSlice()), nil, 0) // V4
			}
		}
		pdr[i] = ie.NewPDI(pdi...)
	}
	req.CreatePDR[0] = ie.NewCreatePDR(pdr...)
}

// daemonConfig writes and loads the configuration of a daemon that drives
// the testbed's UPF namespace (writeConfig), its N3 and N6 interfaces and
// more (YAML flow mappings), with the pfcp section given as a YAML flow
// mapping, if any.
func daemonConfig(t *testing.T, tb *demo.Testbed, pfcp string, more ...string) *config.Config {
	t.Helper()
	return writeConfig(t, tb.UPF.Name, append([]string{"{name: " + demo.N3 + ", roles: [access]}", "{name: " + demo.N6 + ", roles: [core]}"}, more...),
		[]netip.Addr{demo.N3Addr}, nil, pfcp)
}

// writeConfig writes and loads the configuration of a daemon that drives
// the interfaces of namespace netns (YAML flow mappings, name and roles),
// with its N3 and N9 addresses, its maps pinned in a directory of its own
// (detached when the test ends), and the pfcp section given as a YAML
// flow mapping, if any.
func writeConfig(t *testing.T, netns string, interfaces []string, n3, n9 []netip.Addr, pfcp string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	list := func(addrs []netip.Addr) string {
		s := make([]string, len(addrs))
		for i, a := range addrs {
			s[i] = a.String()
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	yaml := fmt.Sprintf(`interfaces: [%s]
n3_addresses: %s
n9_addresses: %s
xdp_mode: native
netns: %s
api: {listen: %q}
datapath: {pin_path: %s, max_sessions: 16}
state_file: %s
`, strings.Join(interfaces, ", "), list(n3), list(n9), netns, listen, testsupport.PinDir(t), filepath.Join(dir, "sessions.json"))
	if pfcp != "" {
		yaml += "pfcp: " + pfcp + "\n"
	}
	return daemontest.Config(t, dir, yaml)
}

// startDaemon runs the daemon in-process until its API answers. stop
// cancels it and returns what Run returned; the test's cleanup stops it too.
func startDaemon(t *testing.T, cfg *config.Config) (client *api.Client, stop func() error) {
	t.Helper()
	return startDaemonLogging(t, cfg, io.Discard)
}

// startDaemonLogging is startDaemon with the log copied to w too.
func startDaemonLogging(t *testing.T, cfg *config.Config, w io.Writer) (client *api.Client, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), w), nil)))
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	// Without a timeout, a request accepted by whatever else holds the
	// port would wait forever.
	client = &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 5 * time.Second}}
	// Run serves the API only once the data path is attached.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := client.Stats(ctx); err == nil {
			return client, stop
		}
		if len(done) > 0 || time.Now().After(deadline) {
			t.Fatalf("the daemon did not start: %v", stop())
		}
	}
}
