// Package sources turns "a Git repository and a branch" into validated
// revisions of the fleet: it opens local and remote repositories, reads a
// commit's files straight from the object store (no checkout), renders
// kustomizations, verifies commit signatures and watches for new commits.
//
// Reading a revision:
//
//	repo, err := sources.Open(ctx, sources.Options{Location: pathOrURL, DataDir: dir})
//	defer repo.Close()
//	hash, err := repo.Resolve(ctx, "main")   // branch, tag or commit → commit hash
//	files, err := repo.Files(ctx, hash)      // gitfleet.yaml, spec.paths YAML (kustomize rendered), policies
//	rev, err := repo.Revision(ctx, "main")   // read + verify + validate
//	if rev.Rejected() { ... rev.Err, rev.Errors ... } else { ... rev.Fleet ... }
//
// Location is a local path (working or bare repository, read in place), a
// file://, http(s):// or ssh:// URL, or git@host:path. Remote repositories
// are cloned bare into DataDir/repos once; Resolve, Files and Revision read
// what the clone holds, and Repo.Fetch updates it.
//
// Following a branch:
//
//	src, err := sources.Watch(ctx, repo, sources.WatchOptions{Branch: "main"})
//	defer src.Close()
//	hook, err := src.Webhook(sources.WebhookOptions{Secret: secret}) // mount on sources.WebhookPath
//	for rev := range src.Revisions() { ... } // each new head, good or rejected
//	good := src.Current()                    // last good revision
//
// Local repositories are watched with fsnotify, remote ones polled (with
// jitter and backoff) and fetched at once on a signed webhook. Decisions
// are written down in docs/sources.md.
//
// A Revision with Err set is a rejected revision (validation errors or a bad
// signature), not a failure: the error result of Revision is for Git and
// I/O problems only.
//
// Parse results are cached per file by content hash, and kustomize output by
// the hash of its inputs, so a commit that touches one file re-reads and
// re-validates one file.
package sources
