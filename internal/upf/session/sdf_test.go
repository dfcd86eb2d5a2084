package session

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

func filters(t *testing.T, descs ...string) []SDFFilter {
	t.Helper()
	var fs []SDFFilter
	for _, d := range descs {
		f, err := sdf.Parse(d)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, SDFFilter{f})
	}
	return fs
}

func TestValidateSDFFilters(t *testing.T) {
	accepted := [][]string{
		{"permit out ip from any to assigned"},
		{"permit out 17 from 10.60.0.0/16 8000-8080 to 10.1.3.27"},
		{"permit out 6 from 2001:db8::/32 80,443 to assigned 1000-2000,3000"}, // four data-path filters
		{"permit out 6 from any 80 to assigned", "permit out 17 from any to assigned 53",
			"permit out 1 from 8.8.8.8 to assigned", "permit out ip from ::/0 to assigned"},
	}
	for _, descs := range accepted {
		s := figure10()
		s.PDRs[1].PDI.SDFFilters = filters(t, descs...)
		if err := Validate(&s); err != nil {
			t.Errorf("%q: %v", descs, err)
		}
	}

	tooMany := filters(t, "permit out 6 from any 1,2 to assigned 3,4,5")
	spi := filters(t, "permit out 50 from any to assigned")
	spi[0].SPI = 7
	reversed := filters(t, "permit out 17 from any 100 to assigned")
	reversed[0].Src.Ports[0].Lo = 200
	mixed := filters(t, "permit out ip from 10.0.0.0/8 to any")
	mixed[0].Dst.Prefix = netip.MustParsePrefix("2001:db8::/32")
	for _, c := range []struct {
		name    string
		filters []SDFFilter
		field   string
	}{
		{name: "five filters", filters: filters(t, "permit out 6 from any to assigned", "permit out 17 from any to assigned",
			"permit out 1 from any to assigned", "permit out 58 from any to assigned", "permit out 132 from any to assigned"),
			field: "pdrs[0].pdi.sdfFilters"},
		{name: "six pairs of port ranges", filters: tooMany, field: "pdrs[0].pdi.sdfFilters"},
		{name: "an SPI", filters: append(filters(t, "permit out ip from any to assigned"), spi...), field: "pdrs[0].pdi.sdfFilters[1]"},
		{name: "a reversed port range", filters: reversed, field: "pdrs[0].pdi.sdfFilters[0]"},
		{name: "IPv4 from, IPv6 to", filters: mixed, field: "pdrs[0].pdi.sdfFilters[0]"},
	} {
		s := figure10()
		s.PDRs[0].PDI.SDFFilters = c.filters
		var ve *fielderr.Error
		if err := Validate(&s); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: want an error naming %s, got %v", c.name, c.field, err)
		}
	}
}

// A session's state holds its filters as flow descriptions.
func TestSDFFilterJSON(t *testing.T) {
	pdi := PDI{SourceInterface: InterfaceCore, SDFFilters: filters(t,
		"permit out udp from 10.60.0.0/16 8000-8080,9000 to assigned", "permit out ip from any to 2001:db8::1")}
	b, err := json.Marshal(pdi)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"SourceInterface":1,"TEID":0,"UEAddress":"","QFI":0,"SDFFilters":[` +
		`"permit out 17 from 10.60.0.0/16 8000-8080,9000 to assigned","permit out ip from any to 2001:db8::1"]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back PDI
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, pdi) {
		t.Errorf("read back %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"SDFFilters":["permit in ip from any to assigned"]}`), &back); err == nil {
		t.Error("a malformed flow description was read")
	}
}

// sdfFilter is the data path's form of a filter; "" stands for any.
func sdfFilter(proto uint8, src, dst string, ports ...uint16) upfxdp.SDFFilter {
	f := upfxdp.SDFFilter{Proto: proto, SportHi: 0xffff, DportHi: 0xffff}
	var srcFamily, dstFamily uint8
	if src != "" {
		f.Src, f.SrcMask, srcFamily = upfxdp.SDFPrefix(netip.MustParsePrefix(src))
	}
	if dst != "" {
		f.Dst, f.DstMask, dstFamily = upfxdp.SDFPrefix(netip.MustParsePrefix(dst))
	}
	f.Flags = srcFamily | dstFamily
	if len(ports) == 4 {
		f.Flags |= upfxdp.SDFPorts
		f.SportLo, f.SportHi, f.DportLo, f.DportHi = ports[0], ports[1], ports[2], ports[3]
	}
	return f
}

