package session

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

func ptr[T any](v T) *T { return &v }

// figure10 is the session of Fig. 10 of the UPF paper, with the TEID the
// downlink tunnel needs.
func figure10() Session {
	return Session{
		SEID: 1,
		PDRs: []PDR{
			{ID: 20, FARID: 200, OuterHeaderRemoval: ptr(RemoveUDPIPv4),
				PDI: PDI{SourceInterface: InterfaceCore, TEID: 100, UEAddress: netip.MustParsePrefix("10.1.3.27/32")}},
			{ID: 10, FARID: 100, OuterHeaderRemoval: ptr(RemoveGTPUUDPIPv4),
				PDI: PDI{SourceInterface: InterfaceAccess, TEID: 100, UEAddress: netip.MustParsePrefix("10.1.3.27/32")}},
		},
		FARs: []FAR{
			{ID: 200, Action: ActionForward, Forwarding: Forwarding{DestinationInterface: InterfaceAccess,
				OuterHeaderCreation: &OuterHeaderCreation{TEID: 100, Peer: netip.MustParseAddr("10.1.3.27"), Port: 2152}}},
			{ID: 100, Action: ActionForward, Forwarding: Forwarding{DestinationInterface: InterfaceCore}},
		},
	}
}

func TestValidateAcceptsFigure10(t *testing.T) {
	s := figure10()
	if err := Validate(&s); err != nil {
		t.Fatal(err)
	}
	// From access back to access: indirect data forwarding.
	s.PDRs[1].FARID = 200
	if err := Validate(&s); err != nil {
		t.Errorf("indirect forwarding: %v", err)
	}
}

