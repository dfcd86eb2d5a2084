package testsupport

import "time"

// Policed is how many packets of size octets, sent at sentAt (from the
// start), a token bucket lets through that refills at rate octets a second
// and holds burst of it, full at the start: what a QER's policer lets
// through of packets as they were really sent, late ones on a busy host
// included.
func Policed(sentAt []time.Duration, rate, size uint64, burst time.Duration) uint64 {
	depth := float64(rate) * burst.Seconds()
	tokens, last, passed := depth, time.Duration(0), uint64(0)
	for _, at := range sentAt {
		tokens = min(depth, tokens+float64(rate)*(at-last).Seconds())
		last = at
		if tokens >= float64(size) {
			tokens -= float64(size)
			passed++
		}
	}
	return passed
}
