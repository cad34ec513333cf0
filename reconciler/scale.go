package reconciler

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/planner"
)

// Autoscaled pools (the autoscaler's annotations, no replicas in Git) are
// sized by scale requests, through the leader's HTTP API (gitfleet scale,
// or the cluster autoscaler's hook calling it). A request is checked
// against the pool's bounds as the applied revision writes them, saved in
// the gitfleet-rollouts bucket as scale.<cluster>.<pool> before the
// cluster is planned again, and shown in status.

const keyScale = "scale."

type storedScale struct {
	Cluster  string    `json:"cluster"`
	Pool     string    `json:"pool"`
	Replicas int       `json:"replicas"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// ScaleError is a scale request refused; Status is the HTTP status that
// says why.
type ScaleError struct {
	Status int
	Msg    string
}

func (e *ScaleError) Error() string { return e.Msg }

// ScaleResult is a scale request done.
type ScaleResult struct {
	Cluster           string `json:"cluster"`
	MachineDeployment string `json:"machineDeployment"`
	Replicas          int    `json:"replicas"`
	Min               int    `json:"min"`
	Max               int    `json:"max"`
}

type scaleReq struct {
	cluster, pool string
	replicas      int
	by            string
	reply         chan scaleReply
}

type scaleReply struct {
	res ScaleResult
	err error
}

// Scale asks the running reconciler to size an autoscaled pool; by says
// who asked, for the log and the status.
func (r *Reconciler) Scale(ctx context.Context, cluster, pool string, replicas int, by string) (ScaleResult, error) {
	req := scaleReq{cluster: cluster, pool: pool, replicas: replicas, by: by, reply: make(chan scaleReply, 1)}
	select {
	case r.scaleReqs <- req:
	case <-r.done:
		return ScaleResult{}, &ScaleError{http.StatusServiceUnavailable, "this replica no longer leads: ask again"}
	case <-ctx.Done():
		return ScaleResult{}, &ScaleError{http.StatusServiceUnavailable, "the reconciler is busy: ask again"}
	}
	select {
	case rep := <-req.reply:
		return rep.res, rep.err
	case <-ctx.Done():
		return ScaleResult{}, &ScaleError{http.StatusServiceUnavailable, "no answer from the reconciler in time: ask again"}
	}
}

// handleScale checks, saves and applies a scale request, in the loop.
func (r *Reconciler) handleScale(ctx context.Context, req scaleReq) {
	res, err := r.scale1(ctx, req)
	req.reply <- scaleReply{res, err}
}

func (r *Reconciler) scale1(ctx context.Context, req scaleReq) (ScaleResult, error) {
	res := ScaleResult{Cluster: req.cluster, MachineDeployment: req.pool, Replicas: req.replicas}
	var dc *planner.DesiredCluster
	if r.desired != nil {
		dc = r.desired.Cluster(req.cluster)
	}
	if dc == nil {
		return res, &ScaleError{http.StatusNotFound, fmt.Sprintf("no cluster %q in the applied revision", req.cluster)}
	}
	var pool *planner.Pool
	var names []string
	for i := range dc.Deployments {
		names = append(names, dc.Deployments[i].Name)
		if dc.Deployments[i].Name == req.pool {
			pool = &dc.Deployments[i]
		}
	}
	switch {
	case pool == nil:
		return res, &ScaleError{http.StatusNotFound, fmt.Sprintf("cluster %s has no MachineDeployment %q; it has %s", req.cluster, req.pool, strings.Join(names, ", "))}
	case pool.Autoscale == nil:
		return res, &ScaleError{http.StatusConflict, fmt.Sprintf("MachineDeployment %s of cluster %s is not autoscaled: its replicas come from Git (%s); to size it with gitfleet scale, give it the annotations %s and %s and remove replicas",
			req.pool, req.cluster, pool.Source, "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size", "-max-size")}
	}
	res.Min, res.Max = pool.Autoscale.Min, pool.Autoscale.Max
	if req.replicas < res.Min || req.replicas > res.Max {
		return res, &ScaleError{http.StatusUnprocessableEntity, fmt.Sprintf("replicas %d is outside the bounds of MachineDeployment %s of cluster %s: min %d, max %d (its autoscaler annotations, %s)",
			req.replicas, req.pool, req.cluster, res.Min, res.Max, pool.Source)}
	}
	now := r.o.Now().UTC().Truncate(time.Second)
	key := keyScale + req.cluster + "." + req.pool
	d := &r.decisions
	rev, err := d.store.Save(ctx, key, storedScale{Cluster: req.cluster, Pool: req.pool, Replicas: req.replicas, By: req.by, At: now}, d.revs[key])
	if err != nil {
		r.decisionFailed(ctx, key, err)
		return res, &ScaleError{http.StatusServiceUnavailable, "the scale request could not be saved: " + err.Error()}
	}
	d.revs[key] = rev
	if r.scale[req.cluster] == nil {
		r.scale[req.cluster] = map[string]planner.ScaleRequest{}
	}
	r.scale[req.cluster][req.pool] = planner.ScaleRequest{Replicas: req.replicas, By: req.by, At: now}
	r.dirty[req.cluster] = true
	r.log.Info().Str(logCluster, req.cluster).Str("deployment", req.pool).Int("replicas", req.replicas).
		Str("by", req.by).Int("min", res.Min).Int("max", res.Max).Msg("scale request")
	return res, nil
}

// decodeScale keeps a stored scale request in memory.
func (r *Reconciler) decodeScale(key string, data []byte) error {
	var s storedScale
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("scale record %s: %w", key, err)
	}
	if keyScale+s.Cluster+"."+s.Pool != key {
		return fmt.Errorf("scale record %s: names %s.%s", key, s.Cluster, s.Pool)
	}
	if r.scale[s.Cluster] == nil {
		r.scale[s.Cluster] = map[string]planner.ScaleRequest{}
	}
	r.scale[s.Cluster][s.Pool] = planner.ScaleRequest{Replicas: s.Replicas, By: s.By, At: s.At}
	return nil
}

// ScalePath is the route of the scale API, for http.ServeMux. It takes
// every method: ScaleHandler answers one other than POST with 405, where a
// "POST " pattern would let it fall through to a handler of "/" (the
// daemon's dashboard, which answers 404).
const ScalePath = "/api/v1/clusters/{cluster}/machinedeployments/{deployment}/scale"

// UserHeader names who asks, for the log and the status (the token says
// only that the caller may): at most maxUser bytes of printable
// characters.
const UserHeader = "X-Gitfleet-User"

// maxUser is the longest UserHeader taken, in bytes.
const maxUser = 256

// checkUser says what is wrong with the UserHeader values of a request,
// which go into the status branch, NATS and the log.
func checkUser(vals []string) error {
	switch {
	case len(vals) > 1:
		return fmt.Errorf("%s is sent %d times: send it once", UserHeader, len(vals))
	case len(vals) == 0:
		return nil
	case len(vals[0]) > maxUser:
		return fmt.Errorf("%s is %d bytes long: at most %d are taken", UserHeader, len(vals[0]), maxUser)
	case !utf8.ValidString(vals[0]):
		return fmt.Errorf("%s is not UTF-8", UserHeader)
	}
	for _, c := range vals[0] {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("%s has a character that is not printable (%U): only printable characters are taken", UserHeader, c)
		}
	}
	return nil
}

// ScaleHandler serves ScalePath: a JSON body {"replicas": N}, the bearer
// token, and leader(), the reconciler of this replica while it leads (nil
// otherwise). Each request is counted in metrics by outcome; a refused one
// is a warning in log, at most a few every floodLogEvery (anyone who
// reaches the port can send them). A request done is logged by the
// reconciler.
func ScaleHandler(token []byte, leader func() *Reconciler, metrics *Metrics, log zerolog.Logger) http.Handler {
	refusals := log.Sample(&zerolog.BurstSampler{Burst: 5, Period: floodLogEvery})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fail := func(status int, msg string) {
			outcome := scaleOutcome(status)
			metrics.ScaleRequests.WithLabelValues(outcome).Inc()
			refusals.Warn().Str("remote", req.RemoteAddr).Str("reason", outcome).Int("status", status).Str("detail", msg).
				Msg("scale request refused")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		}
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(http.StatusMethodNotAllowed, "use POST")
			return
		}
		// The scheme is case-insensitive (RFC 7235): "bearer" is Bearer.
		scheme, got, _ := strings.Cut(req.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || len(token) == 0 || subtle.ConstantTimeCompare([]byte(strings.TrimLeft(got, " ")), token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gitfleet"`)
			fail(http.StatusUnauthorized, "a bearer token is needed: the one in the daemon's --api-token-file (gitfleet up: <data-dir>/api-token)")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxScaleBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			fail(http.StatusRequestEntityTooLarge, fmt.Sprintf(`the body is larger than %d bytes: it must be {"replicas": N}`, maxScaleBody))
			return
		case err != nil:
			fail(http.StatusBadRequest, "reading the body failed: "+err.Error())
			return
		}
		replicas, err := decodeReplicas(body)
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		if err := checkUser(req.Header.Values(UserHeader)); err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		r := leader()
		if r == nil {
			fail(http.StatusServiceUnavailable, "this replica does not lead: send the request to the leader")
			return
		}
		who := req.Header.Get(UserHeader)
		if who == "" {
			who = "unnamed"
		}
		who += " from " + req.RemoteAddr
		ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
		defer cancel()
		res, err := r.Scale(ctx, req.PathValue("cluster"), req.PathValue("deployment"), replicas, who)
		var se *ScaleError
		switch {
		case errors.As(err, &se):
			fail(se.Status, se.Msg)
		case err != nil:
			fail(http.StatusInternalServerError, err.Error())
		default:
			metrics.ScaleRequests.WithLabelValues("scaled").Inc()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(res)
		}
	})
}

