package pfcp

import (
	"net/netip"
	"testing"
	"time"
)

// A response is resent for retransmissions until it expires, also across
// a change of generation; then the request is fresh again. A request
// forgotten and served again keeps its second response.
func TestResponseCacheExpires(t *testing.T) {
	const ttl = time.Second
	c := newResponseCache(ttl)
	peer := netip.MustParseAddrPort("192.0.2.1:8805")
	key := func(seq uint32) cacheKey { return cacheKey{from: peer, seq: seq, msgType: 50} }
	start := time.Unix(1000, 0)
	for seq := range uint32(3) {
		if _, fresh := c.begin(key(seq), start); !fresh {
			t.Fatalf("request %d is not fresh", seq)
		}
		c.finish(key(seq), []byte{byte(seq)}, start)
	}
	// Request 2 is forgotten and served again later: its new response
	// outlives the first one's expiry.
	c.forget(key(2))
	c.begin(key(2), start.Add(ttl/2))
	c.finish(key(2), []byte{22}, start.Add(ttl/2))
	if b, fresh := c.begin(key(1), start.Add(ttl)); fresh || len(b) != 1 || b[0] != 1 {
		t.Fatalf("retransmission of request 1 at the TTL: %v, fresh %v; want the response", b, fresh)
	}
	if _, fresh := c.begin(key(0), start.Add(ttl+time.Nanosecond)); !fresh {
		t.Error("request 0 is not fresh after its response expired")
	}
	if b, fresh := c.begin(key(2), start.Add(ttl+time.Nanosecond)); fresh || len(b) != 1 || b[0] != 22 {
		t.Fatalf("retransmission of request 2 served anew: %v, fresh %v; want its second response", b, fresh)
	}
}

// A request being served when the generation changes is still not served
// twice, and its response, stored after the change, is resent.
func TestResponseCacheServingAcrossGenerations(t *testing.T) {
	const ttl = time.Second
	c := newResponseCache(ttl)
	start := time.Unix(1000, 0)
	k := cacheKey{seq: 7}
	c.begin(k, start)
	if b, fresh := c.begin(k, start.Add(ttl)); fresh || b != nil {
		t.Fatalf("retransmission while served, after a change of generation: %v, fresh %v", b, fresh)
	}
	c.finish(k, []byte{7}, start.Add(ttl))
	if b, fresh := c.begin(k, start.Add(ttl+ttl/2)); fresh || len(b) != 1 {
		t.Fatalf("retransmission after the response: %v, fresh %v", b, fresh)
	}
}

// Responses are dropped a generation at a time: a burst's are gone two
// TTLs later, and after a long silence nothing is kept.
func TestResponseCacheDropsGenerations(t *testing.T) {
	const ttl, burst = time.Second, 1000
	c := newResponseCache(ttl)
	start := time.Unix(1000, 0)
	for seq := range uint32(burst) {
		k := cacheKey{seq: seq}
		c.begin(k, start)
		c.finish(k, []byte{1}, start)
	}
	c.begin(cacheKey{seq: burst}, start.Add(ttl))
	if len(c.previous) != burst || len(c.current) != 1 {
		t.Fatalf("after one TTL: %d responses in the previous generation, %d in the current; want %d and 1",
			len(c.previous), len(c.current), burst)
	}
	c.begin(cacheKey{seq: burst + 1}, start.Add(2*ttl))
	if len(c.previous) != 1 || len(c.current) != 1 {
		t.Fatalf("after two TTLs: %d and %d responses kept, want 1 and 1", len(c.previous), len(c.current))
	}
	c.begin(cacheKey{seq: burst + 2}, start.Add(time.Hour))
	if len(c.previous) != 0 || len(c.current) != 1 {
		t.Fatalf("after an hour: %d and %d responses kept, want 0 and 1", len(c.previous), len(c.current))
	}
}
