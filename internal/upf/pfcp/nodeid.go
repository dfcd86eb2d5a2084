package pfcp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/wmnsk/go-pfcp/ie"
)

// CheckNodeID reports whether s can be a PFCP Node ID (TS 29.244 §8.2.38):
// an IPv4 or IPv6 address, or a fully qualified domain name.
func CheckNodeID(s string) error {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%q: a Node ID cannot carry an IPv6 zone", s)
		}
		return nil
	}
	return checkFQDN(s)
}

func checkFQDN(s string) error {
	name := strings.TrimSuffix(s, ".")
	labels := strings.Split(name, ".")
	// An all-numeric last label is a mistyped IP address, not a name.
	if name == "" || len(name) > 253 || strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%q is not an IP address or a domain name", s)
	}
	for _, l := range labels {
		if !validLabel(l) {
			return fmt.Errorf("%q is not an IP address or a domain name: bad label %q", s, l)
		}
	}
	return nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// nodeIDIE encodes a Node ID that CheckNodeID accepted.
func nodeIDIE(s string) *ie.IE {
	return ie.NewNodeIDHeuristic(strings.TrimSuffix(s, "."))
}

var errBadNodeID = errors.New("no valid Node ID")

// decodeNodeID reads a peer's Node ID, checking what go-pfcp's NodeID()
// does not: value lengths and FQDN syntax. Names are case-insensitive, so
// they come back in lower case.
func decodeNodeID(i *ie.IE) (string, error) {
	if i == nil || len(i.Payload) < 2 {
		return "", errBadNodeID
	}
	p := i.Payload
	switch p[0] & 0x0f { // bits 5 to 8 are spare
	case ie.NodeIDIPv4Address:
		if len(p) >= 1+4 {
			return netip.AddrFrom4([4]byte(p[1:5])).String(), nil
		}
	case ie.NodeIDIPv6Address:
		if len(p) >= 1+16 {
			return netip.AddrFrom16([16]byte(p[1:17])).String(), nil
		}
	case ie.NodeIDFQDN:
		if name, ok := decodeFQDN(p[1:]); ok && checkFQDN(name) == nil {
			return strings.ToLower(name), nil
		}
	}
	return "", errBadNodeID
}

// decodeFQDN reads length-prefixed labels (TS 23.003 §19.4.2.1), tolerating
// the root label's terminating zero.
func decodeFQDN(b []byte) (string, bool) {
	var labels []string
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 && len(b) == 1 {
			break
		}
		if n == 0 || 1+n > len(b) {
			return "", false
		}
		labels = append(labels, string(b[1:1+n]))
		b = b[1+n:]
	}
	return strings.Join(labels, "."), true
}
