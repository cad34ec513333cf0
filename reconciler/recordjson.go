package reconciler

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A restarting leader decodes every machine record: 130,000 at 10,000
// clusters, which with encoding/json's reflection was most of a restart's
// CPU. fastDecodeRecord reads the shape Record's own encoding has — one
// object of its known keys, each once, strings, whole numbers, booleans,
// objects of strings, arrays of strings — directly. Anything else (an
// unknown or repeated key, a null, a number with a fraction, a key in
// another case, bytes after the object) makes it give up, and
// decodeRecord falls back to encoding/json, whose result and errors are
// the reference: FuzzDecodeRecord checks that whatever the fast path
// accepts, encoding/json decodes to the same Record.

// fastDecodeRecord decodes data into r; false means "not this shape", not
// an error: r is then to be decoded by encoding/json from scratch. With an
// interner, the strings, labels and spec that the machines of a pool have
// alike are shared as they are read, from their encoded bytes: most
// records then cost no allocation but their own name, task and times.
func fastDecodeRecord(data []byte, r *Record, in *interner) bool {
	s := jsonscan.New(data, in.scanner())
	return s.Object(recordKeys, func(key string) bool { return recordField(&s, in, key, r) }) && s.End()
}

// recordKeys are the JSON names of Record's fields, each with a bit for
// "seen".
var recordKeys = jsonscan.KeyBits("name", "cluster", "deployment", "role", "provider", "version", "templateHash",
	"labels", "annotations", "spec", "failureDomain", "init", "phase", "reason", "message", "created",
	"running", "joined", "providerID", "addresses", "worker", "taskID", "attempt", "published", "health",
	"sourceCommit", "planID", "cause", "heartbeats")

// recordField decodes the value of key into r.
func recordField(s *jsonscan.Scanner, in *interner, key string, r *Record) bool {
	switch key {
	case "cluster", "deployment", "role", "provider", "version", "templateHash", "labels", "annotations", "spec",
		"sourceCommit", "planID", "cause", "failureDomain", "reason", "message":
		if r.Shape == nil {
			r.Shape = &Shape{} // as encoding/json does: at the shape's first field
		}
	}
	var str *string
	switch key {
	case "name":
		str = &r.Name
	case "cluster":
		str = &r.Cluster
	case "deployment":
		str = &r.Deployment
	case "role":
		v, ok := s.Str()
		r.Role = wire.Role(v)
		return ok
	case "provider":
		str = &r.Provider
	case "version":
		str = &r.Version
	case "templateHash":
		str = &r.TemplateHash
	case "failureDomain":
		str = &r.FailureDomain
	case "phase":
		v, ok := s.Str()
		r.Phase = wire.Phase(v).Canonical()
		return ok
	case "reason":
		str = &r.Reason
	case "message":
		str = &r.Message
	case "providerID":
		str = &r.ProviderID
	case "worker":
		str = &r.Worker
	case "taskID":
		str = &r.TaskID
	case "sourceCommit":
		str = &r.SourceCommit
	case "planID":
		str = &r.PlanID
	case "cause":
		str = &r.Cause
	case "labels":
		return s.SharedMap(&r.Labels)
	case "annotations":
		return s.SharedMap(&r.Annotations)
	case "spec":
		raw, ok := s.RawValue()
		if !ok {
			return false
		}
		if in == nil {
			r.Spec = bytes.Clone(raw)
		} else if r.Spec, ok = in.specs[string(raw)]; !ok {
			r.Spec = bytes.Clone(raw)
			in.specs[string(r.Spec)] = r.Spec
		}
		return true
	case "init":
		return s.Bool(&r.Init)
	case "heartbeats":
		return s.Bool(&r.Heartbeats)
	case "created":
		return scanStamp(s, &r.Created)
	case "running":
		return scanStamp(s, &r.Running)
	case "joined":
		return scanStamp(s, &r.Joined)
	case "published":
		return scanStamp(s, &r.Published)
	case "attempt":
		var n int
		ok := s.Int(&n) // up to 9 digits: an int32
		r.Attempt = int32(n)
		return ok
	case "addresses":
		var a []string
		ok := s.Strings(&a)
		r.Addresses = &a
		return ok
	case "health":
		raw, ok := s.RawValue()
		if !ok || raw[0] != '{' {
			return false // a null is encoding/json's to read
		}
		var h Health
		if json.Unmarshal(raw, &h) != nil {
			return false
		}
		r.Health = &h
		return true
	default:
		return false
	}
	if key == "name" || key == "taskID" || key == "providerID" {
		v, ok := s.Str() // the machine's own
		*str = v
		return ok
	}
	v, ok := s.Shared()
	*str = v
	return ok
}

// scanStamp reads a time into st; a time a Stamp cannot hold is left to
// encoding/json, whose error is the reference.
func scanStamp(s *jsonscan.Scanner, st *Stamp) bool {
	var t time.Time
	if !s.Time(&t) {
		return false
	}
	v, err := stampOf(t)
	*st = v
	return err == nil
}
