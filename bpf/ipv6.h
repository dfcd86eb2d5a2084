/* IPv6 fixed header and extension headers. */
#ifndef XDP5G_IPV6_H
#define XDP5G_IPV6_H

#include "common.h"
#include <linux/ipv6.h>

/* The /64 prefix of an address: what a UE owns (TS 23.501 5.8.2.2.2). */
INLINE __u64 ipv6_prefix64(const struct in6_addr *a)
{
	__u64 p;
	__builtin_memcpy(&p, a, sizeof(p));
	return p;
}

/* Extension headers skipped to find the upper-layer header; a longer chain
 * is left unparsed. */
#define IPV6_MAX_EXT 4
#define IPV6_FRAG_OFFSET 0xfff8 /* of the Fragment header's octets 2-3 */
#define IPV6_FRAG_MORE 0x0001   /* M: more fragments follow */

/* Skips the extension headers that precede the upper-layer header (RFC
 * 8200 4.1; AH and ESP are upper layers to an SDF filter), leaving *pos at
 * that header and *proto its number. Returns 1 for a fragment other than
 * the first, whose upper-layer header is in another packet; *frag, when
 * frag is not NULL, is the Fragment header met, else NULL. A chain cut
 * short or too long leaves *proto at an extension header. */
INLINE int ipv6_skip_ext(__u8 **pos, __u8 *proto, void *end, __u8 **frag)
{
	if (frag)
		*frag = NULL;
	for (int i = 0; i < IPV6_MAX_EXT; i++) {
		__u8 *h = *pos;
		__u8 type = *proto;
		if (type != IPPROTO_HOPOPTS && type != IPPROTO_ROUTING && type != IPPROTO_DSTOPTS &&
		    type != IPPROTO_FRAGMENT)
			return 0;
		if ((void *)(h + 8) > end) /* every extension header has 8 bytes or more */
			return 0;
		*proto = h[0];
		if (type == IPPROTO_FRAGMENT) {
			if (frag)
				*frag = h;
			if ((h[2] << 8 | h[3]) & IPV6_FRAG_OFFSET)
				return 1;
			*pos = h + 8;
		} else {
			*pos = h + ((__u32)h[1] + 1) * 8;
		}
	}
	return 0;
}

#endif
