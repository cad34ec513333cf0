package sources

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas"
)

// BenchmarkObjectCacheLoad reads an object cache file of 1,000 entries of
// ~0.8 KiB (a cluster file's), each checked by its CRC-32C, as a warm plan
// at 1,000 clusters starts by doing (docs/sources.md).
func BenchmarkObjectCacheLoad(b *testing.B) {
	if buildIdentity() == "" {
		b.Skip("no build identity: the cache keeps nothing")
	}
	file := filepath.Join(b.TempDir(), "validation.objects")
	c := loadObjects(file)
	for i := range 1000 {
		c.put(fmt.Sprintf("key-%05d", i), "policies", []schemas.KnownDoc{{Kind: "Cluster", Name: fmt.Sprintf("c-%05d", i), Line: 1, Encoded: strings.Repeat("x", 800)}})
	}
	if err := c.save(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(loadObjects(file).index); n != 1000 {
			b.Fatalf("%d entries read back", n)
		}
	}
}
