/* GRE (RFC 2784) with the key and sequence number of RFC 2890. */
#ifndef XDP5G_GRE_H
#define XDP5G_GRE_H

#include "common.h"

#ifndef ETH_P_TEB
#define ETH_P_TEB 0x6558 /* Transparent Ethernet Bridging: an Ethernet payload */
#endif

#define GRE_C 0x8000       /* a checksum and a reserved field follow */
#define GRE_K 0x2000       /* a key follows */
#define GRE_S 0x1000       /* a sequence number follows */
#define GRE_VERSION 0x0007 /* 0 for GRE */

struct gre_hdr {
	__be16 flags;
	__be16 proto; /* EtherType of the payload */
};

#endif
