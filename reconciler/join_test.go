package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// withBootstrap gives the loop's reconciler an issuer whose tokens live
// ttl, and returns the key it seals under.
func (l *loop) withBootstrap(ttl time.Duration) *pki.Keyring {
	l.t.Helper()
	if err := natsbus.Ensure(l.t.Context(), l.js); err != nil {
		l.t.Fatal(err)
	}
	keys, _ := pki.NewKeyring([]byte(strings.Repeat("j", pki.KeySize)))
	store, _, err := pki.OpenStore(l.t.Context(), l.js, keys)
	if err != nil {
		l.t.Fatal(err)
	}
	l.opts.Bootstrap = bootstrap.NewIssuer(store, keys, ttl)
	return keys
}

// bootData opens a create task's bootstrap data as the worker would.
func (l *loop) bootData(keys *pki.Keyring, r received) *bootstrap.Data {
	l.t.Helper()
	ud, err := bootstrap.Open(keys, &r.task)
	if err != nil {
		l.t.Fatal(err)
	}
	d, err := bootstrap.Parse(ud)
	if err != nil {
		l.t.Fatal(err)
	}
	return d
}

// review asks the leader, as reviewer would, whether node may join c1 with
// token.
func (l *loop) review(reviewer, node, token string) wire.JoinVerdict {
	l.t.Helper()
	v, err := l.ask(reviewer, node, token)
	if err != nil {
		l.t.Fatal(err)
	}
	return v
}

// ask is review for any goroutine: it returns what went wrong.
func (l *loop) ask(reviewer, node, token string) (wire.JoinVerdict, error) {
	req, err := bootstrap.ReviewOf("c1", node, token)
	if err != nil {
		return wire.JoinVerdict{}, err
	}
	data, _ := wire.Encode(&req)
	msg, err := l.nc.Request(wire.JoinSubject("c1", reviewer), data, 5*time.Second)
	if err != nil {
		return wire.JoinVerdict{}, err
	}
	return wire.DecodeJoinVerdict(msg.Data)
}

// The leader admits a machine with the token issued to it, reviewed by
// its cluster's control plane, once; and refuses, saying why, a wrong
// token, a reviewer that is not the control plane, a machine it did not
// make, a used token and a machine that went.
func TestJoinReviews(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	keys := l.withBootstrap(time.Hour)
	var skew atomic.Int64 // the leader's clock runs ahead by this much
	l.opts.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	// The skew passes the task timeout too: a tick while it lasts would
	// publish the control plane's create again, and the worker's create
	// below would not be the next task.
	l.opts.TaskTimeout = time.Hour
	metrics := NewMetrics(nil)
	l.opts.Metrics = metrics
	l.start()
	cp := l.nextTasks(1)[0]
	cpName := cp.task.Machine.Name
	d := l.bootData(keys, cp)
	if !d.Init || d.Node != cpName {
		t.Fatalf("the first control plane's data: init %v, node %s", d.Init, d.Node)
	}
	if strings.Contains(string(cp.msg.Data()), d.Token) || strings.Contains(string(cp.msg.Data()), "PRIVATE KEY") {
		t.Fatal("the task message holds the token or a key in plain text")
	}
	other := pki.NewToken(cpName, time.Hour, time.Now()).String()
	for _, c := range []struct {
		reviewer, node, token, want string
	}{
		{cpName, cpName, other, "not the one issued to machine c1/" + cpName},
		{"someone", cpName, d.Token, "someone is not a control-plane machine of cluster c1"},
		{cpName, "ghost", d.Token, "no machine ghost in cluster c1"},
	} {
		if v := l.review(c.reviewer, c.node, c.token); v.Joined || !strings.Contains(v.Reason, c.want) {
			t.Errorf("review by %s of %s: %+v, want refused: %s", c.reviewer, c.node, v, c.want)
		}
	}
	// Malformed reviews are refused, saying why, and counted; the leader
	// goes on.
	req, err := bootstrap.ReviewOf("c1", cpName, d.Token)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := wire.Encode(&req)
	for _, c := range []struct {
		subject string
		data    []byte
		want    string
	}{
		{wire.JoinSubject("c1", cpName), []byte("{not json"), "malformed join review"},
		{wire.SubjectJoin + ".c1", good, "is not gitfleet.join.<cluster>.<reviewer>"},
		{wire.JoinSubject("c2", cpName), good, "a review on gitfleet.join.c2." + cpName + " is about cluster c1"},
	} {
		msg, err := l.nc.Request(c.subject, c.data, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		if v, err := wire.DecodeJoinVerdict(msg.Data); err != nil || v.Joined || !strings.Contains(v.Reason, c.want) {
			t.Errorf("%s %q: %+v %v, want refused: %s", c.subject, c.data, v, err, c.want)
		}
	}
	if n := counter(t, metrics.Malformed.WithLabelValues("join")); n != 2 {
		t.Errorf("malformed join reviews counted: %v, want 2", n)
	}
	if v := l.review(cpName, cpName, d.Token); !v.Joined {
		t.Fatalf("the control plane's own token: %+v", v)
	}
	if rec := l.records()[cpName]; rec.Joined.IsZero() {
		t.Error("the record does not say the machine joined")
	}
	// The same join asked again at once (its answer lost) is answered the
	// same; once the retry window is over, the token admits nobody.
	if v := l.review(cpName, cpName, d.Token); !v.Joined {
		t.Errorf("the same join asked again: %+v", v)
	}
	skew.Store(int64(bootstrap.RetryWindow + time.Minute))
	if v := l.review(cpName, cpName, d.Token); v.Joined || !strings.Contains(v.Reason, "token is used") {
		t.Errorf("a used token: %+v", v)
	}
	skew.Store(0)

	// The worker joins through the control plane; the same token, once
	// its machine is deleted, is refused.
	l.answer(cp, wire.PhaseRunning)
	w := l.nextTasks(1)[0]
	wd := l.bootData(keys, w)
	if wd.Init || wd.ControlPlane || len(wd.CACertHashes) != 1 {
		t.Fatalf("the worker's data: %+v", wd)
	}
	l.answer(w, wire.PhaseRunning)
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 0))
	l.repo.commit("no workers")
	l.apply()
	del := l.nextTasks(1)[0]
	l.answer(del, wire.PhaseDeleted)
	l.waitFor("the worker's record to go", func() (bool, string) {
		_, ok := l.records()[w.task.Machine.Name]
		return !ok, "still there"
	})
	if v := l.review(cpName, w.task.Machine.Name, wd.Token); v.Joined || !strings.Contains(v.Reason, "no machine") {
		t.Errorf("the token of a machine that went: %+v", v)
	}
	// Its revocation is written aside: it is gone soon after the record.
	kv, _ := l.js.KeyValue(t.Context(), wire.BucketPKI)
	l.waitFor("the token of a machine that went to be revoked", func() (bool, string) {
		_, err := kv.Get(t.Context(), "token.c1."+w.task.Machine.Name)
		return err != nil, "still stored"
	})
}

