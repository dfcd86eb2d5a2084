/* The CU-UP classifier's load-time configuration: set by the loader
 * (internal/ran/cuupxdp) for each instance, a constant to the verifier. */
#ifndef XDP5G_CUUP_CONFIG_H
#define XDP5G_CUUP_CONFIG_H

#include "../lib/common.h"
#include "consts.h"

volatile const __u32 role = CUUP_ROLE_N3; /* enum cuup_role */

#endif
