// SPDX-License-Identifier: GPL-2.0
/* The far end of test traffic: xdp_sink counts what arrives, what matches
 * a filter, the delays of the frames the generator (generator.c) stamped,
 * and keeps a sample. */
#include <stdbool.h>
#include "../lib/parser.h"
#include "trafficgen.h"

char LICENSE[] SEC("license") = "GPL";

/* Sink filter, host byte order, 0 = any. The IP protocol is that of the IPv4
 * header or the IPv6 fixed header (extension headers are not walked); the
 * destination port is that of UDP or TCP, never found in a non-first IPv4
 * fragment. A frame matches when every non-zero field does. */
volatile const __u16 filter_ethertype = 0;
volatile const __u8 filter_ip_proto = 0;
volatile const __u16 filter_dst_port = 0;
/* XDP_PASS instead of XDP_DROP, for a sink in front of the stack. */
volatile const bool sink_pass = false;
/* Where the sink finds a frame's struct stamp; 0: it does not look. */
volatile const __u32 sink_stamp_offset = 0;

struct sink_stats {
	__u64 packets;
	__u64 bytes;
	__u64 match_packets;
	__u64 match_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct sink_stats);
	__uint(max_entries, 1);
} sink_counts SEC(".maps");

/* What the sink saw of each slice's stamped frames, per CPU: the frames
 * of one slice arrive in order on each CPU, so each keeps its own jitter
 * (RFC 3550, section 6.4.1, in ns and times 16). */
struct slice_delay {
	__u64 received;
	__u64 first_sent_ns; /* the earliest send time among them */
	__u64 delay_sum, delay_min, delay_max; /* ns */
	__u64 jitter16;
	__u64 last_transit;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct slice_delay);
	__uint(max_entries, STAMP_SLICES);
} sink_delays SEC(".maps");

INLINE void sink_stamp(struct xdp_md *ctx)
{
	struct stamp st;
	if (bpf_xdp_load_bytes(ctx, sink_stamp_offset, &st, sizeof(st)) || st.magic != STAMP_MAGIC)
		return;
	__u32 slice = st.slice;
	struct slice_delay *d = bpf_map_lookup_elem(&sink_delays, &slice);
	if (!d)
		return;
	__u64 transit = bpf_ktime_get_ns() - st.sent_ns;
	if (d->received) {
		__s64 diff = (__s64)(transit - d->last_transit);
		d->jitter16 += (diff < 0 ? -diff : diff) - ((d->jitter16 + 8) >> 4);
		if (transit < d->delay_min)
			d->delay_min = transit;
		if (transit > d->delay_max)
			d->delay_max = transit;
		if (st.sent_ns < d->first_sent_ns)
			d->first_sent_ns = st.sent_ns;
	} else {
		d->delay_min = d->delay_max = transit;
		d->first_sent_ns = st.sent_ns;
	}
	d->last_transit = transit;
	d->delay_sum += transit;
	d->received++;
}

/* The first matching frame, cut to FRAME_MAX; per CPU so two CPUs never
 * write one copy. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct frame);
	__uint(max_entries, 1);
} sink_sample SEC(".maps");

INLINE bool sink_matches(struct cursor *c)
{
	struct ethhdr *eth;
	__be16 be_proto;
	if (parse_eth(c, &eth, &be_proto))
		return false;
	__u16 proto = bpf_ntohs(be_proto);
	if (filter_ethertype && proto != filter_ethertype)
		return false;
	if (!filter_ip_proto && !filter_dst_port)
		return true;

	__u8 ip_proto;
	bool first_fragment = true;
	if (proto == ETH_P_IP) {
		struct iphdr *ip;
		if (parse_ipv4(c, &ip))
			return false;
		ip_proto = ip->protocol;
		first_fragment = !(ip->frag_off & bpf_htons(IP_OFFSET));
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr *ip6;
		if (parse_ipv6(c, &ip6))
			return false;
		ip_proto = ip6->nexthdr;
	} else {
		return false;
	}
	if (filter_ip_proto && ip_proto != filter_ip_proto)
		return false;
	if (!filter_dst_port)
		return true;
	if ((ip_proto != IPPROTO_UDP && ip_proto != IPPROTO_TCP) || !first_fragment)
		return false;
	/* TCP keeps its destination port at the same offset as UDP. */
	struct udphdr *l4 = cursor_take(c, struct udphdr);
	return l4 && bpf_ntohs(l4->dest) == filter_dst_port;
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct sink_stats *counts = bpf_map_lookup_elem(&sink_counts, &zero);
	struct frame *sample = bpf_map_lookup_elem(&sink_sample, &zero);
	if (!counts || !sample)
		return XDP_ABORTED;

	struct cursor c = { (void *)(long)ctx->data, (void *)(long)ctx->data_end };
	__u64 len = c.end - c.pos;
	counts->packets++;
	counts->bytes += len;
	if (sink_matches(&c)) {
		counts->match_packets++;
		counts->match_bytes += len;
		if (sink_stamp_offset)
			sink_stamp(ctx);
		__u64 copy = len < FRAME_MAX ? len : FRAME_MAX;
		if (!sample->len && copy >= ETH_HLEN && !bpf_xdp_load_bytes(ctx, 0, sample->data, copy))
			sample->len = copy;
	}
	return sink_pass ? XDP_PASS : XDP_DROP;
}
