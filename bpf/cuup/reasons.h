/* Where a packet ended, counted per role (cuup_counters). The Go side
 * names each one (cuupxdp.Reason's String, the name in lower case without
 * CUUP_); a test fails when the two lists differ. */
#ifndef XDP5G_CUUP_REASONS_H
#define XDP5G_CUUP_REASONS_H

enum cuup_reason {
	CUUP_REDIRECT,            /* to the AF_XDP socket of its queue */
	CUUP_PASS_NO_SOCKET,      /* ours, but its queue has no socket */
	CUUP_PASS_NOT_IP,         /* neither IPv4 nor IPv6, or a bad IP header */
	CUUP_PASS_FRAGMENT,       /* an IP fragment: the kernel reassembles */
	CUUP_PASS_NOT_GTPU,       /* not a GTPv1-U message on UDP port 2152 */
	CUUP_PASS_SIGNALLING,     /* a GTP-U message other than a G-PDU (echo, end marker...) */
	CUUP_PASS_UNKNOWN_TEID,   /* a G-PDU of a tunnel not in cuup_tunnels */
	CUUP_DROP_BAD_ETHERNET,   /* too short for its Ethernet header and tags, or a bad source */
	CUUP_DROP_MALFORMED,      /* ours: header, extension chain or lengths wrong */
	CUUP_DROP_NO_PSC,         /* ours, on N3: no PDU Session Container */
	CUUP_DROP_PDU_TYPE,       /* ours, on N3: a PDU Session Container not of type DL */
	CUUP_DROP_UNEXPECTED_PSC, /* ours, on F1-U: a PDU Session Container */
	CUUP_DROP_EMPTY,          /* ours: no T-PDU (and on F1-U no NR RAN Container either) */
	CUUP_DROP_NO_META,        /* no room for the metadata */
	CUUP_REASON_COUNT,
};

#endif