func sdfSet(fs ...upfxdp.SDFFilter) upfxdp.SDFSet {
	s := upfxdp.SDFSet{Count: uint32(len(fs))}
	copy(s.Filter[:], fs)
	return s
}

func TestDataPathSDF(t *testing.T) {
	for _, c := range []struct {
		name  string
		from  Interface
		descs []string
		want  upfxdp.SDFSet // Count 0: no filters at all
	}{
		{name: "none", from: InterfaceCore, want: upfxdp.SDFSet{}},
		{name: "downlink as written", from: InterfaceCore, descs: []string{"permit out 17 from 10.60.0.0/16 8000-8080 to 10.1.0.1"},
			want: sdfSet(sdfFilter(17, "10.60.0.0/16", "10.1.0.1/32", 8000, 8080, 0, 0xffff))},
		{name: "uplink turned around", from: InterfaceAccess, descs: []string{"permit out 17 from 10.60.0.0/16 8000-8080 to 10.1.0.1"},
			want: sdfSet(sdfFilter(17, "10.1.0.1/32", "10.60.0.0/16", 0, 0xffff, 8000, 8080))},
		{name: "SGi-LAN as written", from: InterfaceSGiLAN, descs: []string{"permit out 6 from any 80 to assigned"},
			want: sdfSet(sdfFilter(6, "", "", 80, 80, 0, 0xffff))},
		{name: "assigned is any address", from: InterfaceAccess, descs: []string{"permit out ip from 2001:db8::/32 to assigned"},
			want: sdfSet(sdfFilter(0, "", "2001:db8::/32"))},
		{name: "a filter per pair of port ranges", from: InterfaceCore, descs: []string{"permit out 6 from any 80,443 to assigned 1000-2000"},
			want: sdfSet(sdfFilter(6, "", "", 80, 80, 1000, 2000), sdfFilter(6, "", "", 443, 443, 1000, 2000))},
		{name: "every packet (Open5GS)", from: InterfaceAccess, descs: []string{"permit out ip from any to assigned"}, want: upfxdp.SDFSet{}},
		{name: "every packet among others", from: InterfaceCore, descs: []string{"permit out 6 from any to assigned", "permit out ip from any to any"},
			want: upfxdp.SDFSet{}},
	} {
		p := PDR{PDI: PDI{SourceInterface: c.from, SDFFilters: filters(t, c.descs...)}}
		got, ok := dataPathSDF(&p)
		if ok != (c.want.Count > 0) || got != c.want {
			t.Errorf("%s: %+v, %t; want %+v", c.name, got, ok, c.want)
		}
	}
}

