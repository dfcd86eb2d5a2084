package n4

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

const tSDFFilter = 23

// SDF Filter flags, octet 5 (§8.2.5).
const (
	sdfFlagFD  = 0x01
	sdfFlagTTC = 0x02
	sdfFlagBID = 0x10
)

// sdfFilterIE §8.2.5: flags, a spare octet, then the fields the flags
// announce: Flow Description (2-octet length, text), ToS Traffic Class
// (2 octets), ..., SDF Filter ID (4 octets).
func sdfFilterIE(flags byte, fields ...[]byte) []byte {
	return tlv(tSDFFilter, append([][]byte{{flags, 0}}, fields...)...)
}

func flowDescription(desc string) []byte { return append(be16(uint16(len(desc))), desc...) }

func sdfFilterFD(desc string) []byte { return sdfFilterIE(sdfFlagFD, flowDescription(desc)) }

// sdfSession is an Open5GS-shaped session whose uplink PDR 1 and downlink
// PDR 2 carry the SDF Filter IEs given.
func sdfSession(cpSEID uint64, ue string, ul, dl [][]byte) [][]byte {
	ulPDI := append([][]byte{sourceInterface(ifAccess), fteidChoose(5), ueIPv4(ue, false)}, ul...)
	dlPDI := append([][]byte{sourceInterface(ifCore), ueIPv4(ue, true)}, dl...)
	return [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(ulPDI...), outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(dlPDI...), farID(2)),
		coreFAR(), accessFAR(0x0a0b0c0d, gnb)}
}

func mustFilters(t *testing.T, descs ...string) []session.SDFFilter {
	t.Helper()
	var fs []session.SDFFilter
	for _, d := range descs {
		f, err := sdf.Parse(d)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, session.SDFFilter{Filter: f})
	}
	return fs
}

// establishFiltered establishes an sdfSession for ue whose PDRs carry the
// SDF Filter IEs given, and checks that the stored session's PDRs all keep
// the one filter desc; it returns the uplink PDR's TEID.
func (e *env) establishFiltered(t *testing.T, ue string, ul, dl [][]byte, desc string) uint32 {
	t.Helper()
	r := e.establish("smf1", sdfSession(0x1001, ue, ul, dl)...)
	seid := r.upSEID(t)
	got, _ := e.store.Get(seid)
	for _, p := range got.PDRs {
		if !reflect.DeepEqual(p.PDI.SDFFilters, mustFilters(t, desc)) {
			t.Errorf("PDR %d: SDF filters %v", p.ID, p.PDI.SDFFilters)
		}
	}
	return chosenTEID(t, r.created(t)[1])
}

// sdfOf returns the data-path filters of the PDR a key's set starts with;
// nil when it has none.
func (e *env) sdfOf(set upfxdp.PDRSet, err error) *upfxdp.SDFSet {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.dp.PDR(set.Pdr[0])
	if err != nil {
		e.t.Fatal(err)
	}
	if p.Sdf == 0 {
		return nil
	}
	s, err := e.dp.SDFSet(p.Sdf)
	if err != nil {
		e.t.Fatal(err)
	}
	return &s
}

// Open5GS sends "permit out ip from any to assigned" (with a filter ID
// here): kept in the session, it costs the data path nothing.
func TestEstablishOpen5GSSDFFilter(t *testing.T) {
	e := newEnv(t)
	const desc = "permit out ip from any to assigned"
	withID := sdfFilterIE(sdfFlagFD|sdfFlagBID, flowDescription(desc), be32(1))
	teid := e.establishFiltered(t, "10.60.0.1", [][]byte{withID}, [][]byte{sdfFilterFD(desc)}, desc)
	ue := netip.MustParseAddr("10.60.0.1")
	if s := e.sdfOf(e.dp.Uplink(atN3(teid))); s != nil {
		t.Errorf("uplink PDR filters %+v, want none", s)
	}
	if s := e.sdfOf(e.dp.Downlink(ue)); s != nil {
		t.Errorf("downlink PDR filters %+v, want none", s)
	}
}

