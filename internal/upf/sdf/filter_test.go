package sdf

import (
	"net/netip"
	"reflect"
	"testing"
)

func mustParse(t *testing.T, desc string) Filter {
	t.Helper()
	f, err := Parse(desc)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestUplink(t *testing.T) {
	f := mustParse(t, "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80")
	want := Filter{
		Proto: 17,
		Src:   Endpoint{Assigned: true, Ports: []PortRange{{Lo: 80, Hi: 80}}},
		Dst:   Endpoint{Prefix: pfx("192.168.1.1/32"), Ports: []PortRange{{Lo: 1000, Hi: 2000}, {Lo: 3000, Hi: 3000}}},
	}
	if got := f.Uplink(); !reflect.DeepEqual(got, want) {
		t.Errorf("Uplink() = %+v, want %+v", got, want)
	}
	if got := f.Uplink().Uplink(); !reflect.DeepEqual(got, f) {
		t.Errorf("Uplink().Uplink() = %+v, want %+v", got, f)
	}

	ue := netip.PrefixFrom(addr("10.45.0.2"), 32)
	down := Packet{Src: addr("192.168.1.1"), Dst: addr("10.45.0.2"), Proto: 17, SrcPort: 1500, DstPort: 80}
	up := Packet{Src: down.Dst, Dst: down.Src, Proto: 17, SrcPort: down.DstPort, DstPort: down.SrcPort}
	if !f.Matches(down, ue) || f.Matches(up, ue) {
		t.Error("the parsed filter must match the downlink packet only")
	}
	if !f.Uplink().Matches(up, ue) || f.Uplink().Matches(down, ue) {
		t.Error("the uplink filter must match the uplink packet only")
	}
}

func TestMatches(t *testing.T) {
	ue4 := netip.PrefixFrom(addr("10.45.0.2"), 32)
	ue6 := pfx("2001:db8:cafe:2::/64")
	udp := func(src, dst string, sport, dport uint16) Packet {
		return Packet{Src: addr(src), Dst: addr(dst), Proto: 17, SrcPort: sport, DstPort: dport}
	}
	tests := []struct {
		desc string
		pkt  Packet
		want bool
	}{
		{desc: "permit out ip from any to assigned", pkt: udp("8.8.8.8", "10.45.0.2", 53, 4000), want: true},
		{desc: "permit out ip from any to assigned", pkt: udp("8.8.8.8", "10.45.0.3", 53, 4000), want: false},
		{desc: "permit out ip from any to assigned", pkt: udp("2001:db8::1", "2001:db8:cafe:2::99", 53, 4000), want: true},
		{desc: "permit out ip from any to assigned", pkt: udp("2001:db8::1", "2001:db8:cafe:3::1", 53, 4000), want: false},
		{desc: "permit out ip from any to assigned", pkt: Packet{Src: addr("8.8.8.8"), Dst: addr("10.45.0.2"), Proto: 1}, want: true},
		{desc: "permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060", pkt: udp("10.45.9.9", "10.45.0.2", 1, 5060), want: true},
		{desc: "permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060", pkt: udp("10.46.0.1", "10.45.0.2", 1, 5060), want: false},
		{desc: "permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060", pkt: udp("10.45.9.9", "10.45.0.2", 1, 5061), want: false},
		{desc: "permit out 6 from 10.45.0.0/16 to 10.45.0.2 5060", pkt: udp("10.45.9.9", "10.45.0.2", 1, 5060), want: false},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", pkt: udp("192.168.1.1", "10.45.0.2", 1000, 80), want: true},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", pkt: udp("192.168.1.1", "10.45.0.2", 2000, 80), want: true},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", pkt: udp("192.168.1.1", "10.45.0.2", 3000, 80), want: true},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", pkt: udp("192.168.1.1", "10.45.0.2", 2001, 80), want: false},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", pkt: udp("192.168.1.1", "10.45.0.2", 999, 80), want: false},
		// Ports under "ip" match any protocol that has ports, and only those.
		{desc: "permit out ip from any to assigned 53", pkt: Packet{Src: addr("1.1.1.1"), Dst: addr("10.45.0.2"), Proto: 6, DstPort: 53}, want: true},
		{desc: "permit out ip from any to assigned 53", pkt: Packet{Src: addr("1.1.1.1"), Dst: addr("10.45.0.2"), Proto: 132, DstPort: 53}, want: true},
		{desc: "permit out ip from any to assigned 53", pkt: Packet{Src: addr("1.1.1.1"), Dst: addr("10.45.0.2"), Proto: 1, DstPort: 53}, want: false},
		// An IPv4 prefix never matches IPv6 packets, even 0.0.0.0/0.
		{desc: "permit out ip from 0.0.0.0/0 to assigned", pkt: udp("2001:db8::1", "2001:db8:cafe:2::1", 1, 2), want: false},
		{desc: "permit out ip from ::/0 to assigned", pkt: udp("2001:db8::1", "2001:db8:cafe:2::1", 1, 2), want: true},
		{desc: "permit out ip from 10.60.0.1/32 to any", pkt: udp("10.60.0.1", "2.2.2.2", 1, 2), want: true},
	}
	for _, tt := range tests {
		f := mustParse(t, tt.desc)
		if got := f.Matches(tt.pkt, ue4, ue6); got != tt.want {
			t.Errorf("%q matches %+v = %v, want %v", tt.desc, tt.pkt, got, tt.want)
		}
	}
	// Without the UE's addresses, "assigned" matches nothing.
	if mustParse(t, "permit out ip from any to assigned").Matches(udp("8.8.8.8", "10.45.0.2", 1, 2)) {
		t.Error(`"assigned" matched with no UE address`)
	}
}

func TestMatchesOtherFields(t *testing.T) {
	pkt := Packet{Src: addr("2001:db8::1"), Dst: addr("2001:db8:cafe::1"), Proto: 50, TOS: 0xb8, SPI: 7, FlowLabel: 0x12345}
	tests := []struct {
		name string
		f    Filter
		want bool
	}{
		{name: "zero filter", f: Filter{}, want: true},
		{name: "DSCP EF", f: Filter{TOS: TOS{Value: 0xb8, Mask: 0xfc}}, want: true},
		{name: "DSCP AF41", f: Filter{TOS: TOS{Value: 0x88, Mask: 0xfc}}, want: false},
		{name: "ECN ignored", f: Filter{TOS: TOS{Value: 0xbb, Mask: 0xfc}}, want: true},
		{name: "SPI", f: Filter{SPI: 7}, want: true},
		{name: "other SPI", f: Filter{SPI: 8}, want: false},
		{name: "flow label", f: Filter{FlowLabel: 0x12345, HasFlowLabel: true}, want: true},
		{name: "other flow label", f: Filter{FlowLabel: 0, HasFlowLabel: true}, want: false},
	}
	for _, tt := range tests {
		if got := tt.f.Matches(pkt); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
	}
	v4 := Packet{Src: addr("1.1.1.1"), Dst: addr("10.45.0.2")}
	if (Filter{HasFlowLabel: true}).Matches(v4) {
		t.Error("a flow label matched an IPv4 packet")
	}
}
