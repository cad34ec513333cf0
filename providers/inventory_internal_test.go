package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
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
// exactly one part, in order; every part but the last says Parts 0, the
// last how many there are (an empty report is one empty part). Each part
// goes to a real NATS server and waits for its answer.
func TestReportParts(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv.ClientURL())
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
		want   string // each part's machines and its Parts
	}{
		{"none", nil, 1 << 20, "[0/1]"},
		{"one", small(1), 1 << 20, "[1/1]"},
		{"by count", small(2500), 1 << 20, "[1000/0 1000/0 500/3]"},
		{"by size", small(10), 3 * instanceSize(small(1)[0]), "[3/0 3/0 3/0 1/4]"},
		{"one too large", append(append(small(2), Instance{Cluster: "c", Name: strings.Repeat("x", 5000)}), small(2)...), 4000, "[2/0 1/0 2/3]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			worker := "w-" + strings.ReplaceAll(c.name, " ", "-")
			var mu sync.Mutex // the subscription's goroutine writes, the test reads
			var parts, names []string
			sub, err := nc.Subscribe(wire.InventorySubject("p", worker), func(m *nats.Msg) {
				mu.Lock()
				defer mu.Unlock()
				inv, err := wire.DecodeInventory(m.Data)
				if err != nil {
					t.Error(err)
					return
				}
				if inv.Part != len(parts) {
					t.Errorf("part %d after %d parts", inv.Part, len(parts))
				}
				parts = append(parts, fmt.Sprintf("%d/%d", len(inv.Instances), inv.Parts))
				for _, in := range inv.Instances {
					names = append(names, in.Machine)
				}
				_ = m.Respond(nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			rp := &reporter{nc: nc, budget: c.budget, inv: wire.Inventory{Provider: "p", Worker: worker, Report: "r", Time: time.Now()}}
			ctx := context.Background()
			for _, in := range c.list {
				if err := rp.add(ctx, in); err != nil {
					t.Fatal(err, rp.err)
				}
			}
			if err := rp.send(ctx, true); err != nil {
				t.Fatal(err, rp.err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := fmt.Sprint(parts); got != c.want {
				t.Errorf("parts %s, want %s", got, c.want)
			}
			want := make([]string, len(c.list))
			for i, in := range c.list {
				want[i] = in.Name
			}
			if !slices.Equal(names, want) {
				t.Errorf("the parts list %d machines, not the %d in order", len(names), len(want))
			}
			if rp.machines != len(c.list) {
				t.Errorf("%d machines counted as sent, want %d", rp.machines, len(c.list))
			}
		})
	}
}
