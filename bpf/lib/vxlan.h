/* VXLAN (RFC 7348). */
#ifndef XDP5G_VXLAN_H
#define XDP5G_VXLAN_H

#include "common.h"

#define VXLAN_PORT 4789
#define VXLAN_FLAG_I 0x08 /* the VNI is valid */

struct vxlan_hdr {
	__u8 flags;
	__u8 reserved1[3];
	__u8 vni[3];
	__u8 reserved2;
}; /* then an Ethernet frame */

#endif
