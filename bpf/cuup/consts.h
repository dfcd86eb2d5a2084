/* Constants of the CU-UP's classifier. Those the Go side reads are members
 * of named enums: BTF carries them, and bpf2go generates their Go constants
 * (each enum named with -type in internal/ran/cuupxdp/gen.go). */
#ifndef XDP5G_CUUP_CONSTS_H
#define XDP5G_CUUP_CONSTS_H

/* The interface a program instance runs on: which tunnels its TEIDs name
 * and what their packets must carry. */
enum cuup_role {
	CUUP_ROLE_N3 = 1,  /* from the UPF: downlink, PDU Session Container of type DL */
	CUUP_ROLE_F1U = 2, /* from the DU: uplink, maybe an NR RAN Container */
	CUUP_ROLES = 2,    /* the roles are 1 to CUUP_ROLES */
};

/* Bits of cuup_meta.flags. */
enum cuup_meta_flags {
	CUUP_META_PSC = 1,    /* a PDU Session Container: qfi and the bits below are its */
	CUUP_META_RQI = 2,    /* its Reflective QoS Indicator */
	CUUP_META_PPP = 4,    /* its Paging Policy Presence */
	CUUP_META_NR_RAN = 8, /* an NR RAN Container: ran_off, ran_len */
};

/* What struct cuup_meta begins with. */
enum cuup_meta_magic {
	CUUP_META_MAGIC = 0x70757563, /* "cuup" in memory order */
};

#endif
