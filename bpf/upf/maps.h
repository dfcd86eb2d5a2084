/* Every map of the UPF data path, defined once and pinned by name so that a
 * restarted daemon finds the sessions where it left them. The control plane
 * sizes them at load time. */
#ifndef XDP5G_UPF_MAPS_H
#define XDP5G_UPF_MAPS_H

#include "../lib/counter.h"
#include "reasons.h"
#include "structs.h"

/* An array the control plane sizes at load time and writes or reads
 * through mmap, pinned by name. */
#define MMAP_ARRAY(value_type)                       \
	struct {                                            \
		__uint(type, BPF_MAP_TYPE_ARRAY);           \
		__type(key, __u32);                         \
		__type(value, value_type);                  \
		__uint(max_entries, 1);                     \
		__uint(map_flags, BPF_F_MMAPABLE);          \
		__uint(pinning, LIBBPF_PIN_BY_NAME);        \
	}

/* Sessions are found by TEID (uplink) or UE address (downlink) in a hash
 * table of buckets: set_index holds slots of pdr_sets, and a packet reads
 * one bucket (SET_WAYS sets) before set_overflow. Two array reads cost a few ns
 * where a hash lookup costs ~25. The control plane writes both arrays
 * through mmap: a set before the index entry that publishes it, the entry
 * in one aligned 32-bit store. Slot 0 is never used: an empty place. */
MMAP_ARRAY(struct pdr_set) pdr_sets SEC(".maps");

MMAP_ARRAY(struct set_bucket) set_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct set_key);
	__type(value, __u32); /* slot in pdr_sets */
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} set_overflow SEC(".maps");

/* The records of the keys whose common case a PDR copy serves (struct
 * set_record), in front of set_index: a bucket of SET_WAYS records, 256
 * bytes, per key hash. Written by the control plane through mmap. */
MMAP_ARRAY(struct set_record) set_records SEC(".maps");

/* By pair of set_records' buckets, what the packets of their records'
 * keys read next (struct record_hints): a packet starts those reads
 * before it has found its record, so that their misses overlap the
 * record's. Written by the control plane through mmap. */
MMAP_ARRAY(struct record_hints) record_hints SEC(".maps");

/* By CPU and pair of set_records' buckets, what the packets its records
 * served counted (struct place_counts): a row of pairs per CPU, written
 * only by that CPU. The control plane adds a place's counts to its
 * record's PDR, and moves them into folded_counts once no packet may
 * count there any more. */
MMAP_ARRAY(struct place_counts) place_counts SEC(".maps");

/* By PDR slot, what the control plane adds to its counts: what its
 * records' places counted before they were taken away, and what it
 * counted in another slot before its session was modified. Written only
 * by the control plane, kept across restarts. */
MMAP_ARRAY(struct counter) folded_counts SEC(".maps");

MMAP_ARRAY(struct pdr) pdrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct qer);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} qers SEC(".maps");

MMAP_ARRAY(struct urr) urrs SEC(".maps");

/* The CPUs' usage lines (struct usage_line): a row of pdr_slots (as many
 * as QER and URR slots) per CPU, written by the packets only of that CPU
 * (upf.c, enforce_qers and count_urrs). */
MMAP_ARRAY(struct usage_line) usage_lines SEC(".maps");

/* What the URRs without limits counted (struct urr_count) under a build
 * that counted here, not in usage_lines: a row of pdr_slots per CPU,
 * which the control plane adds to their usage. */
MMAP_ARRAY(struct urr_count) urr_counts SEC(".maps");

/* struct urr_event records, read by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} urr_events SEC(".maps");

/* Events urr_events had no room for: the control plane, seeing it grow,
 * reads every URR instead. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} urr_events_lost SEC(".maps");

/* Downlink buffers (far.buffer), written by the control plane through mmap. */
MMAP_ARRAY(struct buffer) buffers SEC(".maps");

/* struct buffered_packet records: the frames buffering FARs hold, in the
 * order they came, read by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} buffered_packets SEC(".maps");

/* The SDF filters of the PDRs that have any (pdr.sdf). */
MMAP_ARRAY(struct sdf_set) sdf_sets SEC(".maps");

