package reconciler

import (
	"encoding/binary"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// statusKey is the key of what a cluster's status file is made from
// (status.Writer.SetClusterFrom): c, the status without its machines (the
// plan's part and the deleted machines), and every field of the machines'
// records that machineStatus reads. A pass whose cluster has the key its
// newest status was made from builds nothing: at 10,000 clusters a
// restart's first pass spent half its time building 130,000 machine
// entries that encoded to the files the branch held. The key is a 64-bit
// xxhash of the fields, each with its length; two inputs with one key
// would leave a status unwritten until either changes (odds of 2^-64 a
// pass and cluster). TestStatusKeyCoversTheStatus holds it to every field.
// Never 0, which SetClusterFrom takes for none.
func statusKey(c *status.ClusterStatus, ms machineList) uint64 {
	var k keyHash
	k.d.Reset()
	k.str(c.Name)
	k.str(c.Class)
	k.str(c.Version)
	k.str(c.Phase)
	k.flag(c.Paused)
	k.time(c.Created)
	k.num(uint64(len(c.Conditions)))
	for _, cd := range c.Conditions {
		k.condition(cd)
	}
	k.replicas(c.ControlPlane)
	k.num(uint64(len(c.Deployments)))
	for _, d := range c.Deployments {
		k.str(d.Name)
		k.replicas(d.Replicas)
	}
	k.flag(c.Rollout != nil)
	if ro := c.Rollout; ro != nil {
		k.str(ro.ClassRevision)
		k.str(ro.Wave)
		k.time(ro.AdmittedAt)
		k.str(ro.State)
		k.str(ro.Reason)
		k.str(ro.PendingRevision)
	}
	k.num(uint64(len(c.Deleted)))
	for _, d := range c.Deleted {
		k.str(d.Name)
		k.str(d.Role)
		k.str(d.Deployment)
		k.str(d.Cause)
		k.str(d.Reason)
		k.time(d.Deleted)
	}
	k.num(uint64(len(c.Machines))) // none: they are ms
	k.num(uint64(len(ms)))
	for _, m := range ms {
		k.record(m.rec)
	}
	if sum := k.d.Sum64(); sum != 0 {
		return sum
	}
	return 1
}

// keyHash writes the fields of a status's inputs to an xxhash digest.
type keyHash struct {
	d xxhash.Digest
	b [8]byte
}

func (k *keyHash) num(n uint64) {
	binary.LittleEndian.PutUint64(k.b[:], n)
	_, _ = k.d.Write(k.b[:])
}

func (k *keyHash) str(s string) {
	k.num(uint64(len(s)))
	_, _ = k.d.WriteString(s)
}

func (k *keyHash) flag(b bool) {
	if b {
		k.num(1)
	} else {
		k.num(0)
	}
}

func (k *keyHash) time(t time.Time) {
	k.flag(t.IsZero())
	k.num(uint64(t.Unix()))
	k.num(uint64(t.Nanosecond()))
}

func (k *keyHash) condition(c status.Condition) {
	k.str(c.Type)
	k.str(c.Status)
	k.str(c.Reason)
	k.str(c.Message)
	k.time(c.LastTransitionTime)
}

func (k *keyHash) replicas(r status.Replicas) {
	k.str(r.Version)
	k.num(uint64(r.Desired))
	k.num(uint64(r.Replicas))
	k.num(uint64(r.Ready))
	k.num(uint64(r.Updated))
	k.num(uint64(r.Unavailable))
	k.flag(r.Backoff != nil)
	if b := r.Backoff; b != nil {
		k.num(uint64(b.Failures))
		k.str(b.LastFailure)
		k.time(b.NextRetry)
	}
	k.flag(r.Autoscale != nil)
	if a := r.Autoscale; a != nil {
		k.num(uint64(a.Min))
		k.num(uint64(a.Max))
		k.str(a.By)
		k.time(a.At)
	}
}

// record writes what machineStatus reads of m.
func (k *keyHash) record(m *Record) {
	k.str(m.Name)
	k.str(string(m.Role))
	k.str(m.Deployment)
	k.str(string(m.Phase))
	k.str(m.Version)
	k.str(m.Provider)
	k.str(m.ProviderID) // its head when NamedID: the name is above
	k.flag(m.NamedID)
	k.str(m.Worker)
	k.flag(m.Addresses != nil)
	addrs := m.addresses()
	k.num(uint64(len(addrs)))
	for _, a := range addrs {
		k.str(a)
	}
	k.str(m.TemplateHash)
	k.str(m.Reason)
	k.str(m.Message)
	k.str(m.Cause)
	k.str(m.SourceCommit)
	k.num(uint64(m.Created))
	k.num(uint64(m.Joined))
	k.flag(m.Health != nil)
	if h := m.Health; h != nil {
		k.flag(h.Healthy)
		k.str(h.Reason)
		k.str(h.Message)
		k.time(h.Since)
	}
}
