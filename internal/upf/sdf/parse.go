package sdf

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
	protoSCTP   = 132
)

// protocols are the protocol names Parse accepts besides numbers: "ip" from
// RFC 6733 and the IANA keywords of the protocols flow descriptions name.
var protocols = map[string]uint8{
	"ip":        0,
	"icmp":      protoICMP,
	"tcp":       protoTCP,
	"udp":       protoUDP,
	"ipv6-icmp": protoICMPv6,
	"sctp":      protoSCTP,
}

var wantProtocol = "want a protocol number 0-255 or one of " +
	strings.Join(slices.Sorted(maps.Keys(protocols)), ", ")

// SyntaxError tells which token of a flow description Parse rejected.
type SyntaxError struct {
	Offset int    // byte offset of Token in the description
	Token  string // empty at the end of the description
	Reason string
}

func (e *SyntaxError) Error() string {
	tok := "end of description"
	if e.Token != "" {
		tok = strconv.Quote(e.Token)
	}
	return fmt.Sprintf("flow description: %s at offset %d: %s", tok, e.Offset, e.Reason)
}

// Parse parses a flow description:
//
//	permit out <proto> from <src> [<ports>] to <dst> [<ports>]
//
// <proto> is a number 0-255 or one of ip (any protocol), icmp, tcp, udp,
// ipv6-icmp and sctp. An address is "any",
// "assigned" (the UE), or an IPv4 or IPv6 address with an optional /length;
// bits past the length are ignored. Ports are a comma-separated list of
// ports and lo-hi ranges, allowed with tcp, udp, sctp and ip only.
// Tokens may be separated by any blanks, and blanks may surround "," and
// "-" in port lists. Whatever TS 29.212 §5.4.2 rules out is an error: an
// action other than "permit", a direction other than "out", the "!"
// modifier, options.
func Parse(desc string) (Filter, error) {
	sc := scanner{s: desc}
	if err := sc.expect("permit", `want "permit", the only action TS 29.212 §5.4.2 allows`); err != nil {
		return Filter{}, err
	}
	if err := sc.expect("out", `want "out", the only direction TS 29.212 §5.4.2 allows`); err != nil {
		return Filter{}, err
	}
	tok, off := sc.next()
	proto, ok := protocols[tok]
	if !ok {
		n, isNum := decimal(tok, 255)
		if !isNum {
			return Filter{}, sc.fail(off, wantProtocol)
		}
		proto = uint8(n)
	}
	f := Filter{Proto: proto}
	var err error
	if err = sc.expect("from", `want "from"`); err != nil {
		return Filter{}, err
	}
	if f.Src, err = sc.endpoint(proto); err != nil {
		return Filter{}, err
	}
	if err = sc.expect("to", `want "to"`); err != nil {
		return Filter{}, err
	}
	dstOff := sc.skipBlanks()
	if f.Dst, err = sc.endpoint(proto); err != nil {
		return Filter{}, err
	}
	if f.Src.Prefix.IsValid() && f.Dst.Prefix.IsValid() && f.Src.Prefix.Addr().Is4() != f.Dst.Prefix.Addr().Is4() {
		return Filter{}, sc.fail(dstOff, "source and destination are of different IP versions, so no packet could match")
	}
	if tok, off := sc.next(); tok != "" {
		return Filter{}, sc.fail(off, "want end of description: TS 29.212 §5.4.2 allows no options")
	}
	return f, nil
}