// Filters go into slots of their own (never slot 0, which means none),
// the PDRs point at them, and a restore moves them to fresh slots.
func TestStoreSDFFilters(t *testing.T) {
	e := newStoreEnv(t)
	sess := figure10()
	sess.PDRs[0].PDI.SDFFilters = filters(t, "permit out 17 from 10.60.0.0/16 8000-8080 to assigned")
	sess.PDRs[1].PDI.SDFFilters = filters(t, "permit out 17 from 10.60.0.0/16 8000-8080 to assigned")
	bad := figure10()
	bad.PDRs[1].PDI.SDFFilters = filters(t, "permit out 6 from any 1,2,3 to assigned 4,5")
	var invalid *fielderr.Error
	if err := e.store.Create(bad); !errors.As(err, &invalid) || invalid.Field != "pdrs[1].pdi.sdfFilters" {
		t.Fatalf("too many filters: %v", err)
	}
	check(t, e.store.Create(sess))
	filtersOf := func(p upfxdp.PDR) upfxdp.SDFSet {
		t.Helper()
		s, err := e.dp.SDFSet(p.Sdf)
		check(t, err)
		return s
	}
	ul, dl := e.uplinkPDR(t), e.downlinkPDR(t)
	if ul.Sdf == 0 || dl.Sdf == 0 || ul.Sdf == dl.Sdf {
		t.Fatalf("SDF slots: uplink %d, downlink %d", ul.Sdf, dl.Sdf)
	}
	if got, want := filtersOf(ul), sdfSet(sdfFilter(17, "", "10.60.0.0/16", 0, 0xffff, 8000, 8080)); got != want {
		t.Errorf("uplink filters %+v, want %+v", got, want)
	}
	if got, want := filtersOf(dl), sdfSet(sdfFilter(17, "10.60.0.0/16", "", 8000, 8080, 0, 0xffff)); got != want {
		t.Errorf("downlink filters %+v, want %+v", got, want)
	}

	restored := e.restart(t)
	if got, _ := restored.Get(1); !reflect.DeepEqual(got, sess) {
		t.Fatalf("restored %+v", got)
	}
	moved := e.uplinkPDR(t)
	if moved.Sdf == 0 || moved.Sdf == ul.Sdf || filtersOf(moved) != filtersOf(ul) {
		t.Fatalf("restored PDR %+v: the filters are not in a fresh slot", moved)
	}

	// Filters that let every packet through take no slot.
	open := figure10()
	open.PDRs[1].PDI.SDFFilters = filters(t, "permit out ip from any to assigned")
	check(t, restored.Replace(open))
	if p := e.uplinkPDR(t); p.Sdf != 0 {
		t.Errorf("a filter matching everything took slot %d", p.Sdf)
	}
}

// The PDR set of a key says which of its uplink PDRs have filters all of
// one family's addresses, by their place in the set; "assigned" or "any" on
// both sides, a mix, a downlink PDR or none do not count.
func TestSetFamilies(t *testing.T) {
	for desc, want := range map[string]uint8{
		"permit out 58 from ff02::2/128 to assigned":     upfxdp.SDFIPv6,
		"permit out 17 from 198.51.100.0/24 to assigned": upfxdp.SDFIPv4,
		"permit out 17 from any to assigned 53":          0,
	} {
		p := PDR{PDI: PDI{SourceInterface: InterfaceAccess, SDFFilters: filters(t, desc)}}
		if got := uplinkFamily(&p); got != want {
			t.Errorf("%q: family %d, want %d", desc, got, want)
		}
		p.PDI.SourceInterface = InterfaceCore
		if got := uplinkFamily(&p); got != 0 {
			t.Errorf("%q downlink: family %d, want none", desc, got)
		}
	}
	mixed := PDR{PDI: PDI{SourceInterface: InterfaceAccess, SDFFilters: filters(t,
		"permit out 58 from ff02::2/128 to assigned", "permit out 17 from 198.51.100.0/24 to assigned")}}
	if got := uplinkFamily(&mixed); got != 0 {
		t.Errorf("IPv4 and IPv6 filters: family %d, want none", got)
	}

	// Open5GS's router solicitations' PDR (precedence 255) before the
	// uplink PDR (precedence 65535), and one of IPv4 filters last.
	e := newStoreEnv(t)
	s := figure10()
	rs, v4 := s.PDRs[1], s.PDRs[1]
	rs.ID, rs.Precedence, rs.PDI.UEAddress = 11, 255, netip.Prefix{}
	rs.PDI.SDFFilters = filters(t, "permit out 58 from ff02::2/128 to assigned")
	s.PDRs[1].Precedence = 65535
	v4.ID, v4.Precedence = 12, 65536
	v4.PDI.SDFFilters = filters(t, "permit out 17 from 198.51.100.0/24 to assigned")
	s.PDRs = append(s.PDRs, rs, v4)
	check(t, e.store.Create(s))
	set, err := e.dp.Uplink(atN3(100))
	check(t, err)
	if set.Count != 3 || set.OnlyV6 != 1<<0 || set.OnlyV4 != 1<<2 {
		t.Fatalf("uplink set %+v: want 3 PDRs, the first IPv6 only, the last IPv4 only", set)
	}
}
