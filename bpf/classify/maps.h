/* Every map of the classifier and of steering, created by the loader (none
 * is pinned). */
#ifndef XDP5G_CLASSIFY_MAPS_H
#define XDP5G_CLASSIFY_MAPS_H

#include "../lib/bucket.h"
#include "../lib/counter.h"
#include "structs.h"

/* The parser's walk, per CPU: too large for the stack of the steps. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct classify_state);
	__uint(max_entries, 1);
} classify_walk SEC(".maps");

/* The epoch: its low bit names the half of the rules packets use. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} classify_epoch SEC(".maps");

/* The masks of each half. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct classify_half);
	__uint(max_entries, 2);
} classify_masks SEC(".maps");

/* Every (half, mask, level, masked key) that some rule has: its rule of
 * that level (struct classify_entry_key). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct classify_entry_key);
	__type(value, struct classify_verdict);
	__uint(max_entries, 4 * CLASSIFY_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} classify_entries SEC(".maps");

/* Outcomes of the keys seen lately, per CPU, by key_type. */
#define FLOW_CACHE(key_type)                                 \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);         \
		__type(key, key_type);                       \
		__type(value, struct classify_cached);       \
		__uint(max_entries, 65536);                  \
		__uint(map_flags, BPF_F_NO_COMMON_LRU);      \
	}

FLOW_CACHE(struct classify_key) classify_cache SEC(".maps");
/* The keys whose addresses are all IPv4, by their struct classify_key4. */
FLOW_CACHE(struct classify_key4) classify_cache4 SEC(".maps");

#undef FLOW_CACHE

/* The outcomes of first fragments, for the fragments that follow. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct classify_frag_id);
	__type(value, struct classify_outcome);
	__uint(max_entries, 16384);
} classify_frags SEC(".maps");

/* Where the rules that redirect send packets, those that mirror the
 * copies, and those that steer the CPU, per rule slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct classify_egress);
	__uint(max_entries, CLASSIFY_MAX_RULES + 1);
} classify_targets SEC(".maps");

/* Packets and bytes per rule slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, CLASSIFY_MAX_RULES + 1);
} classify_counters SEC(".maps");

/* Steering's (steer.h). */

/* The slices: each one's CPU per hash bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct slice);
	__uint(max_entries, CLASSIFY_MAX_SLICES);
} slices SEC(".maps");

/* The CPUs of the slices, by number: each one's queue and xdp_slice_cpu,
 * filled as slices need them. Sized to the possible CPUs at load. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(max_entries, 1);
} slice_cpus SEC(".maps");

/* slice_cpus's map ID, for the tracepoint to know its own map. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} slice_cpus_id SEC(".maps");

/* Each CPU's queue: what went in, came out, was dropped. Sized to the
 * possible CPUs at load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_load);
	__uint(max_entries, 1);
} cpu_loads SEC(".maps");

/* Per slice, what each CPU took of it (per-CPU values: the CPU's own). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, CLASSIFY_MAX_SLICES);
} slice_cpu_counters SEC(".maps");

/* Per slice, each CPU's token bucket for the slice's rate: per CPU, so no
 * lock; each receiving CPU lets the rate through. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct token_bucket);
	__uint(max_entries, CLASSIFY_MAX_SLICES);
} slice_buckets SEC(".maps");

/* Per slice, what its rate dropped. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, CLASSIFY_MAX_SLICES);
} slice_policed SEC(".maps");

/* Per slice, what went to alternative nodes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, CLASSIFY_MAX_SLICES);
} slice_offloaded SEC(".maps");

/* Per flow hash, what each CPU took of the flow, for the flows seen
 * lately. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, 65536);
} flow_cpu_counters SEC(".maps");

/* The prioritised flows (the paper's prio-map), by flow hash. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct prio_flow);
	__uint(max_entries, 4096);
} prio_flows SEC(".maps");

/* Where each flow seen lately goes: local or offloaded, and since when. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct flow_route);
	__uint(max_entries, 65536);
} flow_routes SEC(".maps");

/* The alternative nodes (the paper's alt-map). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct alt_nodes);
	__uint(max_entries, 1);
} alternatives SEC(".maps");

#endif
