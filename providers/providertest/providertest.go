// Package providertest is the conformance suite every provider must pass:
// idempotent create and delete by machine name, List showing exactly what
// exists, concurrent creates of one machine making one machine, and
// permanent errors for specs that cannot work.
package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Run runs the suite; newProvider returns a fresh provider with no machines
// and registers its cleanup on t.
func Run(t *testing.T, newProvider func(t *testing.T) providers.Provider) {
	t.Run("CreateListDelete", func(t *testing.T) { createListDelete(t, newProvider(t)) })
	t.Run("CreateIsIdempotent", func(t *testing.T) { createIsIdempotent(t, newProvider(t)) })
	t.Run("DeleteMissingSucceeds", func(t *testing.T) { deleteMissing(t, newProvider(t)) })
	t.Run("ConcurrentCreateMakesOne", func(t *testing.T) { concurrentCreate(t, newProvider(t)) })
	t.Run("SameNameInTwoClusters", func(t *testing.T) { twoClusters(t, newProvider(t)) })
	t.Run("BadSpecIsPermanent", func(t *testing.T) { badSpec(t, newProvider(t)) })
	t.Run("ListReportsTheTemplate", func(t *testing.T) { listReportsTemplate(t, newProvider(t)) })
}

// Machine is the machine the suite creates.
func Machine(p providers.Provider, cluster, name string) wire.Machine {
	return wire.Machine{Name: name, Cluster: cluster, Role: wire.RoleWorker, Deployment: "md-0",
		Version: "v1.30.2", Provider: p.Name()}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func create(t *testing.T, p providers.Provider, m wire.Machine) providers.Instance {
	t.Helper()
	inst, err := p.Create(ctx(t), m)
	if err != nil {
		t.Fatalf("Create(%s/%s): %v", m.Cluster, m.Name, err)
	}
	if inst.Cluster != m.Cluster || inst.Name != m.Name || inst.ProviderID == "" {
		t.Fatalf("Create(%s/%s) = %+v; want the machine's cluster and name and a provider ID", m.Cluster, m.Name, inst)
	}
	return inst
}

// names lists the machines as cluster/name → provider ID.
func names(t *testing.T, p providers.Provider) map[string]string {
	t.Helper()
	list, err := p.List(ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]string{}
	for _, in := range list {
		k := in.Cluster + "/" + in.Name
		if _, dup := out[k]; dup {
			t.Fatalf("List has %s twice: %+v", k, list)
		}
		out[k] = in.ProviderID
	}
	if w, ok := p.(providers.Walker); ok {
		walked := map[string]string{}
		err := w.Walk(ctx(t), func(in providers.Instance) error {
			walked[in.Cluster+"/"+in.Name] = in.ProviderID
			return nil
		})
		if err != nil || !maps.Equal(walked, out) {
			t.Fatalf("Walk = %v, %v; want what List has, %v", walked, err, out)
		}
		if len(out) > 0 {
			stop := errors.New("stop")
			n := 0
			if err := w.Walk(ctx(t), func(providers.Instance) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
				t.Fatalf("Walk whose function fails goes on or hides the error: %d machines, %v", n, err)
			}
		}
	}
	return out
}

func wantMachines(t *testing.T, p providers.Provider, want ...string) {
	t.Helper()
	got := names(t, p)
	if len(got) != len(want) {
		t.Fatalf("List = %v; want exactly %v", got, want)
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Fatalf("List = %v; want exactly %v", got, want)
		}
	}
}

func createListDelete(t *testing.T, p providers.Provider) {
	if p.Name() == "" {
		t.Fatal("Name() is empty")
	}
	wantMachines(t, p)
	a, b := Machine(p, "c1", "m-a"), Machine(p, "c1", "m-b")
	ia := create(t, p, a)
	create(t, p, b)
	wantMachines(t, p, "c1/m-a", "c1/m-b")
	if got := names(t, p)["c1/m-a"]; got != ia.ProviderID {
		t.Errorf("List provider ID of c1/m-a = %q; Create returned %q", got, ia.ProviderID)
	}
	if err := p.Delete(ctx(t), a); err != nil {
		t.Fatalf("Delete(c1/m-a): %v", err)
	}
	wantMachines(t, p, "c1/m-b")
	if err := p.Delete(ctx(t), b); err != nil {
		t.Fatalf("Delete(c1/m-b): %v", err)
	}
	wantMachines(t, p)
}