// scanner reads a flow description token by token.
type scanner struct {
	s   string
	off int // start of the unread rest of s
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// skipBlanks consumes blanks and returns the offset of what follows.
func (sc *scanner) skipBlanks() int {
	for sc.off < len(sc.s) && isBlank(sc.s[sc.off]) {
		sc.off++
	}
	return sc.off
}

// next consumes the next blank-delimited token and returns it with its
// offset; the token is empty at the end.
func (sc *scanner) next() (string, int) {
	start := sc.skipBlanks()
	for sc.off < len(sc.s) && !isBlank(sc.s[sc.off]) {
		sc.off++
	}
	return sc.s[start:sc.off], start
}

// skip consumes c if it is the next byte past blanks.
func (sc *scanner) skip(c byte) bool {
	save := sc.off
	if i := sc.skipBlanks(); i < len(sc.s) && sc.s[i] == c {
		sc.off++
		return true
	}
	sc.off = save
	return false
}

func (sc *scanner) expect(word, reason string) error {
	if tok, off := sc.next(); tok != word {
		return sc.fail(off, reason)
	}
	return nil
}

// fail reports the blank-delimited token at off.
func (sc *scanner) fail(off int, reason string) error {
	end := off
	for end < len(sc.s) && !isBlank(sc.s[end]) {
		end++
	}
	return &SyntaxError{Offset: off, Token: sc.s[off:end], Reason: reason}
}

// endpoint parses an address and its optional ports under protocol proto.
func (sc *scanner) endpoint(proto uint8) (Endpoint, error) {
	tok, off := sc.next()
	var e Endpoint
	switch {
	case tok == "any":
	case tok == "assigned":
		e.Assigned = true
	case strings.HasPrefix(tok, "!"):
		return Endpoint{}, sc.fail(off, `TS 29.212 §5.4.2 does not allow the "!" modifier`)
	default:
		p, reason := parsePrefix(tok)
		if reason != "" {
			return Endpoint{}, sc.fail(off, reason)
		}
		e.Prefix = p
	}
	portsOff := sc.skipBlanks()
	if portsOff == len(sc.s) || sc.s[portsOff] < '0' || sc.s[portsOff] > '9' {
		return e, nil
	}
	if proto != 0 && !hasPorts(proto) {
		return Endpoint{}, sc.fail(portsOff, fmt.Sprintf("ports need protocol tcp, udp, sctp or ip, not %d", proto))
	}
	var err error
	e.Ports, err = sc.ports()
	return e, err
}

// parsePrefix parses an address with an optional /length; on failure it
// returns why.
func parsePrefix(s string) (netip.Prefix, string) {
	addr, length, hasLength := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, `want "any", "assigned", or an IP address or prefix`
	}
	bits := a.BitLen()
	if hasLength {
		n, ok := decimal(length, bits)
		if !ok {
			return netip.Prefix{}, fmt.Sprintf("want a prefix length 0-%d after the \"/\"", bits)
		}
		bits = n
	}
	return netip.PrefixFrom(a, bits).Masked(), ""
}

// ports parses {port|lo-hi}[,...].
func (sc *scanner) ports() ([]PortRange, error) {
	var list []PortRange
	for {
		lo, off, err := sc.port()
		if err != nil {
			return nil, err
		}
		hi := lo
		if sc.skip('-') {
			if hi, _, err = sc.port(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, sc.fail(off, fmt.Sprintf("port range %d-%d is reversed", lo, hi))
			}
		}
		list = append(list, PortRange{lo, hi})
		if !sc.skip(',') {
			return list, nil
		}
	}
}

// port parses a port number, which ends at a blank, "," or "-", and
// returns it with its offset.
func (sc *scanner) port() (uint16, int, error) {
	start := sc.skipBlanks()
	for sc.off < len(sc.s) && !isBlank(sc.s[sc.off]) && sc.s[sc.off] != ',' && sc.s[sc.off] != '-' {
		sc.off++
	}
	n, ok := decimal(sc.s[start:sc.off], 65535)
	if !ok {
		return 0, start, sc.fail(start, "want a port number 0-65535")
	}
	return uint16(n), start, nil
}

// decimal parses s as a decimal number up to limit. Unlike strconv.Atoi it
// rejects signs.
func decimal(s string, limit int) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int(c-'0'); n > limit {
			return 0, false
		}
	}
	return n, true
}
