package reconciler

import (
	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A leader decodes every worker's inventory each minute: at 130,000
// machines, 130 parts of 1,000 a worker, which encoding/json's reflection
// took ~400 ms of CPU to read. fastDecodeInventory reads the shape a
// worker's encoding has with the record's reader (internal/jsonscan), under the same rule as
// fastDecodeRecord: anything else (an unknown or repeated key, a null, a
// key in another case, another apiVersion) makes it give up, and
// wire.DecodeInventory decides, with its own errors. FuzzDecodeInventory
// checks that whatever the fast path accepts, encoding/json decodes to
// the same Inventory.

// fastDecodeInventory decodes data into inv; false means "not this shape".
// The machines of a part share, through in, the strings and labels they
// have alike.
func fastDecodeInventory(data []byte, inv *wire.Inventory, in *interner) bool {
	s := jsonscan.New(data, in.scanner())
	return s.Object(inventoryKeys, func(key string) bool { return inventoryField(&s, key, inv) }) &&
		s.End() && inv.APIVersion == wire.APIVersion
}

// inventoryKeys and instanceKeys are the JSON names of wire.Inventory's
// and wire.Instance's fields, each with a bit for "seen".
var inventoryKeys = jsonscan.KeyBits("apiVersion", "provider", "worker", "hostBound", "report", "part", "parts",
	"request", "time", "instances")

var instanceKeys = jsonscan.KeyBits("cluster", "machine", "deployment", "role", "version", "templateHash", "labels",
	"annotations", "providerID", "addresses", "reason", "message")

func inventoryField(s *jsonscan.Scanner, key string, inv *wire.Inventory) bool {
	var ok bool
	switch key {
	case "apiVersion":
		inv.APIVersion, ok = s.Shared()
	case "provider":
		inv.Provider, ok = s.Shared()
	case "worker":
		inv.Worker, ok = s.Shared()
	case "report":
		inv.Report, ok = s.Str()
	case "request":
		inv.Request, ok = s.Str()
	case "hostBound":
		return s.Bool(&inv.HostBound)
	case "part":
		return s.Int(&inv.Part)
	case "parts":
		return s.Int(&inv.Parts)
	case "time":
		return s.Time(&inv.Time)
	case "instances":
		return instances(s, &inv.Instances)
	}
	return ok
}

// instances reads an array of instances into a new slice.
func instances(s *jsonscan.Scanner, l *[]wire.Instance) bool {
	out := []wire.Instance{}
	if !s.Array(func() bool {
		out = append(out, wire.Instance{})
		return instance(s, &out[len(out)-1])
	}) {
		return false
	}
	*l = out
	return true
}

func instance(s *jsonscan.Scanner, in *wire.Instance) bool {
	return s.Object(instanceKeys, func(key string) bool {
		var ok bool
		switch key {
		case "cluster":
			in.Cluster, ok = s.Shared()
		case "machine":
			in.Machine, ok = s.Str()
		case "deployment":
			in.Deployment, ok = s.Shared()
		case "role":
			var v string
			v, ok = s.Shared()
			in.Role = wire.Role(v)
		case "version":
			in.Version, ok = s.Shared()
		case "templateHash":
			in.TemplateHash, ok = s.Shared()
		case "labels":
			ok = s.SharedMap(&in.Labels)
		case "annotations":
			ok = s.SharedMap(&in.Annotations)
		case "providerID":
			in.ProviderID, ok = s.Str()
		case "addresses":
			ok = s.Strings(&in.Addresses)
		case "reason":
			in.Reason, ok = s.Shared()
		case "message":
			in.Message, ok = s.Str()
		}
		return ok
	})
}
