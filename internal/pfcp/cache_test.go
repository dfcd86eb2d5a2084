package pfcp

import (
	"net/netip"
	"testing"
	"time"
)

// A response is resent for retransmissions until it expires; then the
// request is fresh again, and each request drops the responses expired
// before it, but not one stored again for a request served anew.
func TestResponseCacheExpires(t *testing.T) {
	const ttl = time.Second
	c := newResponseCache(ttl)
	peer := netip.MustParseAddrPort("192.0.2.1:8805")
	key := func(seq uint32) cacheKey { return cacheKey{from: peer, seq: seq, msgType: 50} }
	start := time.Unix(0, 0)
	for seq := range uint32(3) {
		if _, fresh := c.begin(key(seq), start); !fresh {
			t.Fatalf("request %d is not fresh", seq)
		}
		c.finish(key(seq), []byte{byte(seq)}, start)
	}
	if b, fresh := c.begin(key(1), start.Add(ttl)); fresh || len(b) != 1 || b[0] != 1 {
		t.Fatalf("retransmission of request 1 at the TTL: %v, fresh %v; want the response", b, fresh)
	}
	// Request 2 is forgotten and served again later: its new response
	// outlives the first one's expiry.
	c.forget(key(2))
	c.begin(key(2), start.Add(ttl/2))
	c.finish(key(2), []byte{22}, start.Add(ttl/2))
	if _, fresh := c.begin(key(9), start.Add(ttl+time.Nanosecond)); !fresh {
		t.Fatal("request 9 is not fresh")
	}
	if _, kept := c.entries[key(0)]; kept {
		t.Error("response 0 is kept after it expired")
	}
	if b, fresh := c.begin(key(2), start.Add(ttl+time.Nanosecond)); fresh || len(b) != 1 || b[0] != 22 {
		t.Fatalf("retransmission of request 2 served anew: %v, fresh %v; want its second response", b, fresh)
	}
}

// The first request after a burst long ago drops a few of its responses,
// not all of them at once: the requests after it drop the rest.
func TestResponseCacheDropsABurstGradually(t *testing.T) {
	const ttl, burst = time.Second, 5 * expiredPerRequest
	c := newResponseCache(ttl)
	start := time.Unix(0, 0)
	for seq := range uint32(burst) {
		k := cacheKey{seq: seq}
		c.begin(k, start)
		c.finish(k, []byte{1}, start)
	}
	later := start.Add(time.Hour)
	c.begin(cacheKey{seq: burst}, later)
	if n := len(c.entries); n != burst+1-expiredPerRequest {
		t.Fatalf("%d responses kept after the first request, want %d", n, burst+1-expiredPerRequest)
	}
	for seq := uint32(burst + 1); seq <= burst+burst/expiredPerRequest-1; seq++ {
		c.begin(cacheKey{seq: seq}, later)
	}
	for seq := range uint32(burst) {
		if _, kept := c.entries[cacheKey{seq: seq}]; kept {
			t.Fatalf("response %d of the burst kept after %d requests", seq, burst/expiredPerRequest)
		}
	}
}
