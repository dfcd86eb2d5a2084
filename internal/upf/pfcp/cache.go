package pfcp

import (
	"iter"
	"maps"
	"net/netip"
	"sync"
	"time"
)

// cacheKey identifies a request among its retransmissions (TS 29.244 §6.4).
type cacheKey struct {
	from    netip.AddrPort
	seq     uint32
	msgType uint8
}

type cachedResponse struct {
	encoded []byte // nil while the request is being served
	expires time.Time
}

// responseCache keeps the encoded responses to recent requests, so that a
// retransmitted request gets the same answer without being served twice.
// It keeps them in two generations of a TTL each and drops the older one
// whole: a response stays from one to two TTLs. Deleting responses one by
// one instead left the map that a burst had made large full of
// tombstones, which the lookup of every new request then probed through
// (8 µs a request, paced after 300,000 establishments).
type responseCache struct {
	mu                sync.Mutex
	ttl               time.Duration
	current, previous map[cacheKey]cachedResponse
	since             time.Time // when current began
}

func newResponseCache(ttl time.Duration) *responseCache {
	return &responseCache{ttl: ttl, current: map[cacheKey]cachedResponse{}}
}

// begin registers a request. fresh is false for a retransmission: then
// encoded is the response to resend, or nil while the first copy is served.
func (c *responseCache) begin(k cacheKey, now time.Time) (encoded []byte, fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if age := now.Sub(c.since); age >= c.ttl {
		c.previous, c.current, c.since = c.current, map[cacheKey]cachedResponse{}, now
		if age >= 2*c.ttl { // all expired
			c.previous = nil
		}
	}
	e, ok := c.current[k]
	if !ok {
		e, ok = c.previous[k]
	}
	if ok && (e.encoded == nil || !now.After(e.expires)) {
		return e.encoded, false
	}
	c.current[k] = cachedResponse{}
	return nil, true
}

// finish stores the response to a request begin registered.
func (c *responseCache) finish(k cacheKey, encoded []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current[k] = cachedResponse{encoded: encoded, expires: now.Add(c.ttl)}
}

// forget drops a request that got no response, so a retransmission is
// served afresh.
func (c *responseCache) forget(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.current, k)
	delete(c.previous, k)
}

// each calls f with every response cached and not expired, a thousand at
// a time: requests wait for c.mu only while those are taken (taking
// hundreds of thousands at once held them back for a third of a second).
// A response cached meanwhile may be left out: its request's own entry
// journals it.
func (c *responseCache) each(f func(cacheKey, cachedResponse)) {
	type cached struct {
		k cacheKey
		r cachedResponse
	}
	c.mu.Lock()
	now := time.Now()
	generations := []map[cacheKey]cachedResponse{c.previous, c.current}
	c.mu.Unlock()
	live := make([]cached, 0, 1000)
	for _, m := range generations {
		next, stop := iter.Pull2(maps.All(m))
		for more := true; more; {
			live = live[:0]
			c.mu.Lock()
			for len(live) < cap(live) {
				k, r, ok := next()
				if !ok {
					more = false
					break
				}
				if r.encoded != nil && now.Before(r.expires) {
					live = append(live, cached{k, r})
				}
			}
			c.mu.Unlock()
			for _, e := range live {
				f(e.k, e.r)
			}
		}
		stop()
	}
}

// keep takes up the responses a previous run cached, those not expired at
// now, in the generation that begins now: they stay a TTL at least.
func (c *responseCache) keep(responses map[cacheKey]cachedResponse, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = now
	for k, r := range responses {
		if now.Before(r.expires) {
			c.current[k] = r
		}
	}
}
