/* Packet and byte counters (struct counter), in maps of one CPU's values. */
#ifndef XDP5G_COUNTER_H
#define XDP5G_COUNTER_H

#include "common.h"

struct counter {
	__u64 packets;
	__u64 bytes;
};

/* Counts a packet of len bytes at key of a map of struct counter, per
 * CPU or only ever written by one. */
INLINE void count_packet(void *map, const void *key, __u64 len)
{
	struct counter *c = bpf_map_lookup_elem(map, key);
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

#endif