// PDRs at F-TEIDs that remove no outer header yet, whose FARs do not
// forward, as Open5GS's V-SMF first creates them (home-routed roaming):
// an uplink one whose FAR buffers, a downlink one from the core without
// a UE address. They must not forward so.
func TestValidateWaitingPDRs(t *testing.T) {
	s := figure10()
	s.PDRs[0].PDI.UEAddress, s.PDRs[1].OuterHeaderRemoval = netip.Prefix{}, nil
	s.FARs[0].Action, s.FARs[1].Action = ActionBuffer, ActionBuffer
	if err := Validate(&s); err != nil {
		t.Fatal(err)
	}
	// FAR i buffers, the other one forwards the other PDR.
	for i, field := range []string{"pdrs[1].outerHeaderRemoval", "pdrs[0].pdi.ueIPAddress"} {
		s := figure10()
		s.PDRs[0].PDI.UEAddress, s.PDRs[1].OuterHeaderRemoval = netip.Prefix{}, nil
		s.FARs[i].Action = ActionBuffer
		var fe *fielderr.Error
		if err := Validate(&s); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("FAR %d buffering, the other forwarding: %v, want an error naming %s", i, err, field)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*Session)
	}{
		{field: "seid", mutate: func(s *Session) { s.SEID = 0 }},
		{field: "pdrs[1].pdrId", mutate: func(s *Session) { s.PDRs[1].ID = 20 }},
		{field: "fars[1].farId", mutate: func(s *Session) { s.FARs[1].ID = 200 }},
		{field: "pdrs[0].farId", mutate: func(s *Session) { s.PDRs[0].FARID = 7 }},
		{field: "pdrs[1].pdi.teid", mutate: func(s *Session) { s.PDRs[1].PDI.TEID = 0 }},
		{field: "pdrs[1].outerHeaderRemoval", mutate: func(s *Session) { s.PDRs[1].OuterHeaderRemoval = nil }},
		{field: "pdrs[1].outerHeaderRemoval", mutate: func(s *Session) { s.PDRs[1].OuterHeaderRemoval = ptr(uint8(3)) }},
		{field: "pdrs[0].pdi.ueIPAddress", mutate: func(s *Session) { s.PDRs[0].PDI.UEAddress = netip.Prefix{} }},
		{field: "pdrs[0].pdi.ueIPAddress", mutate: func(s *Session) { s.PDRs[0].PDI.UEAddress = netip.MustParsePrefix("10.1.3.0/24") }},
		{field: "pdrs[0].pdi.ueIPAddress", mutate: func(s *Session) { s.PDRs[0].PDI.UEAddress = netip.MustParsePrefix("2001:db8::/48") }},
		{field: "pdrs[0].pdi.ueIPv6Prefix", mutate: func(s *Session) { s.PDRs[0].PDI.UEIPv6Prefix = netip.MustParsePrefix("2001:db8::/48") }},
		{field: "pdrs[0].pdi.ueIPv6Prefix", mutate: func(s *Session) { s.PDRs[0].PDI.UEIPv6Prefix = netip.MustParsePrefix("10.1.3.28/32") }},
		{field: "pdrs[0].pdi.ueIPv6Prefix", mutate: func(s *Session) { // one address per family
			s.PDRs[0].PDI.UEAddress = netip.MustParsePrefix("2001:db8:1::/64")
			s.PDRs[0].PDI.UEIPv6Prefix = netip.MustParsePrefix("2001:db8:2::/64")
		}},
		{field: "pdrs[1].pdi.qfi", mutate: func(s *Session) { s.PDRs[1].PDI.QFI = 64 }},
		{field: "pdrs[0].pdi.sourceInterface", mutate: func(s *Session) { s.PDRs[0].PDI.SourceInterface = 9 }},
		{field: "fars[0].forwardingParameters.outerHeaderCreation", mutate: func(s *Session) { s.FARs[0].OuterHeaderCreation = nil }},
		{field: "fars[0].forwardingParameters.outerHeaderCreation.ipv4Address", mutate: func(s *Session) {
			s.FARs[0].OuterHeaderCreation.Peer = netip.MustParseAddr("224.0.0.5")
		}},
		{field: "fars[0].forwardingParameters.outerHeaderCreation.ipv4Address", mutate: func(s *Session) {
			s.FARs[0].OuterHeaderCreation.Peer = netip.Addr{}
		}},
		{field: "fars[0].forwardingParameters.outerHeaderCreation.ipv6Address", mutate: func(s *Session) {
			s.FARs[0].OuterHeaderCreation.Peer = netip.MustParseAddr("ff02::1")
		}},
		{field: "fars[0].forwardingParameters.outerHeaderCreation.teid", mutate: func(s *Session) { s.FARs[0].OuterHeaderCreation.TEID = 0 }},
		{field: "fars[0].forwardingParameters.outerHeaderCreation.portNumber", mutate: func(s *Session) { s.FARs[0].OuterHeaderCreation.Port = 1234 }},
		{field: "fars[1].forwardingParameters.outerHeaderCreation", mutate: func(s *Session) { s.FARs[1].DestinationInterface = InterfaceCPFunction }},
		{field: "fars[1].destinationInterface", mutate: func(s *Session) { s.FARs[1].DestinationInterface = 9 }},
		{field: "fars[0].forwardingParameters.nextHop", mutate: func(s *Session) { s.FARs[0].NextHop = netip.MustParseAddr("10.1.3.9") }}, // a tunnel's
		{field: "fars[1].forwardingParameters.nextHop", mutate: func(s *Session) { s.FARs[1].NextHop = netip.MustParseAddr("ff02::1") }},
		{field: "pdrs[1].farId", mutate: func(s *Session) { s.PDRs[1].PDI.SourceInterface = InterfaceCPFunction }}, // to the core
		{field: "pdrs[1].pdi.teid", mutate: func(s *Session) { s.PDRs[1].PDI.SourceInterface = InterfaceCPFunction; s.PDRs[1].PDI.TEID = 0 }},
		{field: "pdrs[0].farId", mutate: func(s *Session) { s.PDRs[0].FARID = 100 }},
		{field: "urrs[1].urrId", mutate: func(s *Session) { s.URRs = []URR{{ID: 1}, {ID: 1}} }},
		{field: "pdrs[0].urrIds", mutate: func(s *Session) { s.PDRs[0].URRIDs = []uint32{9} }},
		{field: "pdrs[1].urrIds", mutate: func(s *Session) { s.URRs = []URR{{ID: 1}, {ID: 2}, {ID: 3}}; s.PDRs[1].URRIDs = []uint32{1, 2, 3} }},
		{field: "pdrs[0].urrIds", mutate: func(s *Session) { s.URRs = []URR{{ID: 1}}; s.PDRs[0].URRIDs = []uint32{1, 1} }},
	}
	for _, c := range cases {
		s := figure10()
		c.mutate(&s)
		var ve *fielderr.Error
		if err := Validate(&s); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("want an error naming %s, got %v", c.field, err)
		}
	}
}

func TestValidateLimitsPDRsPerKey(t *testing.T) {
	s := figure10()
	for i := 0; i < 8; i++ {
		p := s.PDRs[1]
		p.ID = uint16(30 + i)
		s.PDRs = append(s.PDRs, p)
	}
	var ve *fielderr.Error
	if err := Validate(&s); !errors.As(err, &ve) || ve.Field != "pdrs[9]" {
		t.Fatalf("nine PDRs on one TEID: got %v", err)
	}
}
