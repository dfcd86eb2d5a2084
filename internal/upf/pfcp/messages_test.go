package pfcp

// Messages the test SMF sends, encoded by hand after TS 29.244: the
// message header of §7.2.2 and the IEs of §8.1.1 (Type, Length counting the
// octets after itself, Value) and §8.2. A header's length field counts the
// octets after its first four.

// smfNodeID is a Node ID IE (§8.2.38): the FQDN smf.example.
var smfNodeID = []byte{
	0x00, 0x3c, // type 60: Node ID
	0x00, 0x0d, // length 13
	0x02,                // spare, Node ID type 2: FQDN
	0x03, 's', 'm', 'f', // label "smf"
	0x07, 'e', 'x', 'a', 'm', 'p', 'l', 'e', // label "example"
}

// smfRecovery and smfRecoveryAfterRestart are Recovery Time Stamp IEs
// (§8.2.65): seconds since 1900.
var (
	smfRecovery = []byte{
		0x00, 0x60, // type 96: Recovery Time Stamp
		0x00, 0x04, // length 4
		0xe8, 0x00, 0x00, 0x01, // 3892314113 s: 2023-05-05T22:21:53Z
	}
	smfRecoveryAfterRestart = []byte{
		0x00, 0x60, // type 96: Recovery Time Stamp
		0x00, 0x04, // length 4
		0xe8, 0x00, 0x01, 0x00, // 255 s later
	}
)

// heartbeatRequest is a Heartbeat Request (§7.4.2.1) with a Recovery Time
// Stamp IE.
func heartbeatRequest(seq byte, recovery []byte) []byte {
	return cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x01,       // message type 1: Heartbeat Request
		0x00, 0x0c, // length 12: 4 (sequence number, spare) + 8 (Recovery Time Stamp)
		0x00, 0x00, seq, // sequence number
		0x00, // spare
	}, recovery)
}

// heartbeatWithoutRecovery is a Heartbeat Request missing its mandatory
// Recovery Time Stamp.
var heartbeatWithoutRecovery = []byte{
	0x20,       // version 1; FO, MP and S flags clear
	0x01,       // message type 1: Heartbeat Request
	0x00, 0x04, // length 4: sequence number, spare
	0x00, 0x00, 0x07, // sequence number 7
	0x00, // spare
}

// associationSetupRequest is an Association Setup Request (§7.4.4.1) from
// smf.example.
func associationSetupRequest(seq byte, recovery []byte) []byte {
	return cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x05,       // message type 5: Association Setup Request
		0x00, 0x1d, // length 29: 4 (sequence number, spare) + 17 (Node ID) + 8 (Recovery Time Stamp)
		0x00, 0x00, seq, // sequence number
		0x00, // spare
	}, smfNodeID, recovery)
}

// associationSetupRetaining is an Association Setup Request from
// smf.example, restarted, with PFCP Session Retention Information
// (§7.4.4.1-2): keep the sessions established with its CP PFCP entity
// 192.0.2.30.
func associationSetupRetaining(seq byte) []byte {
	return cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x05,       // message type 5: Association Setup Request
		0x00, 0x2a, // length 42: 4 (sequence number, spare) + 17 (Node ID) + 8 (Recovery Time Stamp) + 13 (retention)
		0x00, 0x00, seq, // sequence number
		0x00, // spare
	}, smfNodeID, smfRecoveryAfterRestart, []byte{
		0x00, 0xb7, // type 183: PFCP Session Retention Information
		0x00, 0x09, // length 9
		0x00, 0xb9, // type 185: CP PFCP Entity IP Address
		0x00, 0x05, // length 5
		0x02,          // V4
		192, 0, 2, 30, // 192.0.2.30
	})
}

// associationSetupWithoutRecovery lacks the mandatory Recovery Time Stamp.
var associationSetupWithoutRecovery = cat([]byte{
	0x20,       // version 1; FO, MP and S flags clear
	0x05,       // message type 5: Association Setup Request
	0x00, 0x15, // length 21: 4 (sequence number, spare) + 17 (Node ID)
	0x00, 0x00, 0x30, // sequence number 48
	0x00, // spare
}, smfNodeID)

// associationRequest is an Association Update (type 7, §7.4.4.3) or
// Release (type 9, §7.4.4.5) Request from smf.example.
func associationRequest(msgType, seq byte) []byte {
	return cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		msgType,    // message type
		0x00, 0x15, // length 21: 4 (sequence number, spare) + 17 (Node ID)
		0x00, 0x00, seq, // sequence number
		0x00, // spare
	}, smfNodeID)
}

// sessionSetDeletionRequest is a Session Set Deletion Request (§7.4.6.1)
// from smf.example.
var sessionSetDeletionRequest = cat([]byte{
	0x20,       // version 1; FO, MP and S flags clear: a node message
	0x0e,       // message type 14: Session Set Deletion Request
	0x00, 0x15, // length 21: 4 (sequence number, spare) + 17 (Node ID)
	0x00, 0x00, 0x40, // sequence number 64
	0x00, // spare
}, smfNodeID)

// cpFSEID is the CP F-SEID IE (§8.2.37) of the sessions below.
var cpFSEID = []byte{
	0x00, 0x39, // type 57: F-SEID
	0x00, 0x0d, // length 13
	0x02,                                           // flags: V4
	0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // SEID
	10, 0, 0, 2, // IPv4 address
}