// Reviews that arrive together are answered together, each as it would be
// alone: three workers join; a review of one of them repeated at once (its
// answer lost) is answered the same; a forged token for another is
// refused whichever of its two reviews comes first.
func TestABurstOfJoinReviews(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 3)
	keys := l.withBootstrap(time.Hour)
	l.start()
	cp := l.nextTasks(1)[0]
	cpName := cp.task.Machine.Name
	if v := l.review(cpName, cpName, l.bootData(keys, cp).Token); !v.Joined {
		t.Fatalf("the control plane: %+v", v)
	}
	l.answer(cp, wire.PhaseRunning)
	workers := l.nextTasks(3)
	type ask struct{ node, token string }
	var asks []ask
	for _, w := range workers {
		asks = append(asks, ask{w.task.Machine.Name, l.bootData(keys, w).Token})
	}
	forged := pki.NewToken(asks[1].node, time.Hour, time.Now()).String()
	asks = append(asks, ask{asks[0].node, asks[0].token}, ask{asks[1].node, forged})
	verdicts := make([]wire.JoinVerdict, len(asks))
	errs := make([]error, len(asks))
	var wg sync.WaitGroup
	for i, a := range asks {
		wg.Go(func() { verdicts[i], errs[i] = l.ask(cpName, a.node, a.token) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, v := range verdicts {
		want := i != 4 // all join but the forged token
		if v.Joined != want {
			t.Errorf("review %d of %s: %+v; want joined %v", i, asks[i].node, v, want)
		}
	}
	if !strings.Contains(verdicts[4].Reason, "not the one issued") {
		t.Errorf("the forged token: %q", verdicts[4].Reason)
	}
	recs := l.records()
	for _, a := range asks[:3] {
		if rec := recs[a.node]; rec == nil || rec.Joined.IsZero() {
			t.Errorf("%s: the record does not say it joined", a.node)
		}
	}
}

// A token past its TTL is refused, saying when it expired.
func TestJoinReviewExpiredToken(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	keys := l.withBootstrap(time.Nanosecond)
	l.start()
	cp := l.nextTasks(1)[0]
	d := l.bootData(keys, cp)
	if v := l.review(cp.task.Machine.Name, cp.task.Machine.Name, d.Token); v.Joined || !strings.Contains(v.Reason, "expired at") {
		t.Errorf("an expired token: %+v", v)
	}
}

// A create published again (its task timed out) carries the token the
// first attempt had: the machine that attempt made may hold it already.
func TestRepublishedCreateKeepsItsToken(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	keys := l.withBootstrap(time.Hour)
	l.opts.TaskTimeout = 300 * time.Millisecond
	l.start()
	first := l.nextTasks(1)[0]
	again := l.nextTasks(1)[0] // nobody answered: the next attempt
	if again.task.ID != first.task.ID || again.task.Attempt <= first.task.Attempt {
		t.Fatalf("second task %s#%d after %s#%d", again.task.ID, again.task.Attempt, first.task.ID, first.task.Attempt)
	}
	if a, b := l.bootData(keys, first).Token, l.bootData(keys, again).Token; a != b {
		t.Errorf("attempt %d carries another token than attempt %d", again.task.Attempt, first.task.Attempt)
	}
}
