/* GENEVE (RFC 8926). */
#ifndef XDP5G_GENEVE_H
#define XDP5G_GENEVE_H

#include "common.h"

#define GENEVE_PORT 6081

struct geneve_hdr {
	__u8 ver_opt_len; /* version (2 bits, 0), options length (6 bits, in 4 octets) */
	__u8 flags;
	__be16 proto; /* EtherType of the payload; ETH_P_TEB for Ethernet */
	__u8 vni[3];
	__u8 reserved;
}; /* then the options, then the payload */

#define GENEVE_VERSION(h) ((h)->ver_opt_len >> 6)
#define GENEVE_OPT_LEN(h) (((h)->ver_opt_len & 0x3f) * 4)

#endif
