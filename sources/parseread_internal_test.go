package sources

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/schemas"
)

// TestParseAllReadsWhileParsing: parseAll hands load its files a batch at
// a time, each once, and parses every file load filled; a read that fails
// is the validation's error, whichever batch it is in.
func TestParseAllReadsWhileParsing(t *testing.T) {
	const n = 3*readBatch + 5
	mk := func() []input {
		ins := make([]input, n)
		for i := range ins {
			ins[i] = input{File: schemas.File{Path: fmt.Sprintf("clusters/c%d.yaml", i)}, key: fmt.Sprintf("k%d", i)}
		}
		return ins
	}
	fill := func(in *input) {
		name := in.Path[len("clusters/") : len(in.Path)-len(".yaml")]
		in.Data = fmt.Appendf(nil, "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\nspec:\n  topology:\n    classRef:\n      name: x\n    version: v1.31.2\n", name)
	}
	ins := mk()
	seen := map[string]int{}
	calls := 0
	out, err := newParseCache(nil).parseAll(ins, nil, "", func(batch []*input) error {
		calls++
		if len(batch) > readBatch {
			t.Errorf("load given %d files at once, want at most %d", len(batch), readBatch)
		}
		for _, in := range batch {
			seen[in.Path]++
			fill(in)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 4 || len(seen) != n {
		t.Errorf("%d loads over %d files, want 4 batches over %d", calls, len(seen), n)
	}
	for i, p := range out {
		if seen[ins[i].Path] != 1 || p == nil || len(p.errs) != 0 || len(p.objs) != 1 || p.objs[0].Name != fmt.Sprintf("c%d", i) {
			t.Fatalf("file %d: read %d times, parsed to %+v", i, seen[ins[i].Path], p)
		}
	}
	boom := errors.New("blob missing")
	for _, failAt := range []int{0, 2} {
		calls := 0
		_, err := newParseCache(nil).parseAll(mk(), nil, "", func(batch []*input) error {
			defer func() { calls++ }()
			if calls == failAt {
				return boom
			}
			for _, in := range batch {
				fill(in)
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("read failing at batch %d: error %v, want %v", failAt, err, boom)
		}
	}
}
