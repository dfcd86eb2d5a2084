package sdf

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestParse(t *testing.T) {
	assigned := Endpoint{Assigned: true}
	tests := []struct {
		desc string
		want Filter
	}{
		// Open5GS style.
		{"permit out ip from any to assigned", Filter{Dst: assigned}},
		{"permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060", Filter{
			Proto: 17,
			Src:   Endpoint{Prefix: pfx("10.45.0.0/16")},
			Dst:   Endpoint{Prefix: pfx("10.45.0.2/32"), Ports: []PortRange{{5060, 5060}}},
		}},
		{"permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", Filter{
			Proto: 17,
			Src:   Endpoint{Prefix: pfx("192.168.1.1/32"), Ports: []PortRange{{1000, 2000}, {3000, 3000}}},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{80, 80}}},
		}},
		{"permit out icmp from any to assigned", Filter{Proto: 1, Dst: assigned}},
		{"permit out ipv6-icmp from any to assigned", Filter{Proto: 58, Dst: assigned}},
		{"permit out tcp from 8.8.8.8 to assigned 80,443,8000-8080", Filter{
			Proto: 6,
			Src:   Endpoint{Prefix: pfx("8.8.8.8/32")},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{80, 80}, {443, 443}, {8000, 8080}}},
		}},
		{"permit out sctp from any 0-65535 to assigned", Filter{
			Proto: 132,
			Src:   Endpoint{Ports: []PortRange{{0, 65535}}},
			Dst:   assigned,
		}},
		// free5GC style.
		{"permit out ip from 10.60.0.1/32 to any", Filter{Src: Endpoint{Prefix: pfx("10.60.0.1/32")}}},
		{"permit out ip from 10.60.0.0/16 to 10.60.0.1", Filter{
			Src: Endpoint{Prefix: pfx("10.60.0.0/16")},
			Dst: Endpoint{Prefix: pfx("10.60.0.1/32")},
		}},
		// IPv6.
		{"permit out 6 from 2001:db8::/32 443 to 2001:db8:cafe::1/64", Filter{
			Proto: 6,
			Src:   Endpoint{Prefix: pfx("2001:db8::/32"), Ports: []PortRange{{443, 443}}},
			Dst:   Endpoint{Prefix: pfx("2001:db8:cafe::/64")},
		}},
		{"permit out ip from ::/0 to ::1", Filter{Src: Endpoint{Prefix: pfx("::/0")}, Dst: Endpoint{Prefix: pfx("::1/128")}}},
		// "any" spans both families, so it goes with either.
		{"permit out ip from 2001:db8::1 to any", Filter{Src: Endpoint{Prefix: pfx("2001:db8::1/128")}}},
		// Protocol 0 is "ip"; ports under "ip" are allowed.
		{"permit out 0 from any 53 to assigned", Filter{Src: Endpoint{Ports: []PortRange{{53, 53}}}, Dst: assigned}},
		// Bits past the prefix length are dropped, as ipfw and Go do.
		{"permit out ip from 10.45.0.1/16 to assigned", Filter{Src: Endpoint{Prefix: pfx("10.45.0.0/16")}, Dst: assigned}},
		// Blanks anywhere between tokens, and around "," and "-".
		{" \tpermit  out\n17 from any 1000 - 2000 , 3000\r\nto   assigned 80 ,81\t", Filter{
			Proto: 17,
			Src:   Endpoint{Ports: []PortRange{{1000, 2000}, {3000, 3000}}},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{80, 80}, {81, 81}}},
		}},
		{"permit out 255 from any to assigned", Filter{Proto: 255, Dst: assigned}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.desc)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.desc, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.desc, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ desc, want string }{
		{"", `end of description at offset 0: want "permit"`},
		{"deny out ip from any to assigned", `"deny" at offset 0: want "permit", the only action TS 29.212 §5.4.2 allows`},
		{"Permit out ip from any to assigned", `"Permit" at offset 0: want "permit"`},
		{"permit in ip from any to assigned", `"in" at offset 7: want "out", the only direction TS 29.212 §5.4.2 allows`},
		{"permit out", `end of description at offset 10: want a protocol number 0-255 or one of icmp, ip, ipv6-icmp, sctp, tcp, udp`},
		{"permit out 256 from any to assigned", `"256" at offset 11: want a protocol number`},
		{"permit out -1 from any to assigned", `"-1" at offset 11: want a protocol number`},
		{"permit out +6 from any to assigned", `"+6" at offset 11: want a protocol number`},
		{"permit out gre from any to assigned", `"gre" at offset 11: want a protocol number`},
		{"permit out ip form any to assigned", `"form" at offset 14: want "from"`},
		{"permit out ip from", `end of description at offset 18: want "any", "assigned", or an IP address or prefix`},
		{"permit out ip from !10.0.0.1 to assigned", `"!10.0.0.1" at offset 19: TS 29.212 §5.4.2 does not allow the "!" modifier`},
		{"permit out ip from ! 10.0.0.1 to assigned", `"!" at offset 19: TS 29.212 §5.4.2 does not allow the "!"`},
		{"permit out ip from any to !assigned", `"!assigned" at offset 26: TS 29.212 §5.4.2 does not allow the "!"`},
		{"permit out ip from 10.0.0.256 to assigned", `"10.0.0.256" at offset 19: want "any", "assigned", or an IP address or prefix`},
		{"permit out ip from fe80::1%eth0 to assigned", `"fe80::1%eth0" at offset 19: want "any", "assigned"`},
		{"permit out ip from 10.0.0.0/33 to assigned", `"10.0.0.0/33" at offset 19: want a prefix length 0-32 after the "/"`},
		{"permit out ip from 2001:db8::/129 to assigned", `want a prefix length 0-128 after the "/"`},
		{"permit out ip from 10.0.0.0/ to assigned", `want a prefix length 0-32`},
		{"permit out ip from 10.0.0.0/+8 to assigned", `want a prefix length 0-32`},
		{"permit out ip from 10.0.0.0/8/8 to assigned", `want a prefix length 0-32`},
		{"permit out ip from any assigned", `"assigned" at offset 23: want "to"`},
		{"permit out ip from any to", `end of description at offset 25: want "any", "assigned"`},
		{"permit out ip from 10.0.0.1 to 2001:db8::1", `"2001:db8::1" at offset 31: source and destination are of different IP versions`},
		{"permit out 17 from any 65536 to assigned", `"65536" at offset 23: want a port number 0-65535`},
		{"permit out 17 from any 80x to assigned", `"80x" at offset 23: want a port number 0-65535`},
		{"permit out 17 from any 80, to assigned", `"to" at offset 27: want a port number`},
		{"permit out 17 from any 80,,81 to assigned", `",81" at offset 26: want a port number`},
		{"permit out 17 from any 80- to assigned", `"to" at offset 27: want a port number`},
		{"permit out 17 from any to assigned 80,", `end of description at offset 38: want a port number`},
		{"permit out 17 from any 2000-1000 to assigned", `"2000-1000" at offset 23: port range 2000-1000 is reversed`},
		{"permit out 17 from any 80 443 to assigned", `"443" at offset 26: want "to"`},
		{"permit out icmp from any 80 to assigned", `"80" at offset 25: ports need protocol tcp, udp, sctp or ip, not 1`},
		{"permit out 50 from any to assigned 500", `"500" at offset 35: ports need protocol tcp, udp, sctp or ip, not 50`},
		{"permit out ip from any to assigned frag", `"frag" at offset 35: want end of description: TS 29.212 §5.4.2 allows no options`},
		{"permit out 6 from any to assigned 80 established", `"established" at offset 37: want end of description`},
		{"permit out 6 from any to assigned 80 443", `"443" at offset 37: want end of description`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.desc)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error = %v, want a *SyntaxError", tt.desc, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.desc, err, tt.want)
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	tests := []struct{ desc, want string }{
		{"permit out ip from any to assigned", "permit out ip from any to assigned"},
		{"permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", "permit out 17 from 192.168.1.1 1000-2000,3000 to assigned 80"},
		{"permit out 6 from 2001:db8::/32 to 10.0.0.0/8", ""}, // families differ: rejected
		{"permit out 6  from 2001:db8::/32 443 to  any", "permit out 6 from 2001:db8::/32 443 to any"},
	}
	for _, tt := range tests {
		f, err := Parse(tt.desc)
		if tt.want == "" {
			if err == nil {
				t.Errorf("Parse(%q) succeeded", tt.desc)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := f.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.desc, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"permit out ip from any to assigned",
		"permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060",
		"permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80",
		"permit out ip from 10.60.0.1/32 to any",
		"permit out 6 from 2001:db8::/32 443 to 2001:db8:cafe::1/64 1 - 2 , 3",
		"permit out ip from !10.0.0.1 to assigned frag",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		flt, err := Parse(desc)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(desc) || !strings.HasPrefix(desc[se.Offset:], se.Token) {
				t.Fatalf("Parse(%q): bad error %#v", desc, err)
			}
			return
		}
		again, err := Parse(flt.String())
		if err != nil || !reflect.DeepEqual(again, flt) {
			t.Fatalf("Parse(%q).String() = %q does not parse back: %+v, %v", desc, flt.String(), again, err)
		}
	})
}
