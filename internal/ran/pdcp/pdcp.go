// Package pdcp is the PDCP layer of the CU-UP for data radio bearers (TS
// 38.323): the transmitting entity (Transmitter, with Queue holding SDUs
// the DU's flow control does not yet take), the receiving entity
// (Receiver: COUNT reconstruction, duplicate and window discard,
// reordering), which hands control PDUs up untouched.
//
// Entities work in place on the caller's buffers and do not allocate per
// packet; the ciphering and integrity algorithms come in through the Cipher
// and Integrity interfaces. Time is whatever the caller says it is: every
// call that may start or fire a timer takes now, and nothing here runs a
// goroutine. An entity is not safe for concurrent use.
package pdcp

import (
	"errors"
	"fmt"
	"time"
)

// Cipher is a ciphering algorithm under its key (NEA, TS 33.501 D.2). dst
// and src may be the same slice: entities cipher in place.
type Cipher interface {
	XORKeyStream(count uint32, bearer, direction uint8, dst, src []byte)
}

// Integrity is an integrity algorithm under its key (NIA, TS 33.501 D.3).
type Integrity interface {
	MAC(count uint32, bearer, direction uint8, message []byte) [4]byte
}

// Direction is the DIRECTION input of the security algorithms.
type Direction uint8

const (
	Uplink   Direction = 0
	Downlink Direction = 1
)

// MACLen is the length of the MAC-I field (38.323 6.3.4).
const MACLen = 4

// MaxSDUSize is the largest PDCP SDU and control PDU (38.323).
const MaxSDUSize = 9000

// Infinity, as a timer duration, is a timer that never expires: the
// discardTimer value infinity, or t-Reordering left absent (TS 38.331).
const Infinity time.Duration = 1<<63 - 1

// Config is what both entities of a DRB need.
type Config struct {
	SNSize    int   // 12 or 18 (bits)
	DRB       uint8 // 1 to 32; the BEARER input is DRB-1
	Direction Direction
	// Cipher is nil for NEA0 (no ciphering) and Integrity nil when the DRB
	// has no integrity protection: its PDUs then carry no MAC-I.
	Cipher    Cipher
	Integrity Integrity
	// SDAPHeader says the SDUs begin with an SDAP header (or are an SDAP
	// control PDU) of sdap.HeaderLen octets: integrity protected but not
	// ciphered, so that it is read before deciphering (38.323 5.8).
	SDAPHeader bool
}

// sdapHeaderLen is the length of the SDAP header ciphering skips.
func (c *Config) sdapHeaderLen() int {
	if c.SDAPHeader {
		return 1
	}
	return 0
}

// cipher ciphers or deciphers, in place, the data part (SDU and MAC-I)
// starting at data, past its SDAP header.
func (c *Config) cipher(count uint32, data []byte) {
	if c.Cipher == nil {
		return
	}
	data = data[min(c.sdapHeaderLen(), len(data)):]
	c.Cipher.XORKeyStream(count, c.bearer(), uint8(c.Direction), data, data)
}

func (c *Config) check() error {
	if c.SNSize != 12 && c.SNSize != 18 {
		return fmt.Errorf("PDCP SN size %d bits: DRBs use 12 or 18", c.SNSize)
	}
	if c.DRB == 0 || c.DRB > 32 {
		return fmt.Errorf("DRB ID %d out of 1..32", c.DRB)
	}
	if c.Direction > Downlink {
		return fmt.Errorf("direction %d is neither uplink (0) nor downlink (1)", c.Direction)
	}
	return nil
}

func (c *Config) bearer() uint8 { return c.DRB - 1 }

// headerLen is the length of a data PDU header: D/C, R bits and the SN
// fill 2 octets for 12-bit SNs and 3 for 18-bit ones (38.323 6.2.2.2-3).
func (c *Config) headerLen() int { return (c.SNSize + 4 + 7) / 8 }

func (c *Config) macLen() int {
	if c.Integrity == nil {
		return 0
	}
	return MACLen
}

// dataBit is the D/C bit of the first octet: 1 for a data PDU.
const dataBit = 0x80

// maxCount is the highest COUNT: the transmitter never wraps it (38.323
// 5.2.1), and the receiver takes nothing beyond it.
const maxCount = 1<<32 - 1

// putHeader writes the data PDU header of sn into b[:headerLen].
func (c *Config) putHeader(b []byte, sn uint32) {
	if c.SNSize == 12 {
		b[0], b[1] = dataBit|byte(sn>>8)&0x0f, byte(sn)
		return
	}
	b[0], b[1], b[2] = dataBit|byte(sn>>16)&0x03, byte(sn>>8), byte(sn)
}

// headerSN reads the SN of a data PDU header, ignoring the R bits.
func (c *Config) headerSN(b []byte) uint32 {
	if c.SNSize == 12 {
		return uint32(b[0]&0x0f)<<8 | uint32(b[1])
	}
	return uint32(b[0]&0x03)<<16 | uint32(b[1])<<8 | uint32(b[2])
}

// Errors of Receiver.Receive for PDUs it discards; the Stats count each.
var (
	ErrIntegrity   = errors.New("integrity verification failed")
	ErrDuplicate   = errors.New("duplicate PDU")
	ErrOutOfWindow = errors.New("PDU older than the receive window")
	ErrMalformed   = errors.New("malformed PDU")
	// ErrBufferFull reports an out-of-order PDU dropped because the
	// reception buffer holds RxConfig.MaxBuffered SDUs already.
	ErrBufferFull = errors.New("reception buffer full")
)
