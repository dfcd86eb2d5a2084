/* The UPF program's load-time configuration: set by the loader
 * (internal/upf/upfxdp) for each interface, constants to the verifier. */
#ifndef XDP5G_UPF_CONFIG_H
#define XDP5G_UPF_CONFIG_H

#include "../lib/common.h"
#include "consts.h"

volatile const __u32 iface_slot = 0;
volatile const __u32 iface_roles = 0; /* enum iface_role bits */
/* The GTP-U addresses, N3's then N9's, IPv4 in gtpu_addrs and IPv6 (in
 * words) in gtpu_addrs6 at the same index, the other family's place zero:
 * a G-PDU's TEID is looked up with the index of the address it was sent
 * to (set_kind SET_TEID). */
volatile const __be32 gtpu_addrs[MAX_GTPU_ADDRS] = {};
volatile const __be32 gtpu_addrs6[MAX_GTPU_ADDRS][4] = {};
/* Bit i set: gtpu_addrs6[i] is an address. Known to the verifier, it
 * removes the comparisons with the places that hold none. */
volatile const __u32 gtpu_addrs6_set = 0;
volatile const __u32 index_bits = 1; /* set_index has 1 << index_bits buckets */
volatile const __u32 set_slot_bits = 31; /* of a set_index place, the slot's (enum set_hash) */
/* set_records has 1 << record_bits buckets; 0: no records, every packet
 * finds its PDRs in its set (records are written on x86-64 only, whose
 * loads keep their order: see find_record). */
volatile const __u32 record_bits = 0;
/* 1: find_record starts the reads its key's hint names (record_hints),
 * for tables that outgrow the caches; 0: the verifier removes that code,
 * which costs a data path whose tables stay cached a few ns a packet. */
volatile const __u32 read_ahead = 0;
/* entries of pdrs, qers and urrs: the length of a CPU's row of
 * pdr_counters, usage_lines and urr_counts */
volatile const __u32 pdr_slots = 1;
/* G-PDUs to an unknown TEID each CPU passes to the kernel a second, for
 * the GTP-U endpoint to answer with an Error Indication; the others are
 * dropped. 0: all are. */
volatile const __u32 error_indication_rate = 0;

#endif
