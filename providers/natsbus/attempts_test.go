package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers/natsbus"
)

// placementError is what a server answers a stream of three replicas while
// its meta leader counts a peer offline (seen from a cluster under load).
func placementError() error {
	return fmt.Errorf("create stream: %w", &jetstream.APIError{Code: 400, ErrorCode: 10005,
		Description: "no suitable peers for placement, peer offline"})
}

// TestAttemptsAsksAgainWhileAPeerIsOffline: a placement refused for an
// offline peer is asked again until it is placed or ctx ends (then the
// refusal is the error); any other API error is returned at once.
func TestAttemptsAsksAgainWhileAPeerIsOffline(t *testing.T) {
	calls := 0
	err := natsbus.Attempts(t.Context(), func(context.Context) error {
		if calls++; calls < 3 {
			return placementError()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("placed on the third attempt: err %v after %d calls", err, calls)
	}

	calls = 0
	other := &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}
	err = natsbus.Attempts(t.Context(), func(context.Context) error { calls++; return other })
	if !errors.Is(err, other) || calls != 1 {
		t.Errorf("another API error: err %v after %d calls, want it at once", err, calls)
	}

	calls = 0
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	err = natsbus.Attempts(ctx, func(context.Context) error { calls++; return placementError() })
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != 10005 || calls < 2 {
		t.Errorf("a peer offline for good: err %v after %d calls, want the refusal after several", err, calls)
	}
}
