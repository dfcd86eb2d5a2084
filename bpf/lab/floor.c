// SPDX-License-Identifier: GPL-2.0
/* The memory floor: XDP_TX plus a chain of dependent reads over a table as
 * large as the UPF's, the least a packet of a session nobody touched
 * recently can cost. The first read's line follows from the packet (the
 * IPv4 destination of a downlink frame, a UE address), each next one from
 * the value the previous read returned, so that no read can start before
 * the one before it ends, as a lookup's bucket, set and rule follow each
 * other. The table is zeroed: what makes a read dependent is that its
 * index waits for the loaded value, not what the value is. */
#include "../lib/common.h"
#include "../lib/eth.h"
#include <linux/ip.h>

char LICENSE[] SEC("license") = "GPL";

/* One cache line, as a PDR is. */
struct line {
	__u32 word[16];
};
_Static_assert(sizeof(struct line) == 64, "a line fills one cache line");

/* Sized and flagged (BPF_F_MMAPABLE or not) by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct line);
	__uint(max_entries, 1);
} lines SEC(".maps");

/* A packet and byte count per line and CPU, a CPU's row after another's,
 * as the UPF counts per PDR: sized lines * CPUs by the control plane. */
struct count {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct count);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
} counts SEC(".maps");

/* The lines of the table, max_entries of lines: read-only, so that the
 * verifier knows it. */
volatile const __u32 line_count = 1;

/* Lines of a 4 KiB page. */
#define PAGE_LINES 64

/* A line spread over the table by Fibonacci hashing and a multiply-shift
 * range reduction: no division on the path. */
INLINE __u32 spread(__u32 x)
{
	return (__u32)(((__u64)(x * 0x9E3779B1u) * line_count) >> 32);
}

/* Reads the line at index, or returns -1. */
INLINE __s64 read_line(__u32 index)
{
	struct line *l = bpf_map_lookup_elem(&lines, &index);
	return l ? l->word[0] : -1;
}

/* The frame's IPv4 destination, or -1 for a frame without one. */
INLINE __s64 frame_key(struct xdp_md *ctx, struct ethhdr **eth)
{
	struct cursor c = {(void *)(long)ctx->data, (void *)(long)ctx->data_end};
	*eth = cursor_take(&c, struct ethhdr);
	struct iphdr *ip = cursor_take(&c, struct iphdr);
	return *eth && ip ? (__s64)bpf_ntohl(ip->daddr) : -1;
}

/* The chain's last value goes into the frame, so that no read is dead; a
 * negative one drops it. */
INLINE int bounce(struct ethhdr *eth, __s64 v)
{
	if (v < 0)
		return XDP_DROP;
	swap_eth(eth);
	eth->h_source[5] ^= (__u8)v;
	return XDP_TX;
}

/* The first read, of the line the frame's address picks (in *first): its
 * value, or -1 for a frame without an IPv4 destination. */
INLINE __s64 first_read(struct xdp_md *ctx, struct ethhdr **eth, __u32 *first)
{
	__s64 key = frame_key(ctx, eth);
	if (key < 0)
		return -1;
	*first = spread(key);
	return read_line(*first);
}

/* The line of a second read anywhere in the table, after the first read's
 * v. */
#define anywhere(first, v) spread((first) + (__u32)(v) + 1)

/* One read: a lookup's single miss. */
SEC("xdp")
int xdp_floor_one(struct xdp_md *ctx)
{
	struct ethhdr *eth;
	__u32 first;
	__s64 v = first_read(ctx, &eth, &first);
	return bounce(eth, v);
}

/* Two reads, the second anywhere in the table: two misses, and a TLB miss
 * each once the table outgrows what the TLB maps. */
SEC("xdp")
int xdp_floor_two(struct xdp_md *ctx)
{
	struct ethhdr *eth;
	__u32 first;
	__s64 v = first_read(ctx, &eth, &first);
	return v < 0 ? XDP_DROP : bounce(eth, read_line(anywhere(first, v)));
}

/* Two reads, the second half a page from the first (another cache line,
 * the same 4 KiB page of the table's, whose lines come in whole pages):
 * what the second miss costs without a second page walk. */
SEC("xdp")
int xdp_floor_two_near(struct xdp_md *ctx)
{
	struct ethhdr *eth;
	__u32 first;
	__s64 v = first_read(ctx, &eth, &first);
	return v < 0 ? XDP_DROP : bounce(eth, read_line(first ^ PAGE_LINES / 2 ^ ((__u32)v & (PAGE_LINES / 2 - 1))));
}

/* Two reads, then a count in the second line's row of this CPU's: what a
 * counter that misses the cache adds when nothing waits for it. */
SEC("xdp")
int xdp_floor_two_count(struct xdp_md *ctx)
{
	struct ethhdr *eth;
	__u32 first;
	__s64 v = first_read(ctx, &eth, &first);
	if (v < 0)
		return XDP_DROP;
	__u32 second = anywhere(first, v);
	__s64 w = read_line(second);
	__u32 row = bpf_get_smp_processor_id() * line_count + second;
	struct count *c = bpf_map_lookup_elem(&counts, &row);
	if (c) {
		c->packets++;
		c->bytes += ctx->data_end - ctx->data;
	}
	return bounce(eth, w);
}
