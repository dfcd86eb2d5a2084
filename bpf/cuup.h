/* The CU-UP's XDP classifier (cuup.c): what its maps hold and what it
 * leaves before each packet it hands an AF_XDP socket. bpf2go generates the
 * Go side (internal/cuupxdp). */
#ifndef XDP5G_CUUP_H
#define XDP5G_CUUP_H

#include "common.h"

/* The interface a program instance runs on: which tunnels its TEIDs name
 * and what their packets must carry. */
enum cuup_role {
	CUUP_ROLE_N3 = 1,  /* from the UPF: downlink, PDU Session Container of type DL */
	CUUP_ROLE_F1U = 2, /* from the DU: uplink, maybe an NR RAN Container */
};
#define CUUP_ROLES 2

/* Where a packet ended, counted per role: the names are the Go constants'
 * names too, so keep both lists in this order. */
enum cuup_reason {
	CUUP_REDIRECT,           /* to the AF_XDP socket of its queue */
	CUUP_PASS_NO_SOCKET,     /* ours, but its queue has no socket */
	CUUP_PASS_NOT_IP,        /* neither IPv4 nor IPv6, or a bad IP header */
	CUUP_PASS_FRAGMENT,      /* an IP fragment: the kernel reassembles */
	CUUP_PASS_NOT_GTPU,      /* not a GTPv1-U message on UDP port 2152 */
	CUUP_PASS_SIGNALLING,    /* a GTP-U message other than a G-PDU (echo, end marker...) */
	CUUP_PASS_UNKNOWN_TEID,  /* a G-PDU of a tunnel not in cuup_tunnels */
	CUUP_DROP_BAD_ETH,       /* too short for its Ethernet header and tags, or a bad source */
	CUUP_DROP_MALFORMED,     /* ours: header, extension chain or lengths wrong */
	CUUP_DROP_NO_PSC,        /* ours, on N3: no PDU Session Container */
	CUUP_DROP_PDU_TYPE,      /* ours, on N3: a PDU Session Container not of type DL */
	CUUP_DROP_UNEXPECTED_PSC, /* ours, on F1-U: a PDU Session Container */
	CUUP_DROP_EMPTY,         /* ours: no T-PDU (and on F1-U no NR RAN Container either) */
	CUUP_DROP_NO_META,       /* no room for the metadata */
	CUUP_REASON_COUNT,
};

/* A CU-UP tunnel endpoint: TEIDs are allocated per role. */
struct cuup_tunnel_key {
	__be32 teid; /* as on the wire */
	__u32 role;  /* enum cuup_role */
};

struct cuup_tunnel {
	__u32 bearer; /* user space's index: a PDU session's on N3, a DRB's on F1-U */
};

enum cuup_meta_flags {
	CUUP_META_PSC = 1,    /* a PDU Session Container: qfi and the bits below are its */
	CUUP_META_RQI = 2,    /* its Reflective QoS Indicator */
	CUUP_META_PPP = 4,    /* its Paging Policy Presence */
	CUUP_META_NR_RAN = 8, /* an NR RAN Container: ran_off, ran_len */
};

enum cuup_meta_magic {
	CUUP_META_MAGIC = 0x70757563, /* "cuup" in memory order */
};

/* What xdp_cuup leaves in the XDP metadata, right before the frame, of a
 * packet it redirects: what user space would otherwise parse again. Offsets
 * count from the frame's first octet, numbers are in host order. */
struct cuup_meta {
	__u32 magic;
	__u32 bearer;    /* cuup_tunnel.bearer */
	__u32 teid;
	__u16 tpdu_off;  /* the T-PDU: the user packet (N3) or PDCP PDU (F1-U) */
	__u16 tpdu_len;  /* 0 on F1-U for an NR RAN Container alone */
	__u16 ran_off;   /* NR RAN Container content, when CUUP_META_NR_RAN */
	__u16 ran_len;
	__u16 ip_off;    /* the outer IP header */
	__u16 gtpu_off;  /* the GTP-U header */
	__u8 ip_version; /* of the outer IP header: 4 or 6 */
	__u8 role;       /* enum cuup_role */
	__u8 qfi;        /* when CUUP_META_PSC */
	__u8 flags;      /* enum cuup_meta_flags */
};

#endif
