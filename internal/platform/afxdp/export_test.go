package afxdp

// What the tests read of a UMEM.

// FreeFrames is the number of frames in the pool.
func (u *UMEM) FreeFrames() int { return len(u.free) }

// RxOffset is where in its frame a received packet starts: every byte
// before it is headroom the caller may use.
func (u *UMEM) RxOffset() int { return int(u.rxOffset) }
