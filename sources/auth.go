package sources

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// authMethod turns Auth into go-git's transport auth for loc; nil means none.
func (a Auth) authMethod(loc location) (transport.AuthMethod, error) {
	switch {
	case loc.http && a.Token != "":
		user := a.Username
		if user == "" {
			user = "git"
		}
		return &http.BasicAuth{Username: user, Password: a.Token}, nil
	case loc.http && (a.Username != "" || a.Password != ""):
		return &http.BasicAuth{Username: a.Username, Password: a.Password}, nil
	case loc.http && loc.password != "":
		return &http.BasicAuth{Username: loc.user, Password: loc.password}, nil
	case loc.http && loc.user != "":
		// https://<token>@host: the user name is the token.
		return &http.BasicAuth{Username: "git", Password: loc.user}, nil
	case loc.ssh:
		return a.sshAuth(loc)
	}
	return nil, nil
}

func (a Auth) sshAuth(loc location) (transport.AuthMethod, error) {
	user := "git"
	if ep, err := transport.NewEndpoint(loc.url); err == nil && ep.User != "" {
		user = ep.User
	}
	if a.SSHKeyFile == "" {
		agent, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("ssh auth: no key file given and no ssh-agent (%w); set the SSH key file", err)
		}
		cb, err := a.hostKeyCallback()
		if err != nil {
			return nil, err
		}
		agent.HostKeyCallback = cb
		return agent, nil
	}
	auth, err := gitssh.NewPublicKeysFromFile(user, a.SSHKeyFile, a.SSHKeyPassphrase)
	if err != nil {
		return nil, fmt.Errorf("ssh key %s: %w", a.SSHKeyFile, err)
	}
	cb, err := a.hostKeyCallback()
	if err != nil {
		return nil, err
	}
	auth.HostKeyCallback = cb
	return auth, nil
}

func (a Auth) hostKeyCallback() (ssh.HostKeyCallback, error) {
	files := []string{a.KnownHostsFile}
	if a.KnownHostsFile == "" {
		if env := os.Getenv("SSH_KNOWN_HOSTS"); env != "" {
			files = filepath.SplitList(env)
		} else {
			home, _ := os.UserHomeDir()
			files = []string{filepath.Join(home, ".ssh", "known_hosts")}
		}
	}
	cb, err := gitssh.NewKnownHostsCallback(files...)
	if err != nil {
		return nil, fmt.Errorf("ssh known_hosts %v: %w; give a known_hosts file with the server's key", files, err)
	}
	return cb, nil
}
