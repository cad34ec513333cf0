package freeport

import (
	"fmt"
	"net"
	"testing"
)

// TestPorts: the ports are distinct, in range and can be listened on.
func TestPorts(t *testing.T) {
	ports := Ports(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if p < First || p > Last {
			t.Errorf("port %d is outside %d–%d", p, First, Last)
		}
		if seen[p] {
			t.Errorf("port %d chosen twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d: %v", p, err)
			continue
		}
		defer l.Close()
	}
}

// TestPortSkipsATakenPort: a port something listens on is never chosen.
func TestPortSkipsATakenPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	// Hold a tenth of the range; none of them may come back.
	for p := First; p <= Last; p += 10 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		held = append(held, l)
		taken[p] = true
	}
	for range 200 {
		if p := Port(t); taken[p] {
			t.Fatalf("port %d is held by the test, yet chosen", p)
		}
	}
}
