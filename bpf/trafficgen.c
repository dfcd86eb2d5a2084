// SPDX-License-Identifier: GPL-2.0
/* Line-rate test traffic without a NIC. xdp_trafficgen runs under
 * BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES and transmits a frame
 * template out of the interface; xdp_sink counts and samples what arrives at
 * the far end. */
#include <stdbool.h>
#include "common.h"
#include "parser.h"

char LICENSE[] SEC("license") = "GPL";

/* A full-size Ethernet frame, VLAN-tagged. */
#define FRAME_MAX 1518
/* Slices a stamped stream is divided into. */
#define STAMP_SLICES 64

struct frame {
	__u32 len;
	__u8 data[FRAME_MAX];
};

struct gen_config {
	struct frame tmpl;
	/* Offset of a 16-bit big-endian field that cycles through flows
	 * consecutive values from its template value; flows <= 1: fixed. */
	__u32 flow_offset;
	__u32 flows;
	/* Frames still to send. The caller's library runs a test run the
	 * kernel interrupts (Go preempts threads with signals) again whole, so
	 * the program, not the repeat count, keeps the total exact. */
	__s64 budget;
	/* Frames per second from start_ns (bpf_ktime_get_ns), count in all; a
	 * run ahead of that schedule drops instead of sending, so frames leave
	 * evenly spaced rather than in bursts. 0: as fast as it goes. */
	__u64 rate;
	__u64 start_ns;
	__s64 count;
	/* Frames of the schedule given up after the program fell behind it
	 * (CATCH_UP_MAX). */
	__s64 skipped;
	/* When the last of the count frames left (bpf_ktime_get_ns). */
	__u64 last_ns;
	/* Where each frame gets its struct stamp; 0: nowhere. Flow i of the
	 * cycle belongs to slice i / flows_per_slice. */
	__u32 stamp_offset;
	__u32 flows_per_slice;
};

/* What a stamped frame carries for the sink: its slice, its place in the
 * slice's sequence, and when it was sent (bpf_ktime_get_ns). */
#define STAMP_MAGIC 0x78357374 /* "x5st" */
struct stamp {
	__u32 magic;
	__u32 slice;
	__u64 seq;
	__u64 sent_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_config);
} generator SEC(".maps");

/* The most frames a paced send sends at once to catch up with its schedule;
 * further behind, it gives up the rest of the lag. The program falls behind
 * whenever it does not run: between test runs, which cost tens of
 * milliseconds each, or while its CPU serves something else. Catching all of
 * that up at once would be a burst of rate times the gap, thousands of frames,
 * which a veth's 256-frame ring in front of a receiver on another CPU cannot
 * hold; 64 is one NAPI poll's budget, what a receiver that keeps up with the
 * rate takes in one go. */
#define CATCH_UP_MAX 64

/* Frames transmitted, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tx_frames SEC(".maps");

SEC("xdp")
int xdp_trafficgen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct gen_config *cfg = bpf_map_lookup_elem(&generator, &zero);
	__u64 *transmitted = bpf_map_lookup_elem(&tx_frames, &zero);
	if (!cfg || !transmitted)
		return XDP_ABORTED;
	if (cfg->rate) {
		__s64 due = (bpf_ktime_get_ns() - cfg->start_ns) * cfg->rate / 1000000000 - cfg->skipped;
		__s64 behind = due - (cfg->count - cfg->budget);
		if (behind <= 0)
			return XDP_DROP;
		if (behind > CATCH_UP_MAX)
			__sync_fetch_and_add(&cfg->skipped, behind - CATCH_UP_MAX);
	}
	__s64 left = __sync_fetch_and_add(&cfg->budget, -1);
	if (left <= 0)
		return XDP_DROP;
	/* The frame's number in the send, 0 on: its flow and its place in its
	 * slice follow from it, whichever CPU sends it. */
	__u64 frame = cfg->count - left;
	__u32 flows = cfg->flows ?: 1, per_slice = cfg->flows_per_slice ?: 1;
	__u32 flow = frame % flows;

	/* Live-frame pages are recycled with whatever the receiver left in
	 * them: write the whole frame every time. */
	__u32 len = cfg->tmpl.len;
	if (len < ETH_HLEN || len > FRAME_MAX)
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, cfg->tmpl.data, len))
		return XDP_ABORTED;

	if (flows > 1) {
		__u32 off = cfg->flow_offset;
		if (off > FRAME_MAX - 2)
			return XDP_ABORTED;
		__u16 first = (cfg->tmpl.data[off] << 8) | cfg->tmpl.data[off + 1];
		__be16 value = bpf_htons(first + flow);
		if (bpf_xdp_store_bytes(ctx, off, &value, sizeof(value)))
			return XDP_ABORTED;
	}
	if (cfg->stamp_offset) {
		struct stamp st = {
			.magic = STAMP_MAGIC,
			.slice = flow / per_slice,
			.seq = frame / flows * per_slice + flow % per_slice,
			.sent_ns = bpf_ktime_get_ns(),
		};
		if (bpf_xdp_store_bytes(ctx, cfg->stamp_offset, &st, sizeof(st)))
			return XDP_ABORTED;
	}
	if (frame == cfg->count - 1)
		cfg->last_ns = bpf_ktime_get_ns();
	*transmitted += 1;
	return XDP_TX;
}

/* Sink filter, host byte order, 0 = any. The IP protocol is that of the IPv4
 * header or the IPv6 fixed header (extension headers are not walked); the
 * destination port is that of UDP or TCP, never found in a non-first IPv4
 * fragment. A frame matches when every non-zero field does. */
volatile const __u16 filter_ethertype = 0;
volatile const __u8 filter_ip_proto = 0;
volatile const __u16 filter_dst_port = 0;
/* XDP_PASS instead of XDP_DROP, for a sink in front of the stack. */
volatile const bool sink_pass = false;

struct sink_stats {
	__u64 packets;
	__u64 bytes;
	__u64 match_packets;
	__u64 match_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_stats);
} sink_counts SEC(".maps");

/* Where the sink finds a frame's struct stamp; 0: it does not look. */
volatile const __u32 sink_stamp_offset = 0;

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
	__uint(max_entries, STAMP_SLICES);
	__type(key, __u32);
	__type(value, struct slice_delay);
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
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frame);
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
		struct iphdr *ip = parse_ipv4(c);
		if (!ip)
			return false;
		ip_proto = ip->protocol;
		first_fragment = !(ip->frag_off & bpf_htons(IP_OFFSET));
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr *ip6 = parse_ipv6(c);
		if (!ip6)
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
