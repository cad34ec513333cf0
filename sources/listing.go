package sources

import "path"

// listing is the inputs of a validated revision, kept for the next read:
// a commit that only edits files (no path came or went) is listed by
// taking these and making anew the inputs of the files it edited
// (patchListing), not by going through every file of the tree again
// (~4 ms a commit at 10,000 files).
type listing struct {
	snap *snapshot // the snapshot listed
	ins  []input   // its inputs, contents let go (validation drops them)
}

// patchListing lists snap, a snapshot patched from last.snap, by copying
// last's inputs into buf and replacing those of the files snap edited.
// ok is false when the listing cannot be patched and must be collected:
// gitfleet.yaml or a kustomization was edited (what is listed may change),
// an edited file is over the size limit (collect words the error), or an
// edited file's place in last is not known.
func patchListing(snap *snapshot, last *listing, buf []input) (_ []input, ok bool, _ error) {
	if !snap.patched || last == nil {
		return nil, false, nil
	}
	for _, e := range snap.edited {
		if e.path == ConfigFile || isKustomization(path.Base(e.path)) {
			return nil, false, nil
		}
	}
	ins := append(buf[:0], last.ins...)
	for _, e := range snap.edited {
		old := last.snap.file(e.path)
		if old == nil {
			return nil, false, nil
		}
		if old.place == 0 {
			// Never listed (a README, a file in a dot folder, one
			// outside spec.paths): the same path is not listed now.
			continue
		}
		i := int(old.place) - 1
		if i >= len(ins) || last.ins[i].ent != old {
			// Its place is another listing's: not known here. (A
			// read of another revision since would have done it,
			// but it also moves the tree the next read starts from,
			// which drops the listing first.)
			return nil, false, nil
		}
		in, tooBig, err := snap.inputOf(e.path, e)
		if err != nil {
			return nil, false, err
		}
		if tooBig != nil {
			return nil, false, nil
		}
		ins[i] = in
		// The new entry takes the old one's place. Should the patch
		// fail after this, collect lists the same snapshot and gives it
		// the same place.
		e.place = old.place
	}
	return ins, true, nil
}
