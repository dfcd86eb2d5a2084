/* Constants of the UPF data path. Those the Go side reads are members of
 * named enums: BTF carries them, and bpf2go generates their Go constants
 * (each enum named with -type in internal/upf/upfxdp/gen.go). */
#ifndef XDP5G_UPF_CONSTS_H
#define XDP5G_UPF_CONSTS_H

enum limits {
	MAX_IFACES = 64, /* interface counter slots */
	MAX_GTPU_ADDRS = 8, /* N3 and N9 addresses together */
	PDRS_PER_KEY = 8,
	QERS_PER_PDR = 2, /* free5GC sends a session QER and a flow QER */
	URRS_PER_PDR = 2,
	SDF_PER_PDR = 4,
	SET_WAYS = 2,              /* places of a set_index bucket */
	RECORD_BUCKETS = 2,        /* of set_records a pair holds: a hints' line and a counts' line a pair */
	RECORD_PAIRS = 2,          /* a key's record may be in: its own pair, then the one beside it */
	/* The QER slot whose usage line the packets of an F-TEID read
	 * beside its record: PAIR_USAGE_SLOT plus its pair of set_records'
	 * buckets' number times PAIR_USAGE_SPREAD (odd), within the pairs'
	 * count. One a pair, so that the lines lie as densely as the
	 * sessions' QERs (two a pair measured slower downlink), and apart
	 * from the pair's other lines (at the same place of their pages they
	 * measured slower). The control plane gives it, where it can, to the
	 * QER those packets apply first. */
	PAIR_USAGE_SLOT = 2,
	PAIR_USAGE_SPREAD = 0x5bd1e995,
	BUFFERED_FRAME_MAX = 2048, /* a power of 2; frames are shorter */
	ROUTE_GROUPS = 8192,       /* of routes4_tbl8 */
	NEXTHOP_SLOTS = 1024,      /* of nexthops, and of tunnel6_headers by the same slot */
	/* How much more than a packet needs a CPU takes from a QER's bucket
	 * at once, as a shift of the bucket's size: a sixteenth (2.5 ms of
	 * the rate for the 40 ms the control plane gives a bucket), so that
	 * the CPUs together let at most that much a CPU more through than
	 * the bucket alone would, and take the lock once in many packets.
	 * A new QER gives each CPU that much to start with. */
	QER_CHUNK_SHIFT = 4,
};

enum iface_role {
	ROLE_ACCESS = 1, /* GTP-U in (N3, N9): uplink, and downlink relayed from N9 */
	ROLE_CORE = 2,   /* N6: plain IP in, downlink */
};

enum pdr_flags {
	/* uplink: an IPv4 packet's source is ue[0], an IPv6 one's is in the
	 * /64 ue[0..1], or ue[2..3] with both flags (a dual-stack UE, each
	 * packet held to its own family's); with one flag the other family's
	 * packets never match */
	PDR_MATCH_UE_V4 = 1,
	PDR_MATCH_UE_V6 = 2,
	PDR_MATCH_QFI = 4,   /* uplink: PDU Session Container QFI equals qfi */
	PDR_MARK_QFI = 8,    /* downlink: add a PDU Session Container with qfi */
	PDR_MARK_RQI = 16,   /* downlink: set the container's RQI (reflective QoS) */
	/* found by TEID, yet going to the UE: from the CP function (N4-u), or
	 * from the source gNB to the target one (indirect data forwarding) */
	PDR_TO_UE = 32,
	/* << n: urr[n] measures before QoS enforcement (MBQE): it counts what
	 * the QERs and the FAR then drop too. */
	PDR_URR_BEFORE_QOS = 64,
};
_Static_assert(URRS_PER_PDR <= 2, "a PDR flag for each URR measuring before QoS enforcement");

enum far_action {
	FAR_DROP = 0, /* an unused slot drops */
	FAR_FORWARD = 1,
	/* Downlink packets go to the control plane's buffer (far.buffer)
	 * until it releases the buffer; then the FAR forwards. */
	FAR_BUFFER = 2,
};

enum far_flags {
	FAR_GTPU_IPV4 = 1, /* outer header creation GTP-U/UDP/IPv4 */
	/* GTP-U/UDP/IPv6: the endpoints are in tunnel6_headers, at the slot of the
	 * FAR's next hop (one per peer); peer and local are unused. */
	FAR_GTPU_IPV6 = 2,
	/* DUPL: a copy of each packet goes where the PDR's dupls entry says */
	FAR_DUPLICATE = 4,
	/* towards the CP function (N4-u): a relayed packet's QFI is not kept */
	FAR_TO_CP_FUNCTION = 8,
};
#define FAR_GTPU (FAR_GTPU_IPV4 | FAR_GTPU_IPV6)

/* Next-hop slots that name no next hop. */
enum nexthop_slot {
	KERNEL_SLOT = 0,            /* never valid: the kernel forwards */
	NEXTHOP_ROUTE = 0xffffffff, /* look the inner destination up in the routes */
};

