/* Where a packet ended, counted per interface (iface_counters). The Go
 * side names each one (upfxdp.ReasonNames, the name in lower case without
 * REASON_); a test fails when the two lists differ. */
#ifndef XDP5G_UPF_REASONS_H
#define XDP5G_UPF_REASONS_H

enum reason {
	REASON_UPLINK_FORWARD,
	REASON_DOWNLINK_FORWARD,
	REASON_ECHO_RESPONSE,
	REASON_DROP_MALFORMED,
	/* A G-PDU to an unknown TEID, not forwarded: dropped, or, up to
	 * error_indication_rate per CPU a second, passed to the GTP-U endpoint
	 * for an Error Indication (and counted in unknown_teid_windows too).
	 * One reason for both keeps iface_counters' layout. */
	REASON_DROP_UNKNOWN_TEID,
	REASON_DROP_NO_PDR,
	REASON_DROP_FAR,
	REASON_DROP_NO_NEXTHOP,
	REASON_DROP_TTL,
	REASON_DROP_INTERNAL,
	REASON_DROP_QER_GATE,
	REASON_DROP_QER_MBR,
	REASON_DROP_URR_QUOTA,
	REASON_BUFFERED,
	REASON_DROP_BUFFER_FULL,
	REASON_PASS_NOT_IP,
	REASON_PASS_NOT_OURS,
	REASON_PASS_GTP_SIGNALLING,
	REASON_PASS_FRAGMENT,
	REASON_PASS_NO_ROUTE,
	REASON_PASS_TTL,
	REASON_RELAY_FORWARD, /* GTP-U to GTP-U, between the gNB and the CP function */
	/* Counted besides where the packet itself ended: a copy a DUPL FAR
	 * sent, or could not (no next hop or fanout for it yet). */
	REASON_DUPLICATE,
	REASON_DROP_DUPLICATE,
	REASON_COUNT,
};

#endif
