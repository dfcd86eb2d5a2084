package report

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// openDatapath loads a classifier for the test.
func openDatapath(t *testing.T) *classifyxdp.Datapath {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	dp, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { dp.Close() })
	return dp
}

// Reports reach a webhook at the interval with the intents, slices and
// CPUs, and a failing webhook does not stop the others.
func TestReportsReachWebhooks(t *testing.T) {
	dp := openDatapath(t)
	intents := intent.NewStore(dp, nil, nil)
	if _, _, err := intents.Apply([]byte(`{"Resources": [{"qfi": 5}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "high"}}`)); err != nil {
		t.Fatal(err)
	}
	received := make(chan Report, 10)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep Report
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &rep) != nil {
			t.Errorf("a report by %s, %q: %s", r.Method, r.Header.Get("Content-Type"), body)
		}
		received <- rep
	}))
	defer good.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer failing.Close()
	var logged bytes.Buffer
	// The collector's credentials in its URL stay out of the log.
	withPassword := strings.Replace(failing.URL, "http://", "http://collector:s3cret@", 1)
	r := New(dp, intents, []string{withPassword, good.URL}, slog.New(slog.NewTextHandler(&logged, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, 50*time.Millisecond)
	}()
	var reports []Report
	for len(reports) < 2 {
		select {
		case rep := <-received:
			reports = append(reports, rep)
		case <-time.After(5 * time.Second):
			t.Fatal("no report reached the webhook")
		}
	}
	cancel()
	<-done
	first, second := reports[0], reports[1]
	if gap := second.Time.Sub(first.Time); gap < 40*time.Millisecond || gap > time.Second {
		t.Errorf("reports %v apart, want about 50ms", gap)
	}
	if len(second.Intents) != 1 || second.Intents[0].Action != "SLICE" || len(second.Slices) != 1 || !second.Slices[0].Prioritised ||
		len(second.CPUs) == 0 {
		t.Errorf("report %+v", second)
	}
	if want := strings.Replace(failing.URL, "http://", "http://collector:xxxxx@", 1); !strings.Contains(logged.String(), want) ||
		strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the failing webhook was not logged as %s: %s", want, logged.String())
	}
}

// A webhook that does not answer (until the client's timeout, seconds)
// delays no other: the others get their reports at the interval.
func TestASlowWebhookDelaysNoOther(t *testing.T) {
	dp := openDatapath(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer slow.Close()
	defer close(release) // before slow.Close, which waits for its handlers
	received := make(chan struct{}, 100)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { received <- struct{}{} }))
	defer good.Close()
	r := New(dp, intent.NewStore(dp, nil, nil), []string{slow.URL, good.URL}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, 50*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.After(2 * time.Second)
	for n := 0; n < 5; n++ {
		select {
		case <-received:
		case <-deadline:
			t.Fatalf("%d reports reached the good webhook in 2s at an interval of 50ms, the slow one before it", n)
		}
	}
}

// A report with nothing to say lists nothing as [], never null.
func TestEmptyReportListsAreArrays(t *testing.T) {
	dp := openDatapath(t)
	rep, err := New(dp, intent.NewStore(dp, nil, nil), nil, slog.New(slog.DiscardHandler)).Take(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"intents":[]`) || !strings.Contains(string(body), `"slices":[]`) {
		t.Errorf("an empty report: %s", body)
	}
}

// A webhook that fails is logged when it starts failing and when it takes
// a report again, not at every report in between; the reports it did not
// take are counted, by its URL without its password.
func TestAFailingWebhookIsLoggedOnChange(t *testing.T) {
	dp := openDatapath(t)
	// Reports 0-2 and 5-6 fail; the others are taken.
	fails := map[int]bool{0: true, 1: true, 2: true, 5: true, 6: true}
	seen := make(chan int, 100)
	var n int
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fails[n] {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		seen <- n
		n++
	}))
	defer hook.Close()
	var logged bytes.Buffer // read once Run returned, its senders done
	withPassword := strings.Replace(hook.URL, "http://", "http://collector:s3cret@", 1)
	r := New(dp, intent.NewStore(dp, nil, nil), []string{withPassword}, slog.New(slog.NewTextHandler(&logged, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, 10*time.Millisecond)
	}()
	// The webhook got report 8: the reporter is done with report 7.
	for i := 0; i != 8; {
		select {
		case i = <-seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("the webhook got %d reports in 5s at an interval of 10ms", i)
		}
	}
	cancel()
	<-done
	log := logged.String()
	if got := strings.Count(log, "report not sent to a webhook"); got != 2 {
		t.Errorf("%d lines for the failures, want one for each of the two times it began failing:\n%s", got, log)
	}
	if !strings.Contains(log, "webhook takes reports again") || !strings.Contains(log, "reports_not_sent=3") ||
		!strings.Contains(log, "reports_not_sent=2") || strings.Contains(log, "s3cret") {
		t.Errorf("the log does not say the webhook took reports again after 3 and 2 failures, its password left out:\n%s", log)
	}
	redacted := strings.Replace(hook.URL, "http://", "http://collector:xxxxx@", 1)
	testsupport.HasLines(t, testsupport.Exposition(t, r.Metrics()),
		`xdp5g_classify_webhook_failures_total{webhook="`+redacted+`"} 5`)
}