// free5GC writes the remote side's prefix and ports: the downlink PDR
// matches them as the source, the uplink PDR as the destination.
func TestEstablishFree5GCSDFFilter(t *testing.T) {
	e := newEnv(t)
	const desc = "permit out 17 from 10.60.0.0/16 8000-8080 to 10.1.0.1"
	fd := sdfFilterFD(desc)
	teid := e.establishFiltered(t, "10.1.0.1", [][]byte{fd}, [][]byte{fd}, desc)
	remote, remoteMask, _ := upfxdp.SDFPrefix(netip.MustParsePrefix("10.60.0.0/16"))
	ue, ueMask, _ := upfxdp.SDFPrefix(netip.MustParsePrefix("10.1.0.1/32"))
	up := upfxdp.SDFFilter{Proto: 17, Flags: upfxdp.SDFIPv4 | upfxdp.SDFPorts, Src: ue, SrcMask: ueMask,
		Dst: remote, DstMask: remoteMask, SportHi: 0xffff, DportLo: 8000, DportHi: 8080}
	down := upfxdp.SDFFilter{Proto: 17, Flags: upfxdp.SDFIPv4 | upfxdp.SDFPorts, Src: remote, SrcMask: remoteMask,
		Dst: ue, DstMask: ueMask, SportLo: 8000, SportHi: 8080, DportHi: 0xffff}
	if s := e.sdfOf(e.dp.Uplink(atN3(teid))); s == nil || *s != (upfxdp.SDFSet{Count: 1, Filter: [4]upfxdp.SDFFilter{up}}) {
		t.Errorf("uplink PDR filters %+v, want %+v", s, up)
	}
	if s := e.sdfOf(e.dp.Downlink(netip.MustParseAddr("10.1.0.1"))); s == nil ||
		*s != (upfxdp.SDFSet{Count: 1, Filter: [4]upfxdp.SDFFilter{down}}) {
		t.Errorf("downlink PDR filters %+v, want %+v", s, down)
	}
}

// SDF filters the UPF cannot apply are refused with the PDR that carries
// them, in establishments and modifications alike, and change nothing.
func TestSDFFilterRefusals(t *testing.T) {
	e := newEnv(t)
	seid := e.establish("smf1", sdfSession(0x1001, "10.60.0.1", nil, nil)...).upSEID(t)
	before := e.state()
	tcp := sdfFilterFD("permit out 6 from any to assigned")
	for i, c := range []struct {
		name string
		sdf  []byte
	}{
		{name: "reversed port range", sdf: sdfFilterFD("permit out 17 from 10.60.0.0/16 8080-8000 to assigned")},
		{name: "not a flow description", sdf: sdfFilterFD("permit in ip from any to assigned")},
		{name: "flow description cut short", sdf: tlv(tSDFFilter, []byte{sdfFlagFD, 0, 0, 40}, []byte("permit out ip"))},
		{name: "ToS traffic class", sdf: sdfFilterIE(sdfFlagFD|sdfFlagTTC, flowDescription("permit out ip from any to assigned"), []byte{0xb8, 0xfc})},
		{name: "filter ID alone", sdf: sdfFilterIE(sdfFlagBID, be32(1))},
		{name: "five filters", sdf: slices.Concat(tcp, tcp, tcp, tcp, tcp)},
	} {
		// Each case with its own UE address and PDR ID, so that none
		// depends on another's refusal.
		t.Run(c.name, func(t *testing.T) {
			ue := netip.AddrFrom4([4]byte{10, 60, 1, byte(i)}).String()
			e.establish("smf1", sdfSession(0x2000+uint64(i), ue, nil, [][]byte{c.sdf})...).expect(t, causeRuleFailure, failedPDR(2), nil)
			e.unchanged(before)
			id := uint16(10 + i)
			e.modify("smf1", seid, createPDR(pdrID(id), precedence(10), pdi(sourceInterface(ifAccess), fteidChoose(6), c.sdf),
				outerHeaderRemoval(0), farID(1))).expect(t, causeRuleFailure, failedPDR(id), nil)
			e.unchanged(before)
		})
	}
}