// maxScaleBody is the largest scale request body; larger ones get 413.
const maxScaleBody = 4096

// decodeReplicas reads a scale request's body: one JSON object whose one
// field is "replicas" (spelt so: encoding/json would take "REPLICAS" too,
// and the last of two), a whole number, and nothing after it but space.
func decodeReplicas(body []byte) (int, error) {
	const form = `the body must be {"replicas": N}`
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, errors.New(form + ": it is not a JSON object")
	}
	var n *int
	for dec.More() {
		key, err := dec.Token()
		switch {
		case err != nil:
			return 0, fmt.Errorf("%s: %w", form, err)
		case key != "replicas":
			return 0, fmt.Errorf("%s: it has a field %q", form, key)
		case n != nil:
			return 0, errors.New(form + `: it has "replicas" twice`)
		}
		if err := dec.Decode(&n); err != nil || n == nil {
			return 0, errors.New(form + ": N must be a whole number")
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return 0, errors.New(form + ": it ends before its closing brace")
	}
	if n == nil {
		return 0, errors.New(form + `: "replicas" is missing`)
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, errors.New(form + ", and nothing after it")
	}
	return *n, nil
}

// scaleOutcome names a refused scale request's status for the metric.
func scaleOutcome(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusMethodNotAllowed:
		return "method"
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
		return "refused" // no such pool, not autoscaled, out of its bounds
	case http.StatusServiceUnavailable:
		return "unavailable" // not the leader, or it did not answer
	}
	return "failed"
}
