package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/sources"
)

// A leader that starts after several revisions were read gets the newest
// good one and the newest rejected one, in that order, and never an older
// one afterwards.
func TestRevisionBoxNeverGoesBack(t *testing.T) {
	in := make(chan *sources.Revision, 8)
	box := newRevisionBox(in)
	bad := &sources.Revision{Commit: "d", Err: errors.New("invalid")}
	for _, r := range []*sources.Revision{{Commit: "a"}, {Commit: "b"}, {Commit: "c"}, bad} {
		in <- r
	}
	deadline := time.Now().Add(5 * time.Second)
	for g, l := box.get(); l == nil || l.Commit != "d"; g, l = box.get() {
		if time.Now().After(deadline) {
			t.Fatalf("box did not take the revisions: good %v latest %v", g, l)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	revs := box.follow(ctx)
	var got []string
	for _, want := range []string{"c", "d"} {
		select {
		case r := <-revs:
			got = append(got, r.Commit)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v, then nothing; want %s next", got, want)
		}
	}
	if got[0] != "c" || got[1] != "d" {
		t.Fatalf("a new leader got %v, want [c d]", got)
	}
	in <- &sources.Revision{Commit: "e"}
	select {
	case r := <-revs:
		if r.Commit != "e" {
			t.Fatalf("after e was read, the leader got %s", r.Commit)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a new revision was not delivered")
	}
	close(in)
}
