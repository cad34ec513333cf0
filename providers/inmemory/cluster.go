package inmemory

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// cloudCluster is the value of a cluster's key.
type cloudCluster struct {
	Groups []group `json:"groups"`
}

// group is machines of one cluster that have everything but their names
// alike (pool, role, version, template, labels, annotations).
//
// Machine is their machine as encoding/json writes a wire.Machine without
// name, spec and bootstrap data (a map's keys sorted), kept as those
// bytes: two machines are alike when their bytes are, and a write of the
// key copies them rather than encoding every group again. Each create and
// delete reads and writes its cluster's whole value, so decoding every
// group's machine at every write was most of a worker's CPU in a class
// bump; it is decoded only when a machine of the group is looked up or
// listed (machine).
type group struct {
	Machine  json.RawMessage `json:"machine"`
	Machines []member        `json:"machines"`
}

// member is one machine of a group.
type member struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// groupMachine is m as its group keeps it: its encoding without its name,
// spec and bootstrap data.
func groupMachine(m wire.Machine) ([]byte, error) {
	m.Name, m.Spec, m.Bootstrap = "", nil, nil
	return json.Marshal(m)
}

// machine decodes the group's machine, named name.
func (g *group) machine(name string) (wire.Machine, error) {
	var m wire.Machine
	if err := json.Unmarshal(g.Machine, &m); err != nil {
		return wire.Machine{}, err
	}
	m.Name = name
	return m, nil
}

// find returns the machine named name; false: the cluster has none.
func (c *cloudCluster) find(name string) (wire.Machine, bool, error) {
	for i := range c.Groups {
		g := &c.Groups[i]
		for _, m := range g.Machines {
			if m.Name == name {
				out, err := g.machine(name)
				return out, err == nil, err
			}
		}
	}
	return wire.Machine{}, false, nil
}

// add puts the machine named name, whose group encoding is machine
// (groupMachine), in the group of the machines like it.
func (c *cloudCluster) add(machine []byte, name string, created time.Time) {
	for i := range c.Groups {
		if bytes.Equal(c.Groups[i].Machine, machine) {
			c.Groups[i].Machines = append(c.Groups[i].Machines, member{Name: name, Created: created})
			return
		}
	}
	c.Groups = append(c.Groups, group{Machine: machine, Machines: []member{{Name: name, Created: created}}})
}

// remove takes the machine named name out; false: the cluster had none.
func (c *cloudCluster) remove(name string) bool {
	for i := range c.Groups {
		g := &c.Groups[i]
		for j := range g.Machines {
			if g.Machines[j].Name == name {
				g.Machines = slices.Delete(g.Machines, j, j+1)
				if len(g.Machines) == 0 {
					c.Groups = slices.Delete(c.Groups, i, i+1)
				}
				return true
			}
		}
	}
	return false
}

// decodeCluster reads a cluster's value: by jsonscan when it can, else by
// encoding/json, whose result it always equals (FuzzDecodeCluster).
func decodeCluster(data []byte) (cloudCluster, error) {
	if c, ok := scanCluster(data); ok {
		return c, nil
	}
	var c cloudCluster
	err := json.Unmarshal(data, &c)
	return c, err
}

var (
	clusterKeys = jsonscan.KeyBits("groups")
	groupKeys   = jsonscan.KeyBits("machine", "machines")
	memberKeys  = jsonscan.KeyBits("name", "created")
)

// scanCluster is decodeCluster's fast path; false: encoding/json decides.
func scanCluster(data []byte) (cloudCluster, bool) {
	var c cloudCluster
	s := jsonscan.New(data, nil)
	ok := s.Object(clusterKeys, func(string) bool {
		c.Groups = []group{} // as encoding/json: an empty array is not nil
		return s.Array(func() bool {
			var g group
			ok := s.Object(groupKeys, func(key string) bool {
				if key == "machine" {
					raw, ok := s.RawValue()
					g.Machine = slices.Clone(raw) // not a view of the message's buffer
					return ok
				}
				g.Machines = []member{}
				return s.Array(func() bool {
					var m member
					ok := s.Object(memberKeys, func(key string) bool {
						if key == "created" {
							return s.Time(&m.Created)
						}
						var ok bool
						m.Name, ok = s.Str()
						return ok
					})
					g.Machines = append(g.Machines, m)
					return ok
				})
			})
			c.Groups = append(c.Groups, g)
			return ok
		})
	})
	return c, ok && s.End()
}

// appendJSON appends the value's encoding, the bytes json.Marshal writes
// for it (TestClusterEncodingIsEncodingJSONs) without its reflection and
// without compacting every group's machine again.
func (c *cloudCluster) appendJSON(b []byte) []byte {
	b = append(b, `{"groups":`...)
	if c.Groups == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i, g := range c.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"machine":`...)
		if g.Machine == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, g.Machine...)
		}
		b = append(b, `,"machines":`...)
		if g.Machines == nil {
			b = append(b, "null}"...)
			continue
		}
		b = append(b, '[')
		for j, m := range g.Machines {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendString(b, m.Name)
			b = append(b, `,"created":"`...)
			b = m.Created.AppendFormat(b, time.RFC3339Nano)
			b = append(b, `"}`...)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// appendString appends s as encoding/json writes it: as it is when it
// has nothing to escape (a machine's name never has), else by json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
