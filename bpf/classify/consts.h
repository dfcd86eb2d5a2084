/* Constants of the classifier and of steering. Those the Go side reads are
 * members of named enums: BTF carries them, and bpf2go generates their Go
 * constants (each enum named with -type in
 * internal/classify/classifyxdp/gen.go). */
#ifndef XDP5G_CLASSIFY_CONSTS_H
#define XDP5G_CLASSIFY_CONSTS_H

enum classify_limits {
	CLASSIFY_MAX_TUNNELS = 4, /* tunnel levels a key records */
	/* The rules, as a tuple space: per distinct mask, an exact-match
	 * table of masked keys. */
	CLASSIFY_MAX_MASKS = 32,
	CLASSIFY_MAX_RULES = 65536,
	/* Rules one packet meets: count and mirror rules, each handing it on
	 * to the next rule below, then one that decides. */
	CLASSIFY_MAX_CHAIN = 4,
	CLASSIFY_MAX_SLICES = 256,
	/* A slice's flows spread over its CPUs by the hash of the innermost
	 * flow and the tunnel ids: bucket (hash % SLICE_BUCKETS) to CPU. */
	SLICE_BUCKETS = 64,
	ALT_MAX = 16, /* alternative nodes */
};

enum tunnel_type {
	TUNNEL_NONE,
	TUNNEL_VXLAN,
	TUNNEL_GENEVE,
	TUNNEL_GRE,
	TUNNEL_GTPU,
};

enum classify_action {
	CLASSIFY_NONE, /* no rule matched */
	CLASSIFY_DROP,
	CLASSIFY_PASS,
	CLASSIFY_MIRROR,
	CLASSIFY_REDIRECT,
	CLASSIFY_STEER,
	CLASSIFY_COUNT,
};

/* The parser's walk through a packet, one step per header group. */
enum classify_next {
	CLASSIFY_NEXT_ETH,  /* an Ethernet header */
	CLASSIFY_NEXT_IP,   /* an IPv4 or IPv6 header */
	CLASSIFY_NEXT_DONE,
};

/* Headers start within this offset: bounds the walk for the verifier. */
#define CLASSIFY_MAX_OFFSET 1024
/* Steps of a walk: Ethernet and IP for each level, and one more of each. */
#define CLASSIFY_MAX_STEPS (2 * (CLASSIFY_MAX_TUNNELS + 1))

/* What the metadata xdp_classify leaves begins with: for xdp_slice_cpu on
 * the CPU it steers a packet to, for tc_classify_mirror on a packet it
 * mirrors. */
#define SLICE_META_MAGIC 0x736c6963      /* "slic" */
#define CLASSIFY_MIRROR_MAGIC 0x6d697272 /* "mirr" */

#endif
