package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the daemon's Prometheus series. The Prometheus client is used
// rather than hand-written exposition: it gets the text format, histograms
// and process collectors right, and it is what every scraper expects.
type Metrics struct {
	RevisionsApplied   prometheus.Counter
	RevisionsRejected  prometheus.Counter
	PlanDuration       prometheus.Histogram
	TasksPublished     *prometheus.CounterVec   // by operation
	TasksCompleted     *prometheus.CounterVec   // by operation
	TasksFailed        *prometheus.CounterVec   // by operation
	Machines           *prometheus.GaugeVec     // by phase, class and provider
	Clusters           *prometheus.GaugeVec     // by phase and class
	TaskSeconds        *prometheus.HistogramVec // by provider, operation, stage
	Events             *prometheus.CounterVec   // by phase
	Heartbeats         prometheus.Counter
	HeartbeatsDropped  prometheus.Counter
	RolloutClusters    *prometheus.GaugeVec // by class and state
	RolloutWave        *prometheus.GaugeVec // by class and wave: 1 for the wave rolling out
	RolloutHalted      *prometheus.GaugeVec // by class
	LeaderChanges      prometheus.Counter
	StatusCommits      prometheus.Counter
	StatusPushFailures prometheus.Counter
	Leader             prometheus.Gauge
	Malformed          *prometheus.CounterVec // by kind: event, heartbeat
	Refused            *prometheus.CounterVec // by kind and reason
	CreateFailures     *prometheus.CounterVec // by class, provider
	Missing            *prometheus.CounterVec // by provider and reason
	Orphans            *prometheus.GaugeVec   // by provider
	Inventories        *prometheus.CounterVec // by provider
	ClustersPlanned    prometheus.Counter
	WebhookRequests    *prometheus.CounterVec // by outcome (sources.WebhookOutcomes)
	ScaleRequests      *prometheus.CounterVec // by outcome
}

// NewMetrics registers the series on reg (nil: a fresh registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		RevisionsApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_revisions_applied_total", Help: "Source revisions that passed validation and were applied.",
		}),
		RevisionsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_revisions_rejected_total", Help: "Source revisions rejected (validation or signature).",
		}),
		PlanDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gitfleet_plan_duration_seconds", Help: "Time to compute one plan.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		TasksPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_tasks_published_total", Help: "Machine tasks published to providers.",
		}, []string{"operation"}),
		TasksCompleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_tasks_completed_total", Help: "Machine tasks whose outcome was reported by a worker.",
		}, []string{"operation"}),
		TasksFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_tasks_failed_total", Help: "Machine tasks that ended in a Failed machine.",
		}, []string{"operation"}),
		Machines: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_machines", Help: "Machines by phase, their cluster's class and provider, as observed.",
		}, []string{"phase", "class", "provider"}),
		Clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_clusters", Help: "Clusters by phase and class, as their status says.",
		}, []string{"phase", "class"}),
		TaskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gitfleet_task_seconds", Help: "Time from a task's publication to its first event (stage first_event, creates) and to its outcome (stage done).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"provider", "operation", "stage"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_events_total", Help: "Worker events applied, by the phase they report.",
		}, []string{"phase"}),
		Heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_heartbeats_total", Help: "Machine heartbeats received for a known machine.",
		}),
		HeartbeatsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_heartbeats_dropped_total", Help: "Heartbeats dropped unread because the leader's loop fell behind; heartbeats missed until the tick that finds them do not count.",
		}),
		RolloutClusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_rollout_clusters", Help: "Clusters of a class's rollout by state: done, updating, waiting, failed.",
		}, []string{"class", "state"}),
		RolloutWave: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_rollout_wave", Help: "1 for the wave a class's rollout is in.",
		}, []string{"class", "wave"}),
		RolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_rollout_halted", Help: "1 while a class's rollout is halted by failures.",
		}, []string{"class"}),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_leader_changes_total", Help: "Times this replica became the leader.",
		}),
		StatusCommits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_status_commits_total", Help: "Commits written to the status branch.",
		}),
		StatusPushFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_status_push_failures_total", Help: "Pushes of the status branch to the remote that failed (each is fetched and retried).",
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gitfleet_leader", Help: "1 while this replica is the leader.",
		}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_malformed_messages_total", Help: "Messages that could not be decoded or do not fit (by kind: event, heartbeat, inventory, join); events are terminated, the others ignored.",
		}, []string{"kind"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_refused_messages_total", Help: "Events and heartbeats refused because they do not match the machine's record (by reason: subject, no-task, task, phase, no-record, rate), never applied; and join reviews refused (kind join, reason review).",
		}, []string{"kind", "reason"}),
		CreateFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_machine_create_failures_total", Help: "Machines whose create failed, by the cluster's class and the provider.",
		}, []string{"class", "provider"}),
		Missing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_machines_missing_total", Help: "Running machines that their provider's inventory no longer had, or reported dead (by reason); each is marked Failed and replaced.",
		}, []string{"provider", "reason"}),
		Orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gitfleet_orphan_machines", Help: "Machines a provider has and no record wants, as its last inventory said.",
		}, []string{"provider"}),
		ClustersPlanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gitfleet_clusters_planned_total", Help: "Clusters planned; a revision plans only the clusters it changes and those their rollout gates.",
		}),
		Inventories: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_inventories_total", Help: "Complete inventory reports received from workers.",
		}, []string{"provider"}),
		WebhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_webhook_requests_total", Help: "Requests to /hooks/git by outcome: accepted (a fetch triggered), ignored (a push to another branch), or why it was refused: unsigned, forged, replay, busy, slow, too_large, unreadable, method.",
		}, []string{"outcome"}),
		ScaleRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitfleet_scale_requests_total", Help: "Requests to the scale API by outcome: scaled, or why not: method, unauthorized, bad_request, too_large, refused (no such pool, not autoscaled, out of bounds), unavailable (not the leader), failed.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.WebhookRequests, m.ScaleRequests, m.Refused, m.RevisionsApplied, m.RevisionsRejected, m.PlanDuration, m.TasksPublished,
		m.TasksCompleted, m.TasksFailed, m.Machines, m.Clusters, m.StatusCommits, m.StatusPushFailures, m.Leader, m.Malformed, m.CreateFailures,
		m.Missing, m.Orphans, m.Inventories, m.ClustersPlanned, m.TaskSeconds, m.Events, m.Heartbeats, m.HeartbeatsDropped,
		m.RolloutClusters, m.RolloutWave, m.RolloutHalted, m.LeaderChanges)
	return m
}
