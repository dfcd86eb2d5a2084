package demo

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The CU-UP's part, interrupted (its workers stop with the context), says
// so rather than blaming the packets that then went unanswered.
func TestCUUPInterrupted(t *testing.T) {
	testsupport.NeedRoot(t, "network namespaces and XDP")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runCUUP(ctx, io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("the CU-UP's part, interrupted: %v; want the interruption", err)
	}
}
