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

// onSubject reports whether subject is wire.TaskSubject(provider, cluster,
// machine), without building that string.
func onSubject(subject, provider, cluster, machine string) bool {
	for _, part := range [...]string{wire.SubjectTasks, provider, cluster} {
		var ok bool
		if subject, ok = strings.CutPrefix(subject, part); !ok || subject == "" || subject[0] != '.' {
			return false
		}
		subject = subject[1:]
	}
	return subject == machine
}
