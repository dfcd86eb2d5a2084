package main

import (
	"os"
	"os/exec"
	"testing"
)

// xdp5g writing to a pipe whose reader is gone goes on (and so removes
// what it set up) instead of dying of SIGPIPE.
func TestOutputToClosedPipe(t *testing.T) {
	if os.Getenv("XDP5G_TEST_CLOSED_STDOUT") == "1" {
		os.Args = []string{"xdp5g", "help"} // writes the usage to stdout
		main()
		os.Exit(0)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutputToClosedPipe$")
	cmd.Env = append(os.Environ(), "XDP5G_TEST_CLOSED_STDOUT=1")
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if err != nil {
		t.Fatalf("xdp5g help with its output's reader gone: %v", err)
	}
}
