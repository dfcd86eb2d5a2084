// Package report sends the classifier's figures (per intent, per slice,
// per CPU) to webhooks at a fixed interval, as the control layer of
// "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks"
// informs the layers above it (its §5.2), and collects them for Prometheus
// (Metrics).
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
)

// Report is what a webhook receives, as JSON.
type Report struct {
	Time    time.Time       `json:"time"`
	Intents []intent.Status `json:"intents"`
	Slices  []Slice         `json:"slices"`
	CPUs    []CPU           `json:"cpus"`
}

// Slice is a slice's figures: what its CPUs took and what left for
// alternative nodes, and the rates of both over the last interval.
type Slice struct {
	ID             uint32  `json:"id"`
	CPUs           []int   `json:"cpus"`
	Prioritised    bool    `json:"prioritised"`
	LocalPackets   uint64  `json:"localPackets"`
	LocalBytes     uint64  `json:"localBytes"`
	Offloaded      uint64  `json:"offloadedPackets"`
	OffloadedBytes uint64  `json:"offloadedBytes"`
	OffloadedShare float64 `json:"offloadedShare"`
	BitRate        float64 `json:"bitRate"` // local and offloaded
	// QueueDrops are the packets the queues of its CPUs dropped, whoever
	// sent them: the loss of steering. Policed are those its rate dropped.
	QueueDrops uint64 `json:"queueDrops"`
	Policed    uint64 `json:"policedPackets"`
}

// CPU is a CPU's queue of steered packets.
type CPU struct {
	CPU        int     `json:"cpu"`
	Enqueued   uint64  `json:"enqueued"`
	Dequeued   uint64  `json:"dequeued"`
	Dropped    uint64  `json:"dropped"`
	Backlog    uint64  `json:"backlog"`
	PacketRate float64 `json:"packetRate"` // taken off the queue
}

// Reporter gathers the figures and sends them.
type Reporter struct {
	dp       *classifyxdp.Datapath
	intents  *intent.Store
	webhooks []string
	failed   []atomic.Uint64 // the reports each webhook did not take
	client   *http.Client
	log      *slog.Logger

	mu   sync.Mutex
	last *Report // the previous report, for the rates
}

// New reports on a classifier and its intents to webhooks (URLs).
func New(dp *classifyxdp.Datapath, intents *intent.Store, webhooks []string, log *slog.Logger) *Reporter {
	return &Reporter{dp: dp, intents: intents, webhooks: webhooks, failed: make([]atomic.Uint64, len(webhooks)),
		client: &http.Client{Timeout: 5 * time.Second}, log: log}
}

// Run sends a report every interval until ctx is done. Each webhook has a
// sender of its own, so that one slow to answer (up to the client's
// timeout) delays no other's reports; it gets the newest report once it
// is done with its last, the ones in between skipped. It returns once
// the senders have.
func (r *Reporter) Run(ctx context.Context, interval time.Duration) {
	var senders sync.WaitGroup
	defer senders.Wait()
	newest := make([]chan []byte, len(r.webhooks))
	for i, hook := range r.webhooks {
		newest[i] = make(chan []byte, 1)
		senders.Go(func() { r.sendTo(ctx, hook, &r.failed[i], newest[i]) })
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			rep, err := r.Take(now)
			if err != nil {
				r.log.Error("gathering a report", "err", err)
				continue
			}
			body, err := json.Marshal(rep)
			if err != nil {
				r.log.Error("encoding a report", "err", err)
				continue
			}
			for _, c := range newest {
				select {
				case <-c: // a report the webhook's sender has not taken yet
				default:
				}
				c <- body
			}
		}
	}
}

// Take gathers the figures now; rates are over the time since the
// previous Take.
func (r *Reporter) Take(now time.Time) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.intents.Sample(now); err != nil {
		return nil, err
	}
	rep := &Report{Time: now, Slices: []Slice{}, CPUs: []CPU{}}
	var err error
	if rep.Intents, err = r.intents.List(); err != nil {
		return nil, err
	}
	loads, err := r.dp.CPULoads()
	if err != nil {
		return nil, err
	}
	dt := 0.0
	if r.last != nil {
		dt = now.Sub(r.last.Time).Seconds()
	}
	for cpu, l := range loads {
		c := CPU{CPU: cpu, Enqueued: l.Enqueued, Dequeued: l.Dequeued, Dropped: l.Dropped, Backlog: l.Backlog()}
		if dt > 0 && cpu < len(r.last.CPUs) {
			c.PacketRate = float64(l.Dequeued-r.last.CPUs[cpu].Dequeued) / dt
		}
		rep.CPUs = append(rep.CPUs, c)
	}
	for _, s := range r.dp.Slices() {
		sl, err := r.slice(s, dt)
		if err != nil {
			return nil, err
		}
		rep.Slices = append(rep.Slices, sl)
	}
	r.last = rep
	return rep, nil
}

func (r *Reporter) slice(s classifyxdp.Slice, dt float64) (Slice, error) {
	st, err := r.dp.SliceStats(s)
	out := Slice{ID: s.ID, CPUs: s.CPUs, Prioritised: s.Prioritised, LocalPackets: st.Local.Packets, LocalBytes: st.Local.Bytes,
		Offloaded: st.Offloaded.Packets, OffloadedBytes: st.Offloaded.Bytes, Policed: st.Policed.Packets, QueueDrops: st.QueueDrops}
	if err != nil {
		return out, err
	}
	if total := out.LocalPackets + out.Offloaded; total > 0 {
		out.OffloadedShare = float64(out.Offloaded) / float64(total)
	}
	if dt > 0 {
		for _, prev := range r.last.Slices {
			if prev.ID == s.ID {
				out.BitRate = 8 * float64(out.LocalBytes+out.OffloadedBytes-prev.LocalBytes-prev.OffloadedBytes) / dt
			}
		}
	}
	return out, nil
}

// sendTo posts the reports of bodies to the webhook hook until ctx is
// done. One that fails is counted in failed, and the webhook gets the
// next report; the log says when it starts failing and when it takes a
// report again, not every failure: a webhook down for a day would
// otherwise write a line every interval.
func (r *Reporter) sendTo(ctx context.Context, hook string, failed *atomic.Uint64, bodies <-chan []byte) {
	var failing uint64 // the reports it failed to take in a row
	for {
		select {
		case <-ctx.Done():
			return
		case body := <-bodies:
			err := r.post(ctx, hook, body)
			switch {
			case err != nil && ctx.Err() != nil: // stopped while posting
			case err != nil:
				failed.Add(1)
				if failing++; failing == 1 {
					r.log.Warn("report not sent to a webhook; it is logged again once it takes one", "webhook", redacted(hook), "err", err)
				}
			case failing > 0:
				r.log.Info("webhook takes reports again", "webhook", redacted(hook), "reports_not_sent", failing)
				failing = 0
			}
		}
	}
}

func (r *Reporter) post(ctx context.Context, hook string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// redacted is a webhook's URL as the log shows it, without its password.
func redacted(hook string) string {
	if u, err := url.Parse(hook); err == nil {
		return u.Redacted()
	}
	return hook
}
