package providers

import (
	"encoding/json"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// decodeTask is wire.DecodeTask with one JSON pass for the common, valid
// message; anything unusual goes through wire.DecodeTask for its verdict
// and its error message.
func decodeTask(data []byte) (wire.Task, error) {
	var t wire.Task
	if json.Unmarshal(data, &t) == nil && t.APIVersion == wire.APIVersion && t.ID != "" &&
		(t.Operation == wire.OpCreate || t.Operation == wire.OpDelete) &&
		t.Machine.Name != "" && t.Machine.Cluster != "" {
		return t, nil
	}
	return wire.DecodeTask(data)
}

// onSubject reports whether subject is where task belongs for this
// worker: wire.TaskSubject of its machine, or, for a task routed to this
// worker, wire.WorkerTaskSubject. It builds no string.
func (w *Worker) onSubject(subject string, task *wire.Task) bool {
	for _, part := range [...]string{wire.SubjectTasks, w.p.Name(), task.Machine.Cluster} {
		var ok bool
		if subject, ok = strings.CutPrefix(subject, part); !ok || subject == "" || subject[0] != '.' {
			return false
		}
		subject = subject[1:]
	}
	if task.Worker == "" {
		return subject == task.Machine.Name
	}
	rest, ok := strings.CutPrefix(subject, task.Machine.Name)
	return ok && rest == "."+task.Worker && task.Worker == w.o.ID
}
