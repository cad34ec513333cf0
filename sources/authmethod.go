package sources

import "github.com/go-git/go-git/v5/plumbing/transport"

// AuthMethod is the go-git authentication for the repository's remote (nil
// for a local repository or a remote without credentials), so the status
// writer pushes with the same credentials the repository was fetched with.
func (r *Repo) AuthMethod() (transport.AuthMethod, error) {
	if !r.loc.remote {
		return nil, nil
	}
	return r.opts.Auth.authMethod(r.loc)
}
