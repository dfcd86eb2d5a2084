package pfcp

import (
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
type responseCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	entries map[cacheKey]cachedResponse
	// expiring are the responses in the order they expire (the order they
	// were stored), so that each request drops a few of those that did: a
	// sweep of the whole cache held every request for the 100 ms it took
	// at 20,000 requests a second, and so would the first request after a
	// burst that long ago.
	expiring []expiry
}

// expiredPerRequest bounds the expired responses a request drops: more
// than one, so that the cache shrinks after a burst.
const expiredPerRequest = 8

type expiry struct {
	key cacheKey
	at  time.Time
}

func newResponseCache(ttl time.Duration) *responseCache {
	return &responseCache{ttl: ttl, entries: map[cacheKey]cachedResponse{}}
}

// begin registers a request. fresh is false for a retransmission: then
// encoded is the response to resend, or nil while the first copy is served.
func (c *responseCache) begin(k cacheKey, now time.Time) (encoded []byte, fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := 0; n < expiredPerRequest && len(c.expiring) > 0 && now.After(c.expiring[0].at); n++ {
		// The entry may be another one by now: a request forgotten and
		// then served again.
		if e, ok := c.entries[c.expiring[0].key]; ok && e.encoded != nil && now.After(e.expires) {
			delete(c.entries, c.expiring[0].key)
		}
		c.expiring = c.expiring[1:]
	}
	if e, ok := c.entries[k]; ok && (e.encoded == nil || !now.After(e.expires)) {
		return e.encoded, false
	}
	c.entries[k] = cachedResponse{}
	return nil, true
}

// finish stores the response to a request begin registered.
func (c *responseCache) finish(k cacheKey, encoded []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[k] = cachedResponse{encoded: encoded, expires: now.Add(c.ttl)}
	c.expiring = append(c.expiring, expiry{k, now.Add(c.ttl)})
}

// forget drops a request that got no response, so a retransmission is
// served afresh.
func (c *responseCache) forget(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}