/* Packets and bytes each PDR matched: a row of pdr_slots counters per CPU,
 * written only by that CPU (upf.c, count_pdr). */
MMAP_ARRAY(struct counter) pdr_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct nexthop);
	__uint(max_entries, NEXTHOP_SLOTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} nexthops SEC(".maps");

/* The IPv6 tunnel endpoints of FARs, by the slot of their next hop (in
 * nexthops): as many, ready for the IPv6 header. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct tunnel6_header);
	__uint(max_entries, NEXTHOP_SLOTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} tunnel6_headers SEC(".maps");

/* The IPv4 routes flattened DIR-24-8 style: one value per /24, and for the
 * /24s that hold longer routes one value per address in a group of
 * routes4_tbl8. Two array reads cost a few ns where the trie walk costs ~60.
 * 32 MiB + 4 MiB, written by the control plane through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32); /* destination >> 10 */
	__type(value, struct route_quad);
	__uint(max_entries, 1 << 22);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes4_tbl24 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32); /* group << 6 | (destination & 0xff) >> 2 */
	__type(value, struct route_quad);
	__uint(max_entries, ROUTE_GROUPS * 64);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes4_tbl8 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct route4_key);
	__type(value, __u32); /* slot in nexthops */
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct route6_key);
	__type(value, __u32);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes6 SEC(".maps");

/* The Duplicating Parameters of the PDRs whose FAR duplicates (pdr.far
 * flag FAR_DUPLICATE), by PDR slot: few PDRs have one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct dupl);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dupls SEC(".maps");

/* XDP cannot copy a frame, a devmap broadcast can: one devmap per pair of
 * interfaces, keyed copy ifindex << 32 | original ifindex, whose two
 * entries send the frame out of the original's interface and a copy, which
 * the entry's xdp_dupl_copy makes, out of the copy's. */
struct dupl_fanout {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(key_size, sizeof(__u32)); /* enum dupl_fanout_key */
	__uint(value_size, sizeof(struct bpf_devmap_val));
	__uint(max_entries, 2);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u64);
	__type(value, __u32);
	__uint(max_entries, MAX_IFACES * MAX_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct dupl_fanout);
} dupl_fanouts SEC(".maps");

/* Which interface owns each counter slot: control-plane state kept in the
 * kernel so that a restarted daemon finds the same slots. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct iface);
	__uint(max_entries, MAX_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ifaces SEC(".maps");

/* By interface slot, a CPU's copy of the PDR its packet takes from its
 * PDR set, when its record does not serve it (struct iface_cpu_line): the
 * stack has no room for it beside the frames of the calls. One a CPU
 * serves: every run of the program, in NAPI, the CPU map or a test run,
 * has bottom halves off, so no other starts on its CPU before it ends. Pinned for the forwarded packets it
 * counts; the copies in it are scratch. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct iface_cpu_line);
	__uint(max_entries, MAX_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} iface_cpu_lines SEC(".maps");

/* The lines of builds that counted only the uplink beside the copy
 * (struct iface_line): no program writes them, the control plane adds
 * what they counted. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct iface_line);
	__uint(max_entries, MAX_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} iface_lines SEC(".maps");

/* By interface slot: the packets of installed keys that no record served
 * (taken through their PDR set), when there are records. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, MAX_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cold_packets SEC(".maps");

/* One entry, each CPU's own: shared by the interfaces, so that a CPU
 * passes at most error_indication_rate a second in all. A map of its own,
 * so that iface_counters keeps the layout of builds before it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct unknown_teid_window);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} unknown_teid_windows SEC(".maps");

/* Index: interface slot * REASON_COUNT + reason; REASON_UPLINK_FORWARD,
 * REASON_DOWNLINK_FORWARD and REASON_RELAY_FORWARD add their slot's
 * counts in iface_cpu_lines (and iface_lines). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counter);
	__uint(max_entries, MAX_IFACES * REASON_COUNT);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} iface_counters SEC(".maps");

#endif
