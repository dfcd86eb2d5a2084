// Package restarts restarts the daemon again and again, killed (SIGKILL)
// or stopped (SIGTERM) at random instants, while an SMF of its own
// establishes, moves, queries and deletes sessions, the daemon reports
// their usage, and traffic flows through a session of the SMF's. It checks
// what the daemon promises of a restart: no packet of the session is lost,
// the SMF sees the same Recovery Time Stamp throughout, its requests are
// all answered and every session it established is there until it deletes
// it, the usage reports add up exactly to what was sent, none counted
// twice, and the session's PDR counters (`xdp5g sessions get`) never go
// back and end at what was sent.
package restarts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// Config says how to restart the daemon.
type Config struct {
	// Restarts is how many; every other one kills the daemon, the others
	// stop it.
	Restarts int
	// Daemon is the command that runs the daemon with a configuration
	// file: `xdp5g run --config FILE`, or what stands in for it.
	Daemon func(configFile string) *exec.Cmd
	// Rate is the packets per second each way of the traffic.
	Rate uint64
	// Progress, if set, is told of each restart.
	Progress func(format string, args ...any)
}

// Result is what a run of restarts saw.
type Result struct {
	Restarts, Killed int
	// Took is how long each restart took, from the signal to the first
	// Heartbeat Response of the new run.
	Took []time.Duration
	// Sent, Delivered: the traffic's packets, uplink and downlink; Octets
	// the inner octets sent, which the session's URR counts, and Reported
	// what the usage reports said it counted.
	Sent, Delivered    [2]uint64
	Octets, Reported   uint64
	Cycles             int // sessions established, moved, queried and deleted besides
	Reports, Resent    int // Session Report Requests counted, and received again
	Repaired           int // sessions the daemon installed again (its log)
	Problems           []string
	Log                string // the daemon's log
	recovery, restored uint32
}

// OK says whether nothing was lost.
func (r Result) OK() bool { return len(r.Problems) == 0 }

// sessionUE is the UE of the session the traffic flows through; the
// others take theirs from uePool.
var uePool = netip.MustParsePrefix("10.46.0.0/16")

// Run runs the restarts through the demo testbed's UPF.
func Run(ctx context.Context, tb *demo.Testbed, cfg Config) (res Result, err error) {
	r, err := newRun(tb, cfg)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	res.Log = r.logName
	if err := r.start(); err != nil {
		return res, err
	}
	if err := r.ready(); err != nil {
		return res, err
	}
	if err := r.smf.associate(); err != nil {
		return res, err
	}
	if res.recovery, err = r.smf.heartbeat(); err != nil {
		return res, err
	}
	traffic := sessionSpec{cpSEID: 1, teid: demo.UplinkTEID, ue: demo.UEAddr, gnbTEID: demo.DownlinkTEID}
	t, err := r.smf.establish(traffic, demo.N3Addr, demo.GNBAddr)
	if err != nil {
		return res, err
	}
	stop := make(chan struct{})
	var flows, churn sync.WaitGroup
	inner := [2][]byte{demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL), demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL)}
	dirs := [2]demo.Direction{tb.Uplink(), tb.Downlink()}
	frames := [2][]byte{tb.UplinkFrame(demo.UplinkTEID, 9, inner[0]), tb.DownlinkFrame(inner[1])}
	var before [2]trafficgen.Counts
	var flowErrs [2]error
	for i := range dirs {
		if before[i], err = dirs[i].Sink.Counts(); err != nil {
			return res, err
		}
		flows.Go(func() { res.Sent[i], flowErrs[i] = r.flow(dirs[i], frames[i], stop) })
	}
	var cycles atomic.Int64
	churn.Go(func() { r.churn(stop, &cycles) })

	for i := range cfg.Restarts {
		select {
		case <-ctx.Done():
			close(stop)
			return res, ctx.Err()
		case <-time.After(time.Duration(300+rand.IntN(900)) * time.Millisecond):
		}
		kill := i%2 == 0
		r.checkPDRCounters(t.upSEID, fmt.Sprintf("before restart %d", i+1))
		took, err := r.restart(kill)
		if err != nil {
			close(stop)
			flows.Wait()
			churn.Wait()
			return res, fmt.Errorf("restart %d: %w", i+1, err)
		}
		res.Restarts++
		if kill {
			res.Killed++
		}
		res.Took = append(res.Took, took)
		r.checkPDRCounters(t.upSEID, fmt.Sprintf("after restart %d", i+1))
		if res.restored, err = r.smf.heartbeat(); err != nil || res.restored != res.recovery {
			r.smf.problem("restart %d: Recovery Time Stamp %d (%v), was %d", i+1, res.restored, err, res.recovery)
		}
		if cfg.Progress != nil {
			cfg.Progress("restart %d of %d (%s) took %s", i+1, cfg.Restarts, map[bool]string{true: "SIGKILL", false: "SIGTERM"}[kill],
				took.Round(time.Millisecond))
		}
	}
	close(stop)
	flows.Wait()
	churn.Wait()
	if err := errors.Join(flowErrs[:]...); err != nil {
		return res, err
	}
	res.Cycles = int(cycles.Load())
	for i, d := range dirs {
		got, err := d.Delivered(before[i].MatchPackets + res.Sent[i])
		if err != nil {
			return res, err
		}
		res.Delivered[i] = got - before[i].MatchPackets
		res.Octets += res.Sent[i] * uint64(len(inner[i]))
		if res.Delivered[i] != res.Sent[i] {
			r.smf.problem("%s: %d of %d packets delivered", d.Name, res.Delivered[i], res.Sent[i])
		}
	}
	// A report on its way as the traffic ended counts too; then the
	// deletion's final report.
	time.Sleep(time.Second)
	if got := r.checkPDRCounters(t.upSEID, "at the end"); got != [2]uint64{res.Sent[0], res.Sent[1]} {
		r.smf.problem("the session's PDRs counted %d packets uplink and %d downlink, %d and %d were sent", got[0], got[1], res.Sent[0], res.Sent[1])
	}
	if err := r.smf.remove(traffic.cpSEID, t.upSEID); err != nil {
		r.smf.problem("%v", err)
	}
	time.Sleep(time.Second)
	res.Reported = r.smf.reported(traffic.cpSEID, urrID)
	if res.Reported != res.Octets {
		r.smf.problem("the usage reports counted %d octets, %d were sent", res.Reported, res.Octets)
	}
	if n, err := r.pfcpSessions(); err != nil || n != 0 {
		r.smf.problem("%d sessions left in the daemon (%v), want none", n, err)
	}
	if len(r.smf.problems) > 0 {
		r.smf.problem("the data path counted: %s", r.counters())
	}
	r.smf.mu.Lock()
	res.Problems, res.Reports, res.Resent = append(res.Problems, r.smf.problems...), r.smf.reports, r.smf.resent
	r.smf.mu.Unlock()
	res.Repaired, err = r.checkLog(&res)
	return res, err
}

