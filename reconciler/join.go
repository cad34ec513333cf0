package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/internal/workers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// handleJoins answers control planes' reviews of joining machines' tokens
// (wire.JoinReview on gitfleet.join.<cluster>.<reviewer>): the machine
// must be one this daemon made and is not deleting, the reviewer its
// cluster's control plane (or, for machines without a network, its
// provider), the token the one issued to it and not expired. A machine
// that joins has it recorded (Joined) before it is answered and its token
// marked used. The reviews waiting when the loop wakes are handled
// together, as worker events are: their tokens read at once, their
// records written at once, one round trip each for the batch; a second
// review of a machine waits for the next batch.
func (r *Reconciler) handleJoins(ctx context.Context, msgs []*nats.Msg) {
	for len(msgs) > 0 {
		var joins []*joining
		busy := map[string]bool{}
		n := 0
		for _, m := range msgs {
			j := r.precheckJoin(m)
			if j.verdict == nil {
				key := recordKey(j.req.Cluster, j.req.Node)
				if busy[key] {
					break // after this batch's review of the same machine
				}
				busy[key] = true
				joins = append(joins, j)
			} else {
				r.answerJoin(j)
			}
			n++
		}
		msgs = msgs[n:]
		// The tokens, read on several goroutines (the issuer reads the
		// store only).
		now := r.o.Now()
		workers.Each(len(joins), pkiAtOnce, func(i int) {
			j := joins[i]
			j.reason, j.again, j.err = r.o.Bootstrap.Review(ctx, j.req, now)
		})
		for _, j := range joins {
			if r.judgeJoin(j, now); j.verdict == nil {
				rec := j.cur.rec.clone()
				rec.Joined = StampOf(now)
				j.next, j.saving = rec, r.store.SaveAsync(rec.key(), rec, j.cur.rev)
			}
		}
		for _, j := range joins {
			if j.saving != nil {
				r.joinRecorded(ctx, j, now)
			}
			r.answerJoin(j)
		}
	}
}

// joining is one review on its way through handleJoins.
type joining struct {
	m       *nats.Msg
	req     wire.JoinReview
	cur     *machine
	verdict *wire.JoinVerdict // the answer, once there is one
	// The issuer's review of the token.
	reason string
	again  bool
	err    error
	// The record saying the machine joined, being written.
	next   *Record
	saving *Saving
}

// precheckJoin reads a review and checks it against the records; a review
// refused here has its verdict.
func (r *Reconciler) precheckJoin(m *nats.Msg) *joining {
	j := &joining{m: m}
	refuse := func(format string, args ...any) *joining {
		j.verdict = &wire.JoinVerdict{Reason: fmt.Sprintf(format, args...)}
		return j
	}
	parts := strings.SplitN(m.Subject, ".", 4)
	req, err := wire.DecodeJoinReview(m.Data)
	j.req = req
	if err == nil && len(parts) != 4 {
		err = fmt.Errorf("subject %s is not %s.<cluster>.<reviewer>", m.Subject, wire.SubjectJoin)
	}
	if err != nil {
		r.metrics.Malformed.WithLabelValues("join").Inc()
		return refuse("malformed join review: %v", err)
	}
	cluster, reviewer := parts[2], parts[3]
	if req.Cluster != cluster {
		return refuse("a review on %s is about cluster %s", m.Subject, req.Cluster)
	}
	cur := r.lookup(req.Cluster, req.Node)
	switch {
	case cur == nil:
		return refuse("no machine %s in cluster %s", req.Node, req.Cluster)
	case cur.rec.Phase == wire.PhaseDeleting || cur.rec.Phase == wire.PhaseDeleted:
		return refuse("machine %s/%s is being deleted", req.Cluster, req.Node)
	}
	if rv := r.lookup(cluster, reviewer); reviewer != cur.rec.Provider && (rv == nil || rv.rec.Role != wire.RoleControlPlane) {
		return refuse("%s is not a control-plane machine of cluster %s", reviewer, cluster)
	}
	j.cur = cur
	return j
}

// judgeJoin gives a review its verdict from the issuer's review of the
// token, unless the machine is to be recorded as joined (verdict nil).
func (r *Reconciler) judgeJoin(j *joining, now time.Time) {
	req, cur := j.req, j.cur
	switch {
	case j.err != nil:
		r.health.ReportFor(ProblemBootstrap, req.Cluster, j.err)
		j.verdict = &wire.JoinVerdict{Reason: "tokens cannot be read: " + j.err.Error(), Retry: true}
	case j.again && !cur.rec.Joined.IsZero():
		j.verdict = &wire.JoinVerdict{Joined: true} // the same join, asked again
	case j.again:
		j.verdict = &wire.JoinVerdict{Reason: fmt.Sprintf("machine %s/%s joined with this token already", req.Cluster, req.Node)}
	case j.reason != "":
		j.verdict = &wire.JoinVerdict{Reason: j.reason}
	case !cur.rec.Joined.IsZero() && now.Sub(cur.rec.Joined.Time()) < bootstrap.RetryWindow:
		// The machine's own token, and its record says it joined: the
		// same join asked again (its answer was lost) before the token's
		// mark of use, written aside, was stored.
		j.verdict = &wire.JoinVerdict{Joined: true}
	case !cur.rec.Joined.IsZero():
		j.verdict = &wire.JoinVerdict{Reason: fmt.Sprintf("machine %s/%s joined at %s; its token is used", req.Cluster, req.Node, cur.rec.Joined.Time().Format(time.RFC3339))}
	}
}

// joinRecorded finishes a review whose record was being written: the
// machine joined, or the review is to be asked again.
func (r *Reconciler) joinRecorded(ctx context.Context, j *joining, now time.Time) {
	rev, err := j.saving.Wait(ctx)
	if err == nil && r.lookup(j.cur.rec.Cluster, j.cur.rec.Name) != j.cur {
		err = ErrConflict // as for events: the store's version wins
	}
	if err != nil {
		r.saveFailed(ctx, j.next, err)
		j.verdict = &wire.JoinVerdict{Reason: "the join could not be recorded", Retry: true}
		return
	}
	r.stored(j.cur, j.next, rev)
	r.dirty[j.req.Cluster] = true // its status shows when it joined
	req := j.req
	r.aside(ctx, func(ctx context.Context) {
		if err := r.o.Bootstrap.Used(ctx, req, now); err != nil {
			// The record says it joined: the token is refused from now on.
			r.log.Warn().Err(err).Str(logCluster, req.Cluster).Str(logMachine, req.Node).Msg("marking a bootstrap token used")
		}
	})
	j.verdict = &wire.JoinVerdict{Joined: true}
}

// answerJoin logs a review's verdict and answers it.
func (r *Reconciler) answerJoin(j *joining) {
	v := *j.verdict
	if !v.Joined {
		r.metrics.Refused.WithLabelValues("join", refusedReview).Inc()
	}
	if v.Joined {
		r.log.Info().Str(logCluster, j.req.Cluster).Str(logMachine, j.req.Node).Str("subject", j.m.Subject).Msg("machine joined its cluster")
	} else if r.floodLog("join") {
		r.log.Warn().Str(logCluster, j.req.Cluster).Str(logMachine, j.req.Node).Str("subject", j.m.Subject).Str("reason", v.Reason).
			Msg("join refused (refusals after this one are counted and logged at most every 10s)")
	}
	if data, err := wire.Encode(&v); err == nil {
		_ = j.m.Respond(data)
	}
}
