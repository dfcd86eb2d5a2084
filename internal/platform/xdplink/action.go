package xdplink

import "fmt"

// Action is an XDP program's verdict (the kernel's enum xdp_action), as
// BPF_PROG_TEST_RUN returns it.
type Action uint32

const (
	Aborted Action = iota
	Drop
	Pass
	TX
	Redirect
)

// Context is struct xdp_md, the context a test run of an XDP program
// (BPF_PROG_TEST_RUN) takes and gives back: offsets into the data passed.
type Context struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

var actionNames = [...]string{"XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("XDP(%d)", uint32(a))
}
