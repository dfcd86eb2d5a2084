// SPDX-License-Identifier: GPL-2.0
/* Line-rate test traffic without a NIC: xdp_trafficgen runs under
 * BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES and transmits a frame
 * template out of the interface, for the sink (sink.c) at the far end. */
#include "trafficgen.h"

char LICENSE[] SEC("license") = "GPL";

/* What only the Go side reads, put into BTF for bpf2go (-type in
 * internal/platform/trafficgen/gen.go). */
const struct generator_exports {
	enum limits limits;
	struct stamp stamp;
} generator_exports __attribute__((unused)) = {};

struct gen_config {
	struct frame tmpl;
	/* Offset of a 16-bit big-endian field that cycles through flows
	 * consecutive values from its template value; flows <= 1: fixed. */
	__u32 flow_offset;
	__u32 flows;
	/* A second such field that cycles with the first, each from its own
	 * template value; 0: none. */
	__u32 flow_offset2;
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
	/* Frame n has flow n * flow_stride % flows (sharing no factor with
	 * flows); 0: n % flows, the flows in turn. */
	__u32 flow_stride;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct gen_config);
	__uint(max_entries, 1);
} generator SEC(".maps");

/* Frames transmitted, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
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
	__u32 flow = frame % flows * (cfg->flow_stride ?: 1) % flows;

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
		off = cfg->flow_offset2;
		if (off) {
			if (off > FRAME_MAX - 2)
				return XDP_ABORTED;
			first = (cfg->tmpl.data[off] << 8) | cfg->tmpl.data[off + 1];
			value = bpf_htons(first + flow);
			if (bpf_xdp_store_bytes(ctx, off, &value, sizeof(value)))
				return XDP_ABORTED;
		}
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

