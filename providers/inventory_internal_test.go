package providers

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// instanceSize is never less than what the instance takes in a part, for
// plain names and for strings JSON escapes.
func TestInstanceSizeBoundsItsJSON(t *testing.T) {
	odd := "a<b>&c\"d\\e\nf\x01g é ☃ \u2028 \xff"
	for i, in := range []Instance{
		{},
		{Cluster: "c-00001", Name: "c-00001-md-0-abcde", ProviderID: "inmemory://c-00001/c-00001-md-0-abcde", Version: "v1.31.2",
			Deployment: "md-0", Role: wire.RoleWorker, TemplateHash: "0123456789abcdef", Addresses: []string{"10.0.0.1", "::1"},
			Labels: map[string]string{"gitfleet.io/cluster": "c-00001", "env": "dev"}},
		{Cluster: "c", Name: "m", Message: strings.Repeat("m", maxEventMessage+1)}, // cut, with a note longer than what it cut
		{Cluster: odd, Name: odd, ProviderID: odd, Version: odd, Deployment: odd, Role: wire.Role(odd), TemplateHash: odd,
			Reason: odd, Message: strings.Repeat(odd, 50), Addresses: []string{odd}, Labels: map[string]string{odd: odd},
			Annotations: map[string]string{odd + "1": odd, odd + "2": strings.Repeat(odd, 100)}},
	} {
		w := wire.Instance{Cluster: in.Cluster, Machine: in.Name, Deployment: in.Deployment, Role: in.Role, Version: in.Version,
			TemplateHash: in.TemplateHash, Labels: in.Labels, Annotations: in.Annotations, ProviderID: in.ProviderID,
			Addresses: in.Addresses, Reason: in.Reason, Message: cutMessage(in.Message)}
		data, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := instanceSize(in); got < len(data)+1 { // +1: the comma between instances
			t.Errorf("instance %d: size %d, but its JSON is %d bytes", i, got, len(data))
		}
	}
}

// Parts hold at most inventoryPart machines and the byte budget; a
// machine larger than the budget is a part alone; every machine is in
// exactly one part, in order.
func TestCutParts(t *testing.T) {
	small := func(n int) []Instance {
		list := make([]Instance, n)
		for i := range list {
			list[i] = Instance{Cluster: "c", Name: fmt.Sprintf("m-%05d", i)}
		}
		return list
	}
	for _, c := range []struct {
		name   string
		list   []Instance
		budget int
		want   []int
	}{
		{"none", nil, 1 << 20, []int{0}},
		{"by count", small(2500), 1 << 20, []int{1000, 2000, 2500}},
		{"by size", small(10), 3 * instanceSize(small(1)[0]), []int{3, 6, 9, 10}},
		{"one too large", append(append(small(2), Instance{Name: strings.Repeat("x", 5000)}), small(2)...), 4000, []int{2, 3, 5}},
	} {
		if got := cutParts(c.list, c.budget); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: parts end at %v, want %v", c.name, got, c.want)
		}
	}
}
