/* Every map of the CU-UP's classifier, sized by the loader. */
#ifndef XDP5G_CUUP_MAPS_H
#define XDP5G_CUUP_MAPS_H

#include "../lib/counter.h"
#include "reasons.h"
#include "structs.h"

/* The CU-UP's tunnel endpoints, sized at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct cuup_tunnel_key);
	__type(value, struct cuup_tunnel);
	__uint(max_entries, 1);
} cuup_tunnels SEC(".maps");

/* The AF_XDP socket of each receive queue of the interface: one map per
 * instance (a socket takes its own interface's packets only), sized at
 * load time. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cuup_xsks SEC(".maps");

/* Index: (role - 1) * CUUP_REASON_COUNT + reason. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, CUUP_ROLES * CUUP_REASON_COUNT);
} cuup_counters SEC(".maps");

#endif