// run is the daemon as a process, its configuration, and the SMF.
type run struct {
	cfg     Config
	tb      *demo.Testbed
	dir     string
	file    string // the configuration
	conf    *config.Config
	client  *api.Client
	logName string
	log     *os.File
	cmd     *exec.Cmd
	exited  chan error
	smf     *smf
	// pdrPackets are the traffic session's PDRs' packets last read.
	pdrPackets [2]uint64
}

func newRun(tb *demo.Testbed, cfg Config) (_ *run, err error) {
	r := &run{cfg: cfg, tb: tb}
	if r.dir, err = os.MkdirTemp("", "xdp5g-restarts-"); err != nil {
		return nil, err
	}
	pfcpListen, apiListen, err := freePorts()
	if err != nil {
		return nil, err
	}
	// A loopback address of its own: the daemon sends its requests to
	// port 8805 there.
	smfAddr := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(rand.IntN(256)), byte(1 + rand.IntN(250))})
	yaml := fmt.Sprintf(`interfaces:
  - {name: %s, roles: [access]}
  - {name: %s, roles: [core]}
n3_addresses: [%s]
netns: %s
api: {listen: %q}
datapath: {pin_path: %s, max_sessions: 16384}
state_file: %s
pfcp: {listen: %q, node_id: upf.restarts.test, heartbeat_interval: 1h, gtpu_echo_interval: 1h, ue_pool: %s}
`, demo.N3, demo.N6, demo.N3Addr, tb.UPF.Name, apiListen, filepath.Join("/sys/fs/bpf", namespace.UniqueName("xdp5g-restarts-")),
		filepath.Join(r.dir, "sessions.json"), pfcpListen, uePool)
	r.file = filepath.Join(r.dir, "xdp5g.yaml")
	if err := os.WriteFile(r.file, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	if r.conf, err = config.Load(r.file); err != nil {
		return nil, err
	}
	r.client = &api.Client{URL: "http://" + apiListen, HTTP: &http.Client{Timeout: 5 * time.Second}}
	r.logName = filepath.Join(r.dir, "daemon.log")
	if r.log, err = os.Create(r.logName); err != nil {
		return nil, err
	}
	if r.smf, err = newSMF(smfAddr, netip.MustParseAddrPort(pfcpListen)); err != nil {
		return nil, errors.Join(err, r.log.Close())
	}
	return r, nil
}

// freePorts are a loopback UDP address and a TCP one that nothing uses.
func freePorts() (udp, tcp string, err error) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer u.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer l.Close()
	return u.LocalAddr().String(), l.Addr().String(), nil
}

// start starts the daemon and waits until PFCP answers; ready waits for
// the rest.
func (r *run) start() error {
	r.cmd = r.cfg.Daemon(r.file)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.exited = make(chan error, 1)
	go func() { r.exited <- r.cmd.Wait() }()
	if _, err := r.smf.heartbeat(); err != nil {
		return fmt.Errorf("the daemon does not answer (its log: %s): %w", r.logName, err)
	}
	return nil
}

