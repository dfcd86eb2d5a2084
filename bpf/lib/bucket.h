/* Token buckets: a UPF QER's in one direction, a slice's on one CPU. */
#ifndef XDP5G_BUCKET_H
#define XDP5G_BUCKET_H

#include "common.h"

/* Tokens are in nanobytes (bytes × 10^9), so that a refill is elapsed ns ×
 * bytes/s, without a division. */
struct token_bucket {
	__u64 rate;   /* bytes per second; 0: no maximum bit rate */
	__u64 burst;  /* bucket size, nanobytes */
	__u64 tokens; /* nanobytes */
	__u64 last;   /* bpf_ktime_get_coarse_ns() of the last refill */
};

/* Refills a bucket for the time since its last refill. The caller keeps
 * other CPUs out of the bucket (a lock, or a bucket per CPU). */
INLINE void bucket_refill(struct token_bucket *b, __u64 now)
{
	/* A CPU that read the clock before another refilled the bucket finds
	 * it refilled already: now - last would wrap to a full second's. */
	__u64 elapsed = now > b->last ? now - b->last : 0;
	if (elapsed > NSEC_PER_SEC) /* keeps elapsed × rate in 64 bits */
		elapsed = NSEC_PER_SEC;
	if (now > b->last)
		b->last = now;
	__u64 tokens = b->tokens + elapsed * b->rate;
	b->tokens = tokens > b->burst ? b->burst : tokens;
}

/* Refills a bucket, then takes len bytes from it if it holds them;
 * returns whether it did. The caller keeps other CPUs out, as above. */
INLINE int bucket_take(struct token_bucket *b, __u64 now, __u32 len)
{
	bucket_refill(b, now);
	__u64 need = (__u64)len * NSEC_PER_SEC;
	int pass = b->tokens >= need;
	if (pass)
		b->tokens -= need;
	return pass;
}

#endif
