package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// handleJoin answers a control plane's review of a joining machine's
// token (wire.JoinReview on gitfleet.join.<cluster>.<reviewer>): the
// machine must be one this daemon made and is not deleting, the reviewer
// its cluster's control plane (or, for machines without a network, its
// provider), the token the one issued to it and not expired. A machine
// that joins has it recorded (Joined) before its token is revoked.
func (r *Reconciler) handleJoin(ctx context.Context, m *nats.Msg) {
	v, req := r.reviewJoin(ctx, m)
	if v.Joined {
		r.log.Info().Str(logCluster, req.Cluster).Str(logMachine, req.Node).Str("subject", m.Subject).Msg("machine joined its cluster")
	} else {
		r.log.Warn().Str(logCluster, req.Cluster).Str(logMachine, req.Node).Str("subject", m.Subject).Str("reason", v.Reason).Msg("join refused")
	}
	data, err := wire.Encode(&v)
	if err == nil {
		_ = m.Respond(data)
	}
}

func (r *Reconciler) reviewJoin(ctx context.Context, m *nats.Msg) (v wire.JoinVerdict, req wire.JoinReview) {
	refuse := func(format string, args ...any) (wire.JoinVerdict, wire.JoinReview) {
		return wire.JoinVerdict{Reason: fmt.Sprintf(format, args...)}, req
	}
	parts := strings.SplitN(m.Subject, ".", 4)
	req, err := wire.DecodeJoinReview(m.Data)
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
	reason, again, err := r.o.Bootstrap.Review(ctx, req, r.o.Now())
	switch {
	case err != nil:
		r.health.Report(ProblemBootstrap, err)
		return wire.JoinVerdict{Reason: "tokens cannot be read: " + err.Error(), Retry: true}, req
	case again && !cur.rec.Joined.IsZero():
		return wire.JoinVerdict{Joined: true}, req // the same join, asked again
	case again:
		return refuse("machine %s/%s joined with this token already", req.Cluster, req.Node)
	case reason != "":
		return wire.JoinVerdict{Reason: reason}, req
	case !cur.rec.Joined.IsZero():
		return refuse("machine %s/%s joined at %s; its token is used", req.Cluster, req.Node, cur.rec.Joined.Format(time.RFC3339))
	}
	next := cur.rec.clone()
	next.Joined = r.o.Now().UTC()
	if r.commit(ctx, cur, next) == nil {
		return wire.JoinVerdict{Reason: "the join could not be recorded", Retry: true}, req
	}
	r.dirty[req.Cluster] = true // its status shows when it joined
	if err := r.o.Bootstrap.Used(ctx, req, r.o.Now()); err != nil {
		// The record says it joined: the token is refused from now on.
		r.log.Warn().Err(err).Str(logCluster, req.Cluster).Str(logMachine, req.Node).Msg("marking a bootstrap token used")
	}
	return wire.JoinVerdict{Joined: true}, req
}
