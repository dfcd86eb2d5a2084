/* The classifier's load-time configuration: set by the loader
 * (internal/classify/classifyxdp), constants to the verifier. */
#ifndef XDP5G_CLASSIFY_CONFIG_H
#define XDP5G_CLASSIFY_CONFIG_H

#include "../lib/common.h"
#include "consts.h"

/* Packets in a CPU's queue from which steered flows leave for an
 * alternative node: non-prioritised ones from backlog_high, prioritised
 * ones from backlog_full; back once it is at backlog_low and they have
 * been away offload_hold_ns. */
volatile const __u64 backlog_high = 1536, backlog_full = 2000, backlog_low = 512;
volatile const __u64 offload_hold_ns = 100000000;

/* The action (enum classify_action) for a fragment whose first fragment
 * was not seen. */
volatile const __u8 orphan_fragment_action = CLASSIFY_PASS;

#endif
