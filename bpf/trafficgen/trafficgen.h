/* What the traffic generator (generator.c) and the sink (sink.c) share:
 * the frames, and the stamp a generated frame may carry to the sink. */
#ifndef XDP5G_TRAFFICGEN_H
#define XDP5G_TRAFFICGEN_H

#include "../lib/common.h"

/* Sizes the Go side reads (bpf2go -type limits). */
enum limits {
	FRAME_MAX = 1518,  /* a full-size Ethernet frame, VLAN-tagged */
	STAMP_SLICES = 64, /* slices a stamped stream is divided into */
	/* The most frames a paced send sends at once to catch up with its
	 * schedule; further behind, it gives up the rest of the lag. The
	 * program falls behind whenever it does not run: between test runs,
	 * which cost tens of milliseconds each, or while its CPU serves
	 * something else. Catching all of that up at once would be a burst of
	 * rate times the gap, thousands of frames, which a veth's 256-frame
	 * ring in front of a receiver on another CPU cannot hold; 64 is one
	 * NAPI poll's budget, what a receiver that keeps up with the rate
	 * takes in one go. */
	CATCH_UP_MAX = 64,
};

struct frame {
	__u32 len;
	__u8 data[FRAME_MAX];
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

#endif
