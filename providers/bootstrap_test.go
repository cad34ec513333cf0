package providers_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// seen records the bootstrap data each Create was handed.
type seen struct {
	providers.Provider
	mu   sync.Mutex
	data map[string]string
}

func (s *seen) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	s.mu.Lock()
	s.data[m.Name] = string(m.Bootstrap)
	s.mu.Unlock()
	m.Bootstrap = nil // not kubeadm data: the inmemory provider would review it
	return s.Provider.Create(ctx, m)
}

// A worker with the daemon's key hands the provider the bootstrap data the
// task carries sealed; one without a key, or with another, fails the
// create at once, saying which flag it needs, and creates nothing.
func TestWorkerOpensBootstrapData(t *testing.T) {
	daemonKey, _ := pki.NewKeyring([]byte(strings.Repeat("k", pki.KeySize)))
	otherKey, _ := pki.NewKeyring([]byte(strings.Repeat("o", pki.KeySize)))
	sealedTask := func(name string) wire.Task {
		tk := task(wire.OpCreate, inmemory.Name, "c1", name, "")
		tk.Bootstrap = daemonKey.Seal(tk.ID, []byte("#cloud-config\n# for "+name+"\n"))
		return tk
	}
	for _, c := range []struct {
		name string
		keys *pki.Keyring
		want string // the provider's data, or the Failed event's message
	}{
		{"with-key", daemonKey, "#cloud-config\n# for with-key\n"},
		{"no-key", nil, "--secrets-key-file"},
		{"other-key", otherKey, "sealed with another key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			p := &seen{Provider: e.inmemory(t, inmemory.Options{}), data: map[string]string{}}
			e.startWorker(t, p, providers.WorkerOptions{Keys: c.keys})
			events := e.events(t)
			e.publish(t, sealedTask(c.name))
			if c.keys == daemonKey {
				waitPhases(t, events, wire.PhaseRunning, "c1/"+c.name)
				if got := p.data[c.name]; got != c.want {
					t.Errorf("the provider was handed %q, want %q", got, c.want)
				}
				return
			}
			evs := waitPhases(t, events, wire.PhaseFailed, "c1/"+c.name)["c1/"+c.name]
			if msg := evs[len(evs)-1].Message; !strings.Contains(msg, c.want) {
				t.Errorf("Failed event %q, want it to say %q", msg, c.want)
			}
			if _, created := p.data[c.name]; created {
				t.Error("the provider was asked to create the machine")
			}
		})
	}
}
