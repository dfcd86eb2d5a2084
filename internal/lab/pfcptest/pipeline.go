package pfcptest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/message"
)

// maxSeq is the largest sequence number: they have three octets.
const maxSeq = 1<<24 - 1

// Pipeline sends n requests, those request(i, b) appends to b for i from 0
// (with any sequence number: Pipeline numbers them), keeping at most
// window of them unanswered, and hands each response to answered (valid
// during the call) with the index of its request and the time from sending
// the request to reading the response, in the order the responses arrive.
// With an interval, the requests go out that far apart, whatever the
// responses (an open loop, as an SMF serving its UEs sends); a sender that
// falls more than an interval behind, not being scheduled, starts the
// schedule afresh rather than catch up with a burst the UPF would queue.
// The requests' sequence numbers are distinct, so n is at most 2²⁴.
// Pipeline stops at the first error of request or answered, and when no
// response arrives for the timeout.
func (s *SMF) Pipeline(ctx context.Context, n, window int, interval time.Duration,
	request func(i int, b []byte) ([]byte, error),
	answered func(i int, resp []byte, rtt time.Duration) error) error {
	if n > maxSeq+1 {
		return fmt.Errorf("pipeline of %d requests: sequence numbers would repeat", n)
	}
	first := s.seq + 1
	s.seq += uint32(n)
	ctx, cancel := context.WithCancelCause(ctx)
	// A cancelled context ends the wait for a response; once Pipeline
	// returns, the deadline is the next request's to set.
	moved := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		s.conn.SetReadDeadline(time.Unix(1, 0))
		close(moved)
	})
	sending := make(chan struct{})
	defer func() {
		if !stopAfter() {
			<-moved
		}
		cancel(nil)
		<-sending
	}()

	start := time.Now()
	sentAt := make([]atomic.Int64, n) // nanoseconds since start
	slots := make(chan struct{}, window)
	go func() {
		defer close(sending)
		var b []byte
		var due time.Duration // of the next request, since start
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if interval > 0 {
				now := time.Since(start)
				if now-due > interval {
					due = now // the sender was not scheduled: no burst to catch up
				}
				if due > now {
					select {
					case <-time.After(due - now):
					case <-ctx.Done():
						return
					}
				}
				due += interval
			}
			var err error
			if b, err = request(i, b[:0]); err != nil {
				cancel(fmt.Errorf("request %d: %w", i, err))
				return
			}
			setSequence(b, (first+uint32(i))&maxSeq)
			sentAt[i].Store(int64(time.Since(start)))
			if _, err := s.conn.Write(b); err != nil {
				cancel(fmt.Errorf("request %d: %w", i, err))
				return
			}
		}
	}()

	buf := make([]byte, 64<<10)
	done := make([]bool, n)
	for left := n; left > 0; left-- {
		var resp []byte
		var i int
		var rtt time.Duration
		for {
			// Set before checking the context: a cancellation after the
			// check moves the deadline to the past.
			if err := s.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			nr, err := s.conn.Read(buf)
			received := time.Since(start)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err != nil {
				// Nothing is retransmitted: a request the UPF's full
				// socket buffer dropped is never answered.
				return fmt.Errorf("%d of %d responses missing (too many unanswered requests?): %w", left, n, err)
			}
			resp = buf[:nr]
			seq, ok := sequence(resp)
			if !ok {
				return fmt.Errorf("a response of %d bytes", nr)
			}
			i = int((seq - first) & maxSeq)
			if i < n && !done[i] {
				rtt = received - time.Duration(sentAt[i].Load())
				break
			}
			// A late answer to a request before the pipeline's.
		}
		done[i] = true
		if err := answered(i, resp, rtt); err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		<-slots
	}
	return nil
}

// AppendMessage appends a message encoded by go-pfcp to b.
func AppendMessage(b []byte, m message.Message) ([]byte, error) {
	n := len(b)
	b = slices.Grow(b, m.MarshalLen())[:n+m.MarshalLen()]
	return b, m.MarshalTo(b[n:])
}
