package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/internal/buildid"
	"github.com/gitfleet/gitfleet/internal/privfile"
)

// The summary cache (Options.SumCache) keeps what reading the branch
// computed from each cluster file — its clusterSum, by blob hash — so a
// restart reads the files that changed since, not all of them: at 10,000
// clusters, inflating and scanning every file took 0.7 s of CPU while the
// daemon was also reading its records and its revision (1.6 s on the first
// restart of a daemon that had written them all, before the files a
// Writer writes were kept too). An entry is exactly what reading that blob
// again would give: computed from the file's bytes, or from the status
// the Writer encoded into it; a file of another build, damaged or missing
// is an empty cache.
//
// The first line is the magic, the build's identity and the CRC-32C
// (Castagnoli, 8 hex digits) of the JSON that follows it: a changed byte
// that still decodes (a count, a phase) fails the check, and every status
// file is read from the branch again rather than fleet.yaml's counts being
// made from it. The check costs one pass over the file, at the speed of
// the CPU's CRC instruction.

const sumCacheMagic = "gitfleet-status-sums 2 "

var sumCRC = crc32.MakeTable(crc32.Castagnoli)

// sumHeader is the first line of a summary cache file holding body.
func sumHeader(id string, body []byte) string {
	return fmt.Sprintf("%s%s %08x\n", sumCacheMagic, id, crc32.Checksum(body, sumCRC))
}

type sumFile struct {
	Sums map[string]sumJSON `json:"sums"`
}

type sumJSON struct {
	Class           string              `json:"class,omitempty"`
	Version         string              `json:"version,omitempty"`
	Phase           string              `json:"phase,omitempty"`
	Machines        int                 `json:"machines,omitempty"`
	Created         time.Time           `json:"created,omitzero"`
	MachinePhases   map[string]int      `json:"machinePhases,omitempty"`
	MachineVersions map[string]int      `json:"machineVersions,omitempty"`
	Conds           map[string]condJSON `json:"conds,omitempty"`
	From            uint64              `json:"from,omitempty"`
	Deleted         []DeletedMachine    `json:"deleted,omitempty"`
}

type condJSON struct {
	Status string    `json:"status"`
	Since  time.Time `json:"since,omitzero"`
}

func sumToJSON(s clusterSum) sumJSON {
	j := sumJSON{Class: s.class, Version: s.version, Phase: s.phase, Machines: s.machines, Created: s.created,
		MachinePhases: s.machinePhases.toMap(), MachineVersions: s.machineVersions.toMap(), From: s.from,
		Deleted: s.deleted}
	if len(s.conds) > 0 {
		j.Conds = make(map[string]condJSON, len(s.conds))
		for _, c := range s.conds {
			j.Conds[c.typ] = condJSON{Status: c.status, Since: c.since}
		}
	}
	return j
}

func sumFromJSON(j sumJSON) clusterSum {
	s := clusterSum{class: j.Class, version: j.Version, phase: j.Phase, machines: j.Machines, created: j.Created,
		machinePhases: tallyOf(j.MachinePhases), machineVersions: tallyOf(j.MachineVersions), from: j.From,
		deleted: j.Deleted}
	for t, c := range j.Conds {
		s.conds.set(t, condMark{status: c.Status, since: c.Since})
	}
	return s
}

// loadSums reads the summary cache, if this build wrote it.
func (w *Writer) loadSums() {
	id := buildid.ID()
	if w.opts.SumCache == "" || id == "" {
		return
	}
	data, err := os.ReadFile(w.opts.SumCache)
	if err != nil {
		return
	}
	rest, ok := bytes.CutPrefix(data, []byte(sumCacheMagic+id+" "))
	if !ok {
		return
	}
	_, body, ok := bytes.Cut(rest, []byte("\n"))
	if !ok || string(data[:len(data)-len(body)]) != sumHeader(id, body) {
		w.log.Warn().Str("path", w.opts.SumCache).Msg("status: the summary cache is damaged; every status file is read from the branch")
		return
	}
	var f sumFile
	if json.Unmarshal(body, &f) != nil {
		return
	}
	w.cachedSums = make(map[plumbing.Hash]clusterSum, len(f.Sums))
	for k, j := range f.Sums {
		if plumbing.IsHash(k) {
			w.cachedSums[plumbing.NewHash(k)] = sumFromJSON(j)
		}
	}
}

// saveSums writes the summaries reading the branch used (those of the
// files at the tip the Writer started from, and of any it read since) and
// those of the files it wrote, when it learnt or wrote any, replacing the
// file by rename (mode 0600). A file that cannot be written costs the
// next start that much reading.
//
// A file this Writer wrote is summarized by its cluster's entry in
// clusters, which SetCluster set from what it encodes (writtenSum) and
// reload from what it read: while no newer status of the cluster waits
// (pending, outbox), that entry is the summary of the file at tip.
func (w *Writer) saveSums() {
	id := buildid.ID()
	if w.opts.SumCache == "" || id == "" {
		return
	}
	w.mu.Lock()
	if w.sumsLearnt == 0 && !w.wrote && !w.keyed {
		w.mu.Unlock()
		return
	}
	f := sumFile{Sums: make(map[string]sumJSON, max(len(w.sums), len(w.known)))}
	for h, s := range w.sums {
		f.Sums[h.String()] = sumToJSON(s)
	}
	for p, h := range w.known {
		if p == FleetFile || w.unreadable[h] {
			continue
		}
		_, pending := w.pending[p]
		if _, out := w.outbox[p]; out || pending {
			continue
		}
		// A summary read from the file is replaced by the cluster's
		// entry when that holds the key the file was made from: a file
		// that encoded alike was not written again, and without its key
		// every later start would build its status again.
		s, ok := w.clusters[clusterName(p)]
		if _, done := w.sums[h]; ok && (!done || s.from != 0) {
			f.Sums[h.String()] = sumToJSON(s)
		}
	}
	w.sumsLearnt, w.wrote, w.keyed = 0, false, false
	w.mu.Unlock()
	body, err := json.Marshal(f)
	if err == nil {
		err = privfile.Write(w.opts.SumCache, append([]byte(sumHeader(id, body)), body...))
	}
	if err != nil {
		w.log.Warn().Err(err).Msg("status: cannot write the summary cache; the next start reads every status file")
	}
}
