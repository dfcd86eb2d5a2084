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
		{desc: "permit out ip from any to assigned", want: Filter{Dst: assigned}},
		{desc: "permit out 17 from 10.45.0.0/16 to 10.45.0.2 5060", want: Filter{
			Proto: 17,
			Src:   Endpoint{Prefix: pfx("10.45.0.0/16")},
			Dst:   Endpoint{Prefix: pfx("10.45.0.2/32"), Ports: []PortRange{{Lo: 5060, Hi: 5060}}},
		}},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", want: Filter{
			Proto: 17,
			Src:   Endpoint{Prefix: pfx("192.168.1.1/32"), Ports: []PortRange{{Lo: 1000, Hi: 2000}, {Lo: 3000, Hi: 3000}}},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{Lo: 80, Hi: 80}}},
		}},
		{desc: "permit out icmp from any to assigned", want: Filter{Proto: 1, Dst: assigned}},
		{desc: "permit out ipv6-icmp from any to assigned", want: Filter{Proto: 58, Dst: assigned}},
		{desc: "permit out tcp from 8.8.8.8 to assigned 80,443,8000-8080", want: Filter{
			Proto: 6,
			Src:   Endpoint{Prefix: pfx("8.8.8.8/32")},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{Lo: 80, Hi: 80}, {Lo: 443, Hi: 443}, {Lo: 8000, Hi: 8080}}},
		}},
		{desc: "permit out sctp from any 0-65535 to assigned", want: Filter{
			Proto: 132,
			Src:   Endpoint{Ports: []PortRange{{Lo: 0, Hi: 65535}}},
			Dst:   assigned,
		}},
		// free5GC style.
		{desc: "permit out ip from 10.60.0.1/32 to any", want: Filter{Src: Endpoint{Prefix: pfx("10.60.0.1/32")}}},
		{desc: "permit out ip from 10.60.0.0/16 to 10.60.0.1", want: Filter{
			Src: Endpoint{Prefix: pfx("10.60.0.0/16")},
			Dst: Endpoint{Prefix: pfx("10.60.0.1/32")},
		}},
		// IPv6.
		{desc: "permit out 6 from 2001:db8::/32 443 to 2001:db8:cafe::1/64", want: Filter{
			Proto: 6,
			Src:   Endpoint{Prefix: pfx("2001:db8::/32"), Ports: []PortRange{{Lo: 443, Hi: 443}}},
			Dst:   Endpoint{Prefix: pfx("2001:db8:cafe::/64")},
		}},
		{desc: "permit out ip from ::/0 to ::1", want: Filter{Src: Endpoint{Prefix: pfx("::/0")}, Dst: Endpoint{Prefix: pfx("::1/128")}}},
		// "any" spans both families, so it goes with either.
		{desc: "permit out ip from 2001:db8::1 to any", want: Filter{Src: Endpoint{Prefix: pfx("2001:db8::1/128")}}},
		// Protocol 0 is "ip"; ports under "ip" are allowed.
		{desc: "permit out 0 from any 53 to assigned", want: Filter{Src: Endpoint{Ports: []PortRange{{Lo: 53, Hi: 53}}}, Dst: assigned}},
		// Bits past the prefix length are dropped, as ipfw and Go do.
		{desc: "permit out ip from 10.45.0.1/16 to assigned", want: Filter{Src: Endpoint{Prefix: pfx("10.45.0.0/16")}, Dst: assigned}},
		// Blanks anywhere between tokens, and around "," and "-".
		{desc: " \tpermit  out\n17 from any 1000 - 2000 , 3000\r\nto   assigned 80 ,81\t", want: Filter{
			Proto: 17,
			Src:   Endpoint{Ports: []PortRange{{Lo: 1000, Hi: 2000}, {Lo: 3000, Hi: 3000}}},
			Dst:   Endpoint{Assigned: true, Ports: []PortRange{{Lo: 80, Hi: 80}, {Lo: 81, Hi: 81}}},
		}},
		{desc: "permit out 255 from any to assigned", want: Filter{Proto: 255, Dst: assigned}},
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
		{desc: "", want: `end of description at offset 0: want "permit"`},
		{desc: "deny out ip from any to assigned", want: `"deny" at offset 0: want "permit", the only action TS 29.212 §5.4.2 allows`},
		{desc: "Permit out ip from any to assigned", want: `"Permit" at offset 0: want "permit"`},
		{desc: "permit in ip from any to assigned", want: `"in" at offset 7: want "out", the only direction TS 29.212 §5.4.2 allows`},
		{desc: "permit out", want: `end of description at offset 10: want a protocol number 0-255 or one of icmp, ip, ipv6-icmp, sctp, tcp, udp`},
		{desc: "permit out 256 from any to assigned", want: `"256" at offset 11: want a protocol number`},
		{desc: "permit out -1 from any to assigned", want: `"-1" at offset 11: want a protocol number`},
		{desc: "permit out +6 from any to assigned", want: `"+6" at offset 11: want a protocol number`},
		{desc: "permit out gre from any to assigned", want: `"gre" at offset 11: want a protocol number`},
		{desc: "permit out ip form any to assigned", want: `"form" at offset 14: want "from"`},
		{desc: "permit out ip from", want: `end of description at offset 18: want "any", "assigned", or an IP address or prefix`},
		{desc: "permit out ip from !10.0.0.1 to assigned", want: `"!10.0.0.1" at offset 19: TS 29.212 §5.4.2 does not allow the "!" modifier`},
		{desc: "permit out ip from ! 10.0.0.1 to assigned", want: `"!" at offset 19: TS 29.212 §5.4.2 does not allow the "!"`},
		{desc: "permit out ip from any to !assigned", want: `"!assigned" at offset 26: TS 29.212 §5.4.2 does not allow the "!"`},
		{desc: "permit out ip from 10.0.0.256 to assigned", want: `"10.0.0.256" at offset 19: want "any", "assigned", or an IP address or prefix`},
		{desc: "permit out ip from fe80::1%eth0 to assigned", want: `"fe80::1%eth0" at offset 19: want "any", "assigned"`},
		{desc: "permit out ip from 10.0.0.0/33 to assigned", want: `"10.0.0.0/33" at offset 19: want a prefix length 0-32 after the "/"`},
		{desc: "permit out ip from 2001:db8::/129 to assigned", want: `want a prefix length 0-128 after the "/"`},
		{desc: "permit out ip from 10.0.0.0/ to assigned", want: `want a prefix length 0-32`},
		{desc: "permit out ip from 10.0.0.0/+8 to assigned", want: `want a prefix length 0-32`},
		{desc: "permit out ip from 10.0.0.0/8/8 to assigned", want: `want a prefix length 0-32`},
		{desc: "permit out ip from any assigned", want: `"assigned" at offset 23: want "to"`},
		{desc: "permit out ip from any to", want: `end of description at offset 25: want "any", "assigned"`},
		{desc: "permit out ip from 10.0.0.1 to 2001:db8::1", want: `"2001:db8::1" at offset 31: source and destination are of different IP versions`},
		{desc: "permit out 17 from any 65536 to assigned", want: `"65536" at offset 23: want a port number 0-65535`},
		{desc: "permit out 17 from any 80x to assigned", want: `"80x" at offset 23: want a port number 0-65535`},
		{desc: "permit out 17 from any 80, to assigned", want: `"to" at offset 27: want a port number`},
		{desc: "permit out 17 from any 80,,81 to assigned", want: `",81" at offset 26: want a port number`},
		{desc: "permit out 17 from any 80- to assigned", want: `"to" at offset 27: want a port number`},
		{desc: "permit out 17 from any to assigned 80,", want: `end of description at offset 38: want a port number`},
		{desc: "permit out 17 from any 2000-1000 to assigned", want: `"2000-1000" at offset 23: port range 2000-1000 is reversed`},
		{desc: "permit out 17 from any 80 443 to assigned", want: `"443" at offset 26: want "to"`},
		{desc: "permit out icmp from any 80 to assigned", want: `"80" at offset 25: ports need protocol tcp, udp, sctp or ip, not 1`},
		{desc: "permit out 50 from any to assigned 500", want: `"500" at offset 35: ports need protocol tcp, udp, sctp or ip, not 50`},
		{desc: "permit out ip from any to assigned frag", want: `"frag" at offset 35: want end of description: TS 29.212 §5.4.2 allows no options`},
		{desc: "permit out 6 from any to assigned 80 established", want: `"established" at offset 37: want end of description`},
		{desc: "permit out 6 from any to assigned 80 443", want: `"443" at offset 37: want end of description`},
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
		{desc: "permit out ip from any to assigned", want: "permit out ip from any to assigned"},
		{desc: "permit out udp from 192.168.1.1 1000-2000,3000 to assigned 80", want: "permit out 17 from 192.168.1.1 1000-2000,3000 to assigned 80"},
		{desc: "permit out 6 from 2001:db8::/32 to 10.0.0.0/8", want: ""}, // families differ: rejected
		{desc: "permit out 6  from 2001:db8::/32 443 to  any", want: "permit out 6 from 2001:db8::/32 443 to any"},
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
