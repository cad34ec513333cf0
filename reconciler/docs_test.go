package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoopTableNamesEachWakeUpOnce: docs/reconciler.md's table of what
// wakes the loop has one row per wake-up, as many as the sentence above
// it counts. Before, it had the tick's row twice, in two wordings, under
// "Four things wake it".
func TestLoopTableNamesEachWakeUpOnce(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "reconciler.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, loop, _ := strings.Cut(string(doc), "## The loop\n")
	loop, _, _ = strings.Cut(loop, "\n\n|")
	table, _, _ := strings.Cut(strings.SplitN(string(doc), "| wake-up | what it marks dirty |\n| --- | --- |\n", 2)[1], "\n\n")
	seen := map[string]bool{}
	rows := strings.Split(table, "\n")
	for _, row := range rows {
		wake := strings.TrimSpace(strings.Split(row, "|")[1])
		if seen[wake] {
			t.Errorf("the loop's table has the row %q twice", wake)
		}
		seen[wake] = true
	}
	words := []string{"", "One", "Two", "Three", "Four", "Five", "Six"}
	if len(rows) >= len(words) || !strings.Contains(loop, words[len(rows)]+" things wake it") {
		t.Errorf("the loop's table has %d rows; the text above it says %q", len(rows), loop)
	}
}