// ready waits until the daemon's API says it is ready: PFCP answers a
// moment before that.
func (r *run) ready() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.client.Ready(context.Background())
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon is not ready (its log: %s): %w", r.logName, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// restart stops the daemon, killed or not, starts it again, and returns
// how long that took.
func (r *run) restart(kill bool) (time.Duration, error) {
	began := time.Now()
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return 0, err
	}
	select {
	case err := <-r.exited:
		if !kill && err != nil {
			return 0, fmt.Errorf("the daemon stopped with %v (its log: %s)", err, r.logName)
		}
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		return 0, fmt.Errorf("the daemon did not stop on %v", sig)
	}
	if err := r.start(); err != nil {
		return 0, err
	}
	took := time.Since(began)
	return took, r.ready()
}

// flow sends frame one way, a second's worth at a time, until stop.
func (r *run) flow(d demo.Direction, frame []byte, stop <-chan struct{}) (sent uint64, err error) {
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return 0, err
	}
	defer gen.Close()
	for {
		select {
		case <-stop:
			return sent, nil
		default:
		}
		n, _, err := d.Send(gen, frame, r.cfg.Rate/4, trafficgen.Options{Rate: r.cfg.Rate})
		sent += n
		if err != nil {
			return sent, err
		}
	}
}

// churn establishes sessions that buffer their downlink, moves them to
// forward, queries and deletes them, one after another, until stop.
func (r *run) churn(stop <-chan struct{}, cycles *atomic.Int64) {
	for i := uint64(0); ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		sp := sessionSpec{cpSEID: 1000 + i, gnbTEID: uint32(0x1000 + i), buffer: true}
		e, err := r.smf.establish(sp, demo.N3Addr, demo.GNBAddr)
		if err == nil {
			err = r.smf.forward(e.upSEID, sp.gnbTEID+1, demo.GNBAddr)
		}
		if err == nil {
			err = r.smf.query(sp.cpSEID, e.upSEID)
		}
		if err == nil {
			err = r.smf.remove(sp.cpSEID, e.upSEID)
		}
		if err != nil {
			r.smf.problem("session %d: %v", sp.cpSEID, err)
			return
		}
		cycles.Add(1)
	}
}

// pfcpSessions is how many sessions the daemon lists.
func (r *run) pfcpSessions() (int, error) {
	raw, err := r.client.Sessions(context.Background())
	if err != nil {
		return 0, err
	}
	var list struct{ Sessions []json.RawMessage }
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, err
	}
	return len(list.Sessions), nil
}

// checkPDRCounters reads the packets the traffic session's uplink and
// downlink PDRs counted, as `xdp5g sessions get` shows them, and finds
// those that went backwards since the last read.
func (r *run) checkPDRCounters(upSEID uint64, when string) (packets [2]uint64) {
	raw, err := r.client.Session(context.Background(), upSEID)
	var doc struct {
		PDRs []struct {
			ID       uint16 `json:"pdrId"`
			Counters api.Counter
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &doc)
	}
	if err != nil {
		r.smf.problem("%s: session %d: %v", when, upSEID, err)
		return packets
	}
	for _, p := range doc.PDRs {
		if p.ID < 1 || p.ID > 2 {
			continue
		}
		packets[p.ID-1] = p.Counters.Packets
		if was := r.pdrPackets[p.ID-1]; p.Counters.Packets < was {
			r.smf.problem("%s: PDR %d counted %d packets, %d before", when, p.ID, p.Counters.Packets, was)
		}
	}
	r.pdrPackets = packets
	return packets
}

// counters are the data path's counters of the outcomes that happened.
func (r *run) counters() string {
	st, err := r.client.Stats(context.Background())
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, i := range st.Interfaces {
		for reason, c := range i.Reasons {
			if c.Packets > 0 {
				out = append(out, fmt.Sprintf("%s %s %d", i.Name, reason, c.Packets))
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// checkLog counts the sessions the daemon installed again, and finds the
// starts that did not restore the PFCP state.
func (r *run) checkLog(res *Result) (int, error) {
	b, err := os.ReadFile(r.logName)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "PFCP state not restored") || strings.Contains(line, "panic") {
			res.Problems = append(res.Problems, "the daemon's log: "+strings.TrimSpace(line))
		}
	}
	return strings.Count(string(b), "PFCP session installed again"), nil
}

// close stops the daemon, removes what it left attached and pinned, and
// closes the SMF.
func (r *run) close() error {
	var errs []error
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			r.cmd.Process.Kill()
			<-r.exited
		}
	}
	if r.conf != nil {
		errs = append(errs, daemon.Detach(r.conf))
	}
	if r.smf != nil {
		r.smf.close()
	}
	if r.log != nil {
		errs = append(errs, r.log.Close())
	}
	return errors.Join(errs...)
}

// Remove removes the run's files: its configuration, state and log.
func (r Result) Remove() error { return os.RemoveAll(filepath.Dir(r.Log)) }