enum sdf_flags {
	SDF_IPV4 = 1,  /* the prefixes are IPv4: IPv6 packets never match */
	SDF_IPV6 = 2,  /* and the other way round; neither: any address */
	SDF_PORTS = 4, /* port ranges apply: packets without ports never match */
};

/* A QER's direction: its bit in gate_closed, its bucket. */
enum qer_dir {
	QER_UL = 0,
	QER_DL = 1,
};

/* Indexes of a URR's counters and limits. */
enum urr_index {
	URR_TOTAL = 0,
	URR_UL = 1,
	URR_DL = 2,
};

enum urr_flags {
	URR_NOTIFY_START = 1, /* an event on the next packet; cleared by the packet that sends it */
	/* << index: the quota's event is sent; cleared when the control plane
	 * writes the limits, so that a quota is reported once. */
	URR_QUOTA_REPORTED = 2,
	/* counted in the shared counters of struct urr, not in the CPUs'
	 * rows: set while it has limits */
	URR_SHARED = 16,
};

/* What a usage line (struct usage_line) says of its QER and its URR. */
enum line_flags {
	LINE_QER_KNOWN = 1, /* the bits of the QER are written */
	LINE_GATE_CLOSED = 2, /* << enum qer_dir */
	LINE_MBR = 8,         /* << enum qer_dir: the bucket has a rate */
	LINE_URR_KNOWN = 32,  /* the bits of the URR are written */
	LINE_URR_NOTIFY_START = 64,
	LINE_URR_SHARED = 128,
	/* the bits above: when the CPU counted its first packet of the URR
	 * since its reset (bpf_ktime_get_coarse_ns() without these bits); 0:
	 * none */
	LINE_FIRST_PACKET = 256,
};

enum urr_event_kind {
	URR_EVENT_THRESHOLD = 1,
	URR_EVENT_QUOTA = 2, /* reached, or first exceeded by a dropped packet */
	URR_EVENT_START = 3,
};

/* What a PDR set is found by. */
enum set_kind {
	/* GTP-U: TEID, network order, and << 32 the index in gtpu_addrs of
	 * the address it was sent to: one TEID value on N3 and on N9 (or on
	 * two N3 addresses) names two sets. */
	SET_TEID = 1,
	SET_UE4 = 2,  /* downlink: UE IPv4 address, network order */
	SET_UE6 = 3,  /* downlink: UE IPv6 /64 prefix, network order */
};

/* A key's bucket in set_index is the top index_bits bits of h * SET_HASH,
 * where h = (key + kind << 56) * SET_HASH folded (h ^ h >> 32): one
 * multiplication alone piles byte-swapped sequential TEIDs and addresses
 * into few buckets. Its set is in one of the bucket's places or in
 * set_overflow, which holds keys of full buckets only: when a place frees
 * up, a key of its bucket in set_overflow moves into it. A place holds
 * the set's slot in its low set_slot_bits bits and, above them, the key's
 * tag: the top bits of the 32 bits of h below the bucket's, so that a
 * packet reads only the set of a place whose tag is its key's. SET_HASH
 * is in halves: BTF holds enum values of 32 bits. */
enum set_hash {
	SET_HASH_HI = 0x9e3779b9,
	SET_HASH_LO = 0x7f4a7c15,
};
#define SET_HASH ((__u64)SET_HASH_HI << 32 | SET_HASH_LO)

/* Which packets of a key its record's PDR copy is for (struct
 * set_record). A key's bucket of set_records, of SET_WAYS records, is
 * the top record_bits bits of the hash its set_index bucket is taken from
 * (enum set_hash); its record is there or, when that bucket is full, in
 * the bucket beside it (the bucket number's lowest bit flipped), or when
 * both are full in the pair beside theirs (the next bit flipped): eight
 * places in one kilobyte of a page. */
enum record_families {
	RECORD_IPV4 = 1,
	RECORD_IPV6 = 2,
};

/* A buffer's state (struct buffer): the packets handed over, and the bit
 * the control plane sets to release it. */
enum buffer_state {
	BUFFER_RELEASED_BIT = 63,
};
#define BUFFER_RELEASED (1ULL << BUFFER_RELEASED_BIT)

/* What struct release_meta begins with. */
enum release_magic {
	RELEASE_MAGIC = 0x78356272, /* "rb5x" */
};

/* What struct dupl_meta and struct mirror_meta begin with. */
enum dupl_magic {
	DUPL_MAGIC = 0x6c707564,   /* "dupl" */
	MIRROR_MAGIC = 0x726d7075, /* "upmr" */
};

/* The entries of a dupl_fanouts devmap: the frame itself, and the copy
 * that xdp_dupl_copy makes of it. */
enum dupl_fanout_key {
	FANOUT_ORIGINAL = 0,
	FANOUT_COPY = 1,
};

/* A routes4_tbl24 value is a next-hop slot below ROUTE_GROUP; ROUTE_GROUP | g
 * sends the /24 to group g of routes4_tbl8 (longer routes lie inside it);
 * ROUTE_LPM (groups exhausted) to the routes4 trie. */
enum route_value {
	ROUTE_GROUP = 0x8000,
	ROUTE_LPM = 0xffff,
};

#endif