func createIsIdempotent(t *testing.T, p providers.Provider) {
	m := Machine(p, "c1", "m-1")
	first := create(t, p, m)
	second := create(t, p, m)
	if first.ProviderID != second.ProviderID {
		t.Errorf("second Create returned provider ID %q; the first %q (want the same machine)", second.ProviderID, first.ProviderID)
	}
	wantMachines(t, p, "c1/m-1")
	if err := p.Delete(ctx(t), m); err != nil {
		t.Fatal(err)
	}
}

func deleteMissing(t *testing.T, p providers.Provider) {
	m := Machine(p, "c1", "never-made")
	if err := p.Delete(ctx(t), m); err != nil {
		t.Fatalf("Delete of a missing machine: %v; want success", err)
	}
	create(t, p, m)
	for i := range 2 {
		if err := p.Delete(ctx(t), m); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	wantMachines(t, p)
}

func concurrentCreate(t *testing.T, p providers.Provider) {
	m := Machine(p, "c1", "racy")
	var wg sync.WaitGroup
	ids := make([]string, 4)
	errs := make([]error, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := p.Create(ctx(t), m)
			ids[i], errs[i] = inst.ProviderID, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Create #%d: %v", i, err)
		}
		if ids[i] != ids[0] {
			t.Errorf("concurrent Creates returned provider IDs %v; want one machine", ids)
		}
	}
	wantMachines(t, p, "c1/racy")
	if err := p.Delete(ctx(t), m); err != nil {
		t.Fatal(err)
	}
}

func twoClusters(t *testing.T, p providers.Provider) {
	a, b := Machine(p, "c1", "cp-0"), Machine(p, "c2", "cp-0")
	ia, ib := create(t, p, a), create(t, p, b)
	if ia.ProviderID == ib.ProviderID {
		t.Errorf("c1/cp-0 and c2/cp-0 share provider ID %q", ia.ProviderID)
	}
	wantMachines(t, p, "c1/cp-0", "c2/cp-0")
	if err := p.Delete(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	wantMachines(t, p, "c2/cp-0")
	if err := p.Delete(ctx(t), b); err != nil {
		t.Fatal(err)
	}
}

func badSpec(t *testing.T, p providers.Provider) {
	m := Machine(p, "c1", "bad")
	m.Spec = json.RawMessage(`{"noSuchField": 1}`)
	_, err := p.Create(ctx(t), m)
	if !providers.IsPermanent(err) {
		t.Fatalf("Create with spec %s: error %v; want a permanent error", m.Spec, err)
	}
	wantMachines(t, p)
	t.Logf("bad spec error: %v", err)
}

// listReportsTemplate: List says what each machine was made from (pool,
// role, template hash, labels, version), so a daemon that lost its store
// can rebuild its records from the provider.
func listReportsTemplate(t *testing.T, p providers.Provider) {
	m := Machine(p, "c1", "templated")
	m.Role, m.Deployment, m.TemplateHash = wire.RoleWorker, "md-1", "3f2a9c"
	m.Labels = map[string]string{"gitfleet.io/deployment": "md-1", "tier": "gold"}
	create(t, p, m)
	list, err := p.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("List = %+v; want the one machine", list)
	}
	in := list[0]
	if in.Deployment != "md-1" || in.Role != wire.RoleWorker || in.TemplateHash != "3f2a9c" || in.Version != m.Version ||
		in.Labels["tier"] != "gold" || in.Reason != "" {
		t.Errorf("List = %+v; want pool md-1, role worker, template hash 3f2a9c, version %s, its labels and no reason", in, m.Version)
	}
	if err := p.Delete(ctx(t), m); err != nil {
		t.Fatal(err)
	}
}
