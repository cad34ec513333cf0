// Package freeport picks loopback TCP ports for tests that must name a
// port before something binds it (a server given its peers' addresses, a
// process given --listen).
//
// Asking the kernel for port 0 and closing the listener leaves a window in
// which the kernel may give the same port to any other listener on port 0
// or outgoing connection, since it is in the kernel's ephemeral range. The
// ports here come from 10000–19999, below that range (32768 up by default
// on Linux) and below the local provider's endpoints (20000–32767), so only
// another explicit choice can take one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
)

// First and Last bound the ports chosen.
const (
	First = 10000
	Last  = 19999
)

// Ports returns n distinct ports on 127.0.0.1 that nothing listens on now.
func Ports(tb testing.TB, n int) []int {
	tb.Helper()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			tb.Fatalf("no free port from %d to %d", First, Last)
		}
		p := First + rand.IntN(Last-First+1)
		if slices.Contains(ports, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}

// Port returns one port on 127.0.0.1 that nothing listens on now.
func Port(tb testing.TB) int {
	tb.Helper()
	return Ports(tb, 1)[0]
}
