/* Ethernet and 802.1Q: tags, and the headers the programs write. */
#ifndef XDP5G_ETH_H
#define XDP5G_ETH_H

#include "common.h"

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

#define ETH_HLEN_VLAN (ETH_HLEN + sizeof(struct vlan_hdr))

/* Writes an Ethernet header (tagged when tci != 0) at p, which must hold
 * ETH_HLEN_VLAN bytes when tagged and ETH_HLEN otherwise. */
INLINE void write_eth(void *p, const __u8 *dst, const __u8 *src, __be16 tci, __be16 proto)
{
	struct ethhdr *e = p;
	__builtin_memcpy(e->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(e->h_source, src, ETH_ALEN);
	if (tci) {
		struct vlan_hdr *v = (void *)(e + 1);
		e->h_proto = bpf_htons(ETH_P_8021Q);
		v->tci = tci;
		v->proto = proto;
	} else {
		e->h_proto = proto;
	}
}

INLINE void swap_eth(struct ethhdr *e)
{
	__u8 tmp[ETH_ALEN];
	__builtin_memcpy(tmp, e->h_dest, ETH_ALEN);
	__builtin_memcpy(e->h_dest, e->h_source, ETH_ALEN);
	__builtin_memcpy(e->h_source, tmp, ETH_ALEN);
}

#endif