// createPDR is a Create PDR IE (§7.5.2.2): PDR ID 1, precedence 100,
// source interface Access.
var createPDR = []byte{
	0x00, 0x01, // type 1: Create PDR
	0x00, 0x17, // length 23
	0x00, 0x38, 0x00, 0x02, 0x00, 0x01, // PDR ID (type 56), length 2: 1
	0x00, 0x1d, 0x00, 0x04, 0x00, 0x00, 0x00, 0x64, // Precedence (type 29), length 4: 100
	0x00, 0x02, 0x00, 0x05, // PDI (type 2), length 5, holding:
	0x00, 0x14, 0x00, 0x01, 0x00, //   Source Interface (type 20), length 1: 0, Access
}

// createFAR is a Create FAR IE (§7.5.2.3): FAR ID 1, forward.
var createFAR = []byte{
	0x00, 0x03, // type 3: Create FAR
	0x00, 0x0d, // length 13
	0x00, 0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, // FAR ID (type 108), length 4: 1
	0x00, 0x2c, 0x00, 0x01, 0x02, // Apply Action (type 44), length 1: FORW
}

// sessionEstablishmentRequest is a Session Establishment Request (§7.5.2)
// from smf.example.
func sessionEstablishmentRequest(seq byte) []byte {
	return cat([]byte{
		0x21,       // version 1; S flag: a SEID follows
		0x32,       // message type 50: Session Establishment Request
		0x00, 0x5a, // length 90: 12 (SEID, sequence number, spare) + 17 (Node ID) + 17 (F-SEID) + 27 (Create PDR) + 17 (Create FAR)
		0, 0, 0, 0, 0, 0, 0, 0, // SEID 0: the UP function has none yet (§7.2.2.4.2)
		0x00, 0x00, seq, // sequence number
		0x00, // message priority, spare
	}, smfNodeID, cpFSEID, createPDR, createFAR)
}

// establishmentWithoutFAR lacks the mandatory Create FAR.
var establishmentWithoutFAR = cat([]byte{
	0x21,       // version 1; S flag: a SEID follows
	0x32,       // message type 50: Session Establishment Request
	0x00, 0x49, // length 73: 12 (SEID, sequence number, spare) + 17 (Node ID) + 17 (F-SEID) + 27 (Create PDR)
	0, 0, 0, 0, 0, 0, 0, 0, // SEID 0
	0x00, 0x00, 0x21, // sequence number 33
	0x00, // message priority, spare
}, smfNodeID, cpFSEID, createPDR)

// establishmentWithoutPDR lacks the mandatory Create PDR.
var establishmentWithoutPDR = cat([]byte{
	0x21,       // version 1; S flag: a SEID follows
	0x32,       // message type 50: Session Establishment Request
	0x00, 0x3f, // length 63: 12 (SEID, sequence number, spare) + 17 (Node ID) + 17 (F-SEID) + 17 (Create FAR)
	0, 0, 0, 0, 0, 0, 0, 0, // SEID 0
	0x00, 0x00, 0x22, // sequence number 34
	0x00, // message priority, spare
}, smfNodeID, cpFSEID, createFAR)

// sessionRequest is a Session Modification (type 52, §7.5.4) or Deletion
// (type 54, §7.5.6) Request without IEs, for the UP SEID 0x0102030405060708.
func sessionRequest(msgType, seq byte) []byte {
	return []byte{
		0x21,       // version 1; S flag: a SEID follows
		msgType,    // message type
		0x00, 0x0c, // length 12: SEID, sequence number, spare
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // SEID the UP function allocated
		0x00, 0x00, seq, // sequence number
		0x00, // message priority, spare
	}
}

// Responses the test SMF sends; reply fills in the sequence number.
var (
	// associationSetupResponse is an Association Setup Response (§7.4.4.2)
	// accepting the UPF's request.
	associationSetupResponse = cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x06,       // message type 6: Association Setup Response
		0x00, 0x22, // length 34: 4 (sequence number, spare) + 17 (Node ID) + 5 (Cause) + 8 (Recovery Time Stamp)
		0, 0, 0, // sequence number: the request's
		0x00, // spare
	}, smfNodeID, []byte{
		0x00, 0x13, 0x00, 0x01, 0x01, // Cause (type 19), length 1: 1, Request accepted
	}, smfRecovery)

	// heartbeatResponse and heartbeatResponseAfterRestart are Heartbeat
	// Responses (§7.4.2.2).
	heartbeatResponse = cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x02,       // message type 2: Heartbeat Response
		0x00, 0x0c, // length 12: 4 (sequence number, spare) + 8 (Recovery Time Stamp)
		0, 0, 0, // sequence number: the request's
		0x00, // spare
	}, smfRecovery)
	heartbeatResponseAfterRestart = cat(heartbeatResponse[:8], smfRecoveryAfterRestart)

	// associationUpdateResponse is an Association Update Response
	// (§7.4.4.4) accepting the UPF's request.
	associationUpdateResponse = cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x08,       // message type 8: Association Update Response
		0x00, 0x1a, // length 26: 4 (sequence number, spare) + 17 (Node ID) + 5 (Cause)
		0, 0, 0, // sequence number: the request's
		0x00, // spare
	}, smfNodeID, []byte{
		0x00, 0x13, 0x00, 0x01, 0x01, // Cause (type 19), length 1: 1, Request accepted
	})
)

// sessionReportResponse is a Session Report Response (§7.5.9) accepting the
// report; the sequence number sits after the SEID, at octets 12 to 14.
func sessionReportResponse(seq uint32) []byte {
	return []byte{
		0x21,       // version 1; S flag: a SEID follows
		0x39,       // message type 57: Session Report Response
		0x00, 0x11, // length 17: 12 (SEID, sequence number, spare) + 5 (Cause)
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // the UP function's SEID
		byte(seq >> 16), byte(seq >> 8), byte(seq), // sequence number: the request's
		0x00,                         // message priority, spare
		0x00, 0x13, 0x00, 0x01, 0x01, // Cause (type 19), length 1: 1, Request accepted
	}
}
