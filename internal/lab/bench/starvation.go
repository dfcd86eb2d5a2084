package bench

import "time"

// A starvation probe times a fixed loop of about 20 µs every 5 ms while a
// benchmark runs. A loop that takes over slowOver times the median of the
// run's loops ran on a CPU the host slowed down or took away. This host
// does that for tens of milliseconds every second or two, running a loop
// ten times slower, and counts little of it as steal.
type starvation struct {
	stop  chan struct{}
	loops chan []time.Duration
}

const (
	probeEvery = 5 * time.Millisecond
	probeSteps = 20_000 // about 20 µs here
	slowOver   = 3      // times the median loop
)

// slowed is what a starvation probe saw: its loops, and how many of them
// were slow.
type slowed struct{ loops, slow int }

func (s slowed) plus(o slowed) slowed { return slowed{s.loops + o.loops, s.slow + o.slow} }

// share is the share of the loops that were slow, in percent.
func (s slowed) share() float64 { return 100 * float64(s.slow) / float64(max(s.loops, 1)) }

func probeStarvation() *starvation {
	s := &starvation{stop: make(chan struct{}), loops: make(chan []time.Duration, 1)}
	go func() {
		var loops []time.Duration
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				s.loops <- loops
				return
			case <-tick.C:
				start := time.Now()
				spin(probeSteps)
				loops = append(loops, time.Since(start))
			}
		}
	}()
	return s
}

// end stops the probe and says what it saw.
func (s *starvation) end() slowed {
	close(s.stop)
	return countSlow(<-s.loops)
}

// countSlow counts the loops that took over slowOver times their median.
func countSlow(loops []time.Duration) slowed {
	if len(loops) == 0 {
		return slowed{}
	}
	limit := slowOver * median(loops)
	n := 0
	for _, d := range loops {
		if d > limit {
			n++
		}
	}
	return slowed{len(loops), n}
}

var spun uint64

// spin takes n steps of arithmetic the compiler cannot drop.
func spin(n int) {
	x := spun | 1
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	spun = x
}
