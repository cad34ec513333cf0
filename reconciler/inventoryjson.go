package reconciler

import "github.com/gitfleet/gitfleet/schemas/wire"

// A leader decodes every worker's inventory each minute: at 130,000
// machines, 130 parts of 1,000 a worker, which encoding/json's reflection
// took ~400 ms of CPU to read. fastDecodeInventory reads the shape a
// worker's encoding has with the record's scanner, under the same rule as
// fastDecodeRecord: anything else (an unknown or repeated key, a null, a
// key in another case, another apiVersion) makes it give up, and
// wire.DecodeInventory decides, with its own errors. FuzzDecodeInventory
// checks that whatever the fast path accepts, encoding/json decodes to
// the same Inventory.

// fastDecodeInventory decodes data into inv; false means "not this shape".
// The machines of a part share, through in, the strings and labels they
// have alike.
func fastDecodeInventory(data []byte, inv *wire.Inventory, in *interner) bool {
	s := scanner{b: data, in: in}
	return s.object(inventoryKeys, func(key string) bool { return s.inventoryField(key, inv) }) &&
		s.end() && inv.APIVersion == wire.APIVersion
}

// inventoryKeys and instanceKeys are the JSON names of wire.Inventory's
// and wire.Instance's fields, each with a bit for "seen".
var inventoryKeys = keyBits("apiVersion", "provider", "worker", "hostBound", "report", "part", "parts",
	"request", "time", "instances")

var instanceKeys = keyBits("cluster", "machine", "deployment", "role", "version", "templateHash", "labels",
	"annotations", "providerID", "addresses", "reason", "message")

func (s *scanner) inventoryField(key string, inv *wire.Inventory) bool {
	var ok bool
	switch key {
	case "apiVersion":
		inv.APIVersion, ok = s.shared()
	case "provider":
		inv.Provider, ok = s.shared()
	case "worker":
		inv.Worker, ok = s.shared()
	case "report":
		inv.Report, ok = s.str()
	case "request":
		inv.Request, ok = s.str()
	case "hostBound":
		return s.boolean(&inv.HostBound)
	case "part":
		return s.integer(&inv.Part)
	case "parts":
		return s.integer(&inv.Parts)
	case "time":
		return s.time(&inv.Time)
	case "instances":
		return s.instances(&inv.Instances)
	}
	return ok
}

// instances reads an array of instances into a new slice.
func (s *scanner) instances(l *[]wire.Instance) bool {
	out := []wire.Instance{}
	if !s.array(func() bool {
		out = append(out, wire.Instance{})
		return s.instance(&out[len(out)-1])
	}) {
		return false
	}
	*l = out
	return true
}

func (s *scanner) instance(in *wire.Instance) bool {
	return s.object(instanceKeys, func(key string) bool {
		var ok bool
		switch key {
		case "cluster":
			in.Cluster, ok = s.shared()
		case "machine":
			in.Machine, ok = s.str()
		case "deployment":
			in.Deployment, ok = s.shared()
		case "role":
			var v string
			v, ok = s.shared()
			in.Role = wire.Role(v)
		case "version":
			in.Version, ok = s.shared()
		case "templateHash":
			in.TemplateHash, ok = s.shared()
		case "labels":
			ok = s.sharedMap(&in.Labels)
		case "annotations":
			ok = s.sharedMap(&in.Annotations)
		case "providerID":
			in.ProviderID, ok = s.str()
		case "addresses":
			ok = s.strings(&in.Addresses)
		case "reason":
			in.Reason, ok = s.shared()
		case "message":
			in.Message, ok = s.str()
		}
		return ok
	})
}
