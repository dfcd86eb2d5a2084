package afxdp

// What the tests read and do of a UMEM.

// FreeFrames is the number of frames in the pool.
func (u *UMEM) FreeFrames() int { return len(u.free) }

// RxOffset is where in its frame a received packet starts: every byte
// before it is headroom the caller may use.
func (u *UMEM) RxOffset() int { return int(u.rxOffset) }

// Reslice is d with the packet running from byte from to byte to of it:
// a negative from prepends headroom, a to past d.Len appends tailroom. It
// is false when that leaves the frame.
func (u *UMEM) Reslice(d Desc, from, to int) (Desc, bool) {
	start := int64(d.Addr) + int64(from)
	base := int64(d.Addr &^ (FrameSize - 1))
	if from > to || start < base || int64(d.Addr)+int64(to) > base+FrameSize {
		return d, false
	}
	return Desc{Addr: uint64(start), Len: uint32(to - from)}, true
}
