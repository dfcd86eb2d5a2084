package n4

import (
	"slices"

	"github.com/wmnsk/go-pfcp/ie"
)

// csidNode is the node of an FQ-CSID (§8.2.46): its Node-ID type and
// address.
type csidNode struct {
	typ  uint8
	addr string
}

// csidSets are the connection sets (TS 23.007) a session belongs to, or a
// Session Set Deletion names: CSIDs by node.
type csidSets map[csidNode][]uint16

// fqCSIDs reads the FQ-CSIDs of a message body: there may be several
// (SGW-C, PGW-C/SMF, MME...), of which go-pfcp keeps the last only, so the
// body is parsed again (only when go-pfcp found one).
func fqCSIDs(body []byte) (csidSets, *refusal) {
	ies, err := ie.ParseMultiIEs(body)
	if err != nil {
		return nil, nil // the server parsed the same body: no FQ-CSID can be cut short
	}
	var sets csidSets
	for _, i := range ies {
		if i.Type != ie.FQCSID {
			continue
		}
		typ, err := i.NodeIDType()
		var addr []byte
		var ids []uint16
		if err == nil {
			addr, err = i.NodeAddress()
		}
		if err == nil {
			ids, err = i.CSIDs()
		}
		if err != nil {
			return nil, incorrect(ie.FQCSID, "request", err)
		}
		if sets == nil {
			sets = csidSets{}
		}
		n := csidNode{typ, string(addr)}
		sets[n] = append(sets[n], ids...)
	}
	return sets, nil
}

// meets says whether two sets share a CSID of a node.
func (a csidSets) meets(b csidSets) bool {
	for n, ids := range a {
		if slices.ContainsFunc(b[n], func(id uint16) bool { return slices.Contains(ids, id) }) {
			return true
		}
	}
	return false
}
