package natsbus

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// The embedded server's credentials (docs/operations.md): NATS's
// decentralized authentication, made at the first start under
// <data dir>/nats-auth and kept there (folder 0700, files 0600).
//
//   - an operator and a system account, which the server trusts;
//   - the account GITFLEET, with JetStream, that every gitfleet process
//     uses; its own key signs the daemon's user (no limits) and each
//     worker credential's user (`gitfleet nats-creds --worker NAME`:
//     worker permissions, on subjects that carry NAME, so a worker can
//     publish no event or inventory in another credential's name);
//   - a signing key scoped to the node role: any user it signs may only
//     publish gitfleet.heartbeat.<its name> and gitfleet.join.<its name>
//     and hear replies on _INBOX_node.<its name>.>, and a worker that
//     holds it mints one user per machine, named <cluster>.<machine>, so a
//     node can send no heartbeat and ask no review but its own.
const (
	AuthDirName     = "nats-auth"
	AuthGenerated   = "generated"
	AuthNone        = "none"
	DaemonCredsFile = "daemon.creds"
	NodeSignerFile  = "node-signer.nk"
	AccountName     = "GITFLEET"
	// LegacyWorkerCredsFile is where versions before per-worker
	// credentials wrote the one user every worker shared; its user is
	// revoked (RevokedFile) and the file removed at the next start.
	LegacyWorkerCredsFile = "worker.creds"
	// RevokedFile lists the users the account revokes: "<public key>
	// <unix time>" a line, each JWT of that user issued up to that time.
	RevokedFile = "revoked"
	// workerTag marks a worker credential's user in its JWT, and
	// providerTag, followed by its name, the provider it reports.
	workerTag   = "gitfleet-worker"
	providerTag = "gitfleet-provider:"
)

// Auth is the generated operator, accounts and keys.
type Auth struct {
	Dir                                   string
	operator, account, system, nodeSigner nkeys.KeyPair
	daemonJWT                             string
	daemonSeed                            []byte
	revoked                               map[string]int64 // user public key → revoked up to (unix)
}

// LoadAuth loads the credentials kept in dir, making them first when dir
// holds none. Every load writes a fresh daemon.creds, for daemon replicas
// that connect from outside (gitfleet serve --nats-creds); workers get
// credentials of their own from WorkerCreds. A worker.creds an earlier
// version wrote has its user revoked, then goes.
func LoadAuth(dir string) (*Auth, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	a := &Auth{Dir: dir}
	var err error
	for _, k := range []struct {
		file   string
		create func() (nkeys.KeyPair, error)
		dst    *nkeys.KeyPair
	}{
		{"operator.nk", nkeys.CreateOperator, &a.operator},
		{"account.nk", nkeys.CreateAccount, &a.account},
		{"system.nk", nkeys.CreateAccount, &a.system},
	} {
		if *k.dst, err = loadOrCreateKey(filepath.Join(dir, k.file), k.create); err != nil {
			return nil, err
		}
	}
	if a.nodeSigner, err = loadOrCreateNodeSigner(filepath.Join(dir, NodeSignerFile), a.account); err != nil {
		return nil, err
	}
	if a.daemonJWT, a.daemonSeed, err = mintUser(a.account, "", "gitfleet-daemon", nil); err != nil {
		return nil, err
	}
	creds, err := jwt.FormatUserConfig(a.daemonJWT, a.daemonSeed)
	if err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	if err := writeSecret(filepath.Join(dir, DaemonCredsFile), creds); err != nil {
		return nil, err
	}
	if a.revoked, err = loadRevoked(filepath.Join(dir, RevokedFile)); err != nil {
		return nil, err
	}
	if err := a.revokeLegacyWorker(); err != nil {
		return nil, err
	}
	return a, nil
}

// ReadAuth reads the account's key kept in dir, to mint workers'
// credentials (WorkerCreds, for gitfleet nats-creds), and nothing else
// can be done with what it returns. Unlike LoadAuth it makes nothing and
// writes nothing: a dir without the key (a wrong data dir) is an error,
// not a new account no server trusts, and the daemon's files are left as
// they are (daemon.creds, the legacy worker.creds it revokes at its start)
// even when another user than the daemon's runs it.
func ReadAuth(dir string) (*Auth, error) {
	path := filepath.Join(dir, "account.nk")
	seed, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no NATS keys (no account.nk): the daemon makes them at its first start, in its data dir's %s; give the daemon's --data-dir", dir, AuthDirName)
	}
	if err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("nats auth: %s: %w", path, err)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, fmt.Errorf("nats auth: %s holds no account's key", path)
	}
	return &Auth{Dir: dir, account: kp}, nil
}

// ConfigAuth is the credentials kept in dir, for the configuration of an
// external server (ServerConfig, gitfleet nats-config). When dir holds
// the account's key it only reads, and writes nothing, so whoever runs it
// (root, on the daemon's data dir) leaves no file the daemon's user cannot
// read: daemon.creds is not written, and the user of a worker.creds an
// earlier version wrote is revoked in what it returns only, the file and
// RevokedFile left as they are for the daemon's next start to revoke and
// remove it. A key missing beside the account's is an error that names
// it, not a new key no server trusts. A dir without the account's key
// gets new credentials, as at the daemon's first start (LoadAuth).
func ConfigAuth(dir string) (*Auth, error) {
	if _, err := os.Stat(filepath.Join(dir, "account.nk")); errors.Is(err, os.ErrNotExist) {
		return LoadAuth(dir)
	}
	a := &Auth{Dir: dir}
	var err error
	for _, k := range []struct {
		file string
		dst  *nkeys.KeyPair
	}{
		{"operator.nk", &a.operator},
		{"account.nk", &a.account},
		{"system.nk", &a.system},
	} {
		if *k.dst, err = readKey(dir, k.file); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(dir, NodeSignerFile)
	s, err := LoadNodeSigner(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, missingKey(dir, NodeSignerFile)
	}
	if err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	if accountPub, _ := a.account.PublicKey(); s.account != accountPub {
		return nil, fmt.Errorf("nats auth: %s belongs to account %s, not this data dir's %s", path, s.account, accountPub)
	}
	a.nodeSigner = s.key
	if a.revoked, err = loadRevoked(filepath.Join(dir, RevokedFile)); err != nil {
		return nil, err
	}
	user, _, err := legacyWorker(dir)
	if err != nil {
		return nil, err
	}
	if _, done := a.revoked[user]; user != "" && !done {
		a.revoked[user] = time.Now().Unix()
	}
	return a, nil
}

// readKey reads the seed kept in dir's file, which must be there.
func readKey(dir, file string) (nkeys.KeyPair, error) {
	path := filepath.Join(dir, file)
	seed, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, missingKey(dir, file)
	}
	if err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("nats auth: %s: %w", path, err)
	}
	return kp, nil
}

func missingKey(dir, file string) error {
	return fmt.Errorf("nats auth: %s holds account.nk but no %s: the daemon's keys are incomplete, and a new %[2]s would be one no server or client knows; restore %[1]s from its backup",
		dir, file)
}

// legacyWorker reads the worker.creds an earlier version wrote in dir:
// found is whether there is one, user its user's public key ("" when it
// holds none).
func legacyWorker(dir string) (user string, found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, LegacyWorkerCredsFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("nats auth: %w", err)
	}
	if uc, err := userClaims(data); err == nil {
		return uc.Subject, true, nil
	}
	return "", true, nil
}

// revokeLegacyWorker revokes the user of the worker.creds an earlier
// version wrote, which every worker shared and whose permissions let a
// worker publish events and inventories in any worker's name, then
// removes the file: the revocation is written first, so a start that
// stops between the two revokes it again next time.
func (a *Auth) revokeLegacyWorker() error {
	user, found, err := legacyWorker(a.Dir)
	if err != nil || !found {
		return err
	}
	if _, done := a.revoked[user]; user != "" && !done {
		a.revoked[user] = time.Now().Unix()
		if err := writeRevoked(filepath.Join(a.Dir, RevokedFile), a.revoked); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(a.Dir, LegacyWorkerCredsFile)); err != nil {
		return fmt.Errorf("nats auth: %w", err)
	}
	return nil
}

// loadRevoked reads RevokedFile; none is an empty list.
func loadRevoked(path string) (map[string]int64, error) {
	out := map[string]int64{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		var at int64
		if len(f) == 2 {
			at, err = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) != 2 || err != nil || !nkeys.IsValidPublicUserKey(f[0]) {
			return nil, fmt.Errorf("nats auth: %s:%d: want a user's public key and a unix time", path, i+1)
		}
		out[f[0]] = at
	}
	return out, nil
}

func writeRevoked(path string, revoked map[string]int64) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(revoked)) {
		fmt.Fprintf(&b, "%s %d\n", k, revoked[k])
	}
	return writeSecret(path, []byte(b.String()))
}

// WorkerCreds returns the .creds file content of the worker credential
// name: a user named name, tagged as a worker's, with WorkerPermissions
// for name. Workers with the identity name, or name_<anything>, run with
// it (wire.WorkerCredential).
//
// The credentials report provider's machines only: a report of a provider
// whose machines do not live on one host covers every machine of it, so
// credentials that could report any provider could have every machine of
// another provider than their worker's found gone and replaced.
func (a *Auth) WorkerCreds(name, provider string) ([]byte, error) {
	if !wire.ValidCredential(name) {
		return nil, fmt.Errorf("nats worker credentials: %q: a name is letters, digits and '-' (no '_'), at most %d of them", name, wire.MaxWorkerID)
	}
	if !wire.ValidName(provider) {
		return nil, fmt.Errorf("nats worker credentials: provider %q is no provider's name", provider)
	}
	j, seed, err := mintUser(a.account, "", name, func(p *jwt.Permissions) { WorkerPermissions(p, name, provider) }, workerTag, providerTag+provider)
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(j, seed)
}

// CredsWorker returns the worker credential's name the .creds file at path
// holds and the provider it reports, or "" when it holds another user (the
// daemon's, or one an operator made).
func CredsWorker(path string) (name, provider string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("nats credentials: %w", err)
	}
	uc, err := userClaims(data)
	if err != nil {
		return "", "", fmt.Errorf("nats credentials %s: %w", path, err)
	}
	if !uc.Tags.Contains(workerTag) || !wire.ValidCredential(uc.Name) {
		return "", "", nil
	}
	for _, tag := range uc.Tags {
		if p, ok := strings.CutPrefix(tag, providerTag); ok {
			provider = p
		}
	}
	return uc.Name, provider, nil
}

func userClaims(creds []byte) (*jwt.UserClaims, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, err
	}
	return jwt.DecodeUserClaims(token)
}

// ownsStore refuses a store (dataDir/nats) whose streams all belong to
// another account than a's: the credentials that made it were lost, and
// new ones would start with an empty store, every record, rollout and
// cluster CA out of reach and every local node's credentials refused. A
// store of no account ($G, --nats-auth none) is not refused: docs say the
// first start with credentials begins empty.
func (a *Auth) ownsStore(dataDir string) error {
	root := filepath.Join(dataDir, "nats", "jetstream")
	mine, err := a.account.PublicKey()
	if err != nil {
		return err
	}
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil // no store yet
	}
	var other string
	for _, d := range dirs {
		streams, _ := os.ReadDir(filepath.Join(root, d.Name(), "streams"))
		if len(streams) == 0 || !nkeys.IsValidPublicAccountKey(d.Name()) {
			continue
		}
		if d.Name() == mine {
			return nil
		}
		other = d.Name()
	}
	if other == "" {
		return nil
	}
	return fmt.Errorf("the NATS store %s holds the streams of account %s, and %s holds the keys of account %s: the credentials that made the store are lost, "+
		"and new ones would start with an empty store (machine records, rollouts, the clusters' CAs) and refuse every local node's credentials; "+
		"restore %s from its backup, or, to start with an empty store, move %s away",
		filepath.Join(dataDir, "nats"), other, a.Dir, mine, a.Dir, filepath.Join(dataDir, "nats"))
}

// trust is what a server must know to trust the generated credentials:
// the operator's JWT, and each account's public key and JWT.
type trust struct {
	operator       *jwt.OperatorClaims
	operatorJWT    string
	sysPub, sysJWT string
	accPub, accJWT string
}

func (a *Auth) trust() (*trust, error) {
	opPub, _ := a.operator.PublicKey()
	t := &trust{}
	t.sysPub, _ = a.system.PublicKey()
	t.accPub, _ = a.account.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "gitfleet"
	oc.SystemAccount = t.sysPub
	var err error
	if t.operatorJWT, err = oc.Encode(a.operator); err != nil {
		return nil, fmt.Errorf("nats auth: operator: %w", err)
	}
	if t.operator, err = jwt.DecodeOperatorClaims(t.operatorJWT); err != nil {
		return nil, fmt.Errorf("nats auth: operator: %w", err)
	}
	sc := jwt.NewAccountClaims(t.sysPub)
	sc.Name = "SYS"
	if t.sysJWT, err = sc.Encode(a.operator); err != nil {
		return nil, fmt.Errorf("nats auth: system account: %w", err)
	}
	ac := jwt.NewAccountClaims(t.accPub)
	ac.Name = AccountName
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	scope := jwt.NewUserScope()
	scope.Key, _ = a.nodeSigner.PublicKey()
	scope.Role = "node"
	scope.Description = "a gitfleet node: publishes its own heartbeats and join reviews, hears only their replies"
	scope.Template.Pub.Allow.Add(wire.SubjectHeartbeats+".{{name()}}", wire.SubjectJoin+".{{name()}}")
	scope.Template.Sub.Allow.Add("_INBOX_node.{{name()}}.>") // wire.NodeInboxPrefix
	ac.SigningKeys.AddScopedSigner(scope)
	for k, at := range a.revoked {
		ac.RevokeAt(k, time.Unix(at, 0))
	}
	if t.accJWT, err = ac.Encode(a.operator); err != nil {
		return nil, fmt.Errorf("nats auth: account: %w", err)
	}
	return t, nil
}

// configure makes so trust the operator and know both accounts.
func (a *Auth) configure(so *server.Options) error {
	t, err := a.trust()
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	if err := res.Store(t.sysPub, t.sysJWT); err != nil {
		return err
	}
	if err := res.Store(t.accPub, t.accJWT); err != nil {
		return err
	}
	so.TrustedOperators = []*jwt.OperatorClaims{t.operator}
	so.AccountResolver = res
	so.SystemAccount = t.sysPub
	return nil
}

// ServerConfig is the part of a nats-server configuration file that makes
// an external server (or every server of a cluster) trust the generated
// credentials, as the embedded server does. It holds public keys and
// JWTs only: no secret.
func (a *Auth) ServerConfig() (string, error) {
	t, err := a.trust()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`# gitfleet's NATS credentials (docs/operations.md): the operator, the
# system account and the account GITFLEET, whose users are in %s.
operator: %s
system_account: %s
resolver: MEMORY
resolver_preload: {
  %s: %s
  %s: %s
}
`, a.Dir, t.operatorJWT, t.sysPub, t.sysPub, t.sysJWT, t.accPub, t.accJWT), nil
}

// WorkerPermissions are what the workers of credential name may do
// (docs/operations.md): take the tasks of the task stream and ack them,
// read the machine records, read and write the inmemory provider's bucket
// (not change its stream, which the daemon makes: a stream that
// republished what a worker writes would publish it on any subject), publish
// events on their own name's subjects only (wire.EventSubject) and
// inventories of provider in their own name only (wire.InventorySubject),
// hear replies on their own
// inbox only (wire.WorkerInboxPrefix). Above all they may not publish a
// task or a heartbeat, change a stream, or speak in another credential's
// name.
func WorkerPermissions(p *jwt.Permissions, name, provider string) {
	tasks, records, cloud := wire.StreamTasks, "KV_"+wire.BucketMachines, "KV_"+wire.BucketInmemory
	p.Pub.Allow.Add(
		wire.SubjectEvents+".*.from."+name,
		wire.SubjectInventory+"."+provider+"."+name+".*",
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.*",
		"$JS.API.CONSUMER.CREATE."+tasks+".>",
		"$JS.API.CONSUMER.DURABLE.CREATE."+tasks+".>",
		"$JS.API.CONSUMER.INFO."+tasks+".>",
		"$JS.API.CONSUMER.MSG.NEXT."+tasks+".>",
		"$JS.ACK."+tasks+".>",
		"$JS.API.DIRECT.GET."+records+".>",
		"$JS.API.STREAM.MSG.GET."+records,
		"$JS.API.CONSUMER.CREATE."+records+".>",
		"$JS.API.CONSUMER.DELETE."+records+".>",
		"$JS.API.DIRECT.GET."+cloud+".>",
		"$JS.API.STREAM.MSG.GET."+cloud,
		"$JS.API.CONSUMER.CREATE."+cloud+".>",
		"$JS.API.CONSUMER.MSG.NEXT."+cloud+".>", // List fetches the cloud in batches
		"$JS.API.CONSUMER.DELETE."+cloud+".>",
		"$KV."+wire.BucketInmemory+".>",
		"$JS.FC.>",
		wire.SubjectJoin+".>", // the inmemory provider reviews its machines' tokens
	)
	p.Sub.Allow.Add(wire.WorkerInboxPrefix(name)+".>", wire.SubjectInventoryRequest)
}

// NodeSigner mints the credentials of one node: a user named
// <cluster>.<machine>, signed by the node-scoped key, so the server lets
// it publish its own heartbeats and join reviews (the scope's template)
// and nothing else.
type NodeSigner struct {
	account string // the account's public key
	key     nkeys.KeyPair
}

// LoadNodeSigner reads a node signer file (node-signer.nk): the account's
// public key on its first line, the node-scoped key's seed on its second.
func LoadNodeSigner(path string) (*NodeSigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats node signer: %w", err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 2 || !nkeys.IsValidPublicAccountKey(lines[0]) {
		return nil, fmt.Errorf("nats node signer %s: want the account's public key and the signing key's seed, one per line", path)
	}
	kp, err := nkeys.FromSeed([]byte(lines[1]))
	if err != nil {
		return nil, fmt.Errorf("nats node signer %s: %w", path, err)
	}
	return &NodeSigner{account: lines[0], key: kp}, nil
}

// NodeSigner is the signer of the generated node-scoped key.
func (a *Auth) NodeSigner() *NodeSigner {
	pub, _ := a.account.PublicKey()
	return &NodeSigner{account: pub, key: a.nodeSigner}
}

// NodeSigner is what gives the local provider's nodes credentials of their
// own: the embedded server's generated signer, or the signer file
// opts.NodeSigner names (--nats-node-signer); nil when there is neither,
// and nodes then connect with the process's own credentials.
func (b *Bus) NodeSigner(opts Options) (*NodeSigner, error) {
	switch {
	case b.Auth != nil:
		return b.Auth.NodeSigner(), nil
	case opts.NodeSigner != "":
		return LoadNodeSigner(opts.NodeSigner)
	}
	return nil, nil
}

// Creds returns the .creds file content of the node of machine.
func (s *NodeSigner) Creds(cluster, machine string) ([]byte, error) {
	if strings.ContainsAny(cluster+machine, ".*> \t") {
		return nil, fmt.Errorf("nats node credentials: %q/%q is not a machine name", cluster, machine)
	}
	// The user names the account the scoped key belongs to; the server
	// checks the key is one of that account's signing keys.
	j, seed, err := mintUser(s.key, s.account, cluster+"."+machine, nil)
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(j, seed)
}

// mintUser makes a user and its JWT signed by issuer (on behalf of
// issuerAccount when issuer is a signing key), with permissions set by
// perm (nil: none of its own).
func mintUser(issuer nkeys.KeyPair, issuerAccount, name string, perm func(*jwt.Permissions), tags ...string) (string, []byte, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, err
	}
	pub, _ := ukp.PublicKey()
	seed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	uc.IssuerAccount = issuerAccount
	uc.Tags.Add(tags...)
	if perm != nil {
		perm(&uc.Permissions)
	} else if issuerAccount != "" {
		uc.UserPermissionLimits = jwt.UserPermissionLimits{} // a scoped key's users carry none
	}
	j, err := uc.Encode(issuer)
	if err != nil {
		return "", nil, fmt.Errorf("nats auth: user %s: %w", name, err)
	}
	return j, seed, nil
}

// loadOrCreateNodeSigner loads the node-scoped signing key from its signer
// file (what a worker needs to mint node credentials: the account and the
// key's seed), making both when the file is missing.
func loadOrCreateNodeSigner(path string, account nkeys.KeyPair) (nkeys.KeyPair, error) {
	accountPub, _ := account.PublicKey()
	s, err := LoadNodeSigner(path)
	switch {
	case err == nil && s.account != accountPub:
		return nil, fmt.Errorf("nats auth: %s belongs to account %s, not this data dir's %s", path, s.account, accountPub)
	case err == nil:
		return s.key, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	return kp, writeSecret(path, []byte(accountPub+"\n"+string(seed)+"\n"))
}

func loadOrCreateKey(path string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(path)
	if err == nil {
		kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
		if err != nil {
			return nil, fmt.Errorf("nats auth: %s: %w", path, err)
		}
		return kp, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("nats auth: %w", err)
	}
	kp, err := create()
	if err != nil {
		return nil, err
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, err
	}
	return kp, writeSecret(path, seed)
}

// writeSecret writes a file only its owner can read, by rename, so a
// reader never sees half of it.
func writeSecret(path string, data []byte) error {
	if err := privfile.Write(path, data); err != nil {
		return fmt.Errorf("nats auth: %w", err)
	}
	return nil
}

// CredsForbid reports whether the user of the NATS credentials file at
// path is visibly forbidden to publish subject: its JWT lists publish
// permissions and they refuse it (a deny that matches, or allows none of
// which matches). A user made by a scoped signing key carries no
// permissions in its JWT (the server applies the scope's), so such a file
// is never reported; nor is a JWT without permissions, which may publish
// anything its account may.
func CredsForbid(path, subject string) (bool, error) {
	return credsForbid(path, subject, func(p *jwt.Permissions) jwt.Permission { return p.Pub })
}

// CredsForbidSubscribe is CredsForbid for subscribing to subject.
func CredsForbidSubscribe(path, subject string) (bool, error) {
	return credsForbid(path, subject, func(p *jwt.Permissions) jwt.Permission { return p.Sub })
}

func credsForbid(path, subject string, which func(*jwt.Permissions) jwt.Permission) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("nats credentials: %w", err)
	}
	uc, err := userClaims(data)
	if err != nil {
		return false, fmt.Errorf("nats credentials %s: %w", path, err)
	}
	perm := which(&uc.Permissions)
	for _, d := range perm.Deny {
		if server.SubjectMatchesFilter(subject, d) {
			return true, nil
		}
	}
	if len(perm.Allow) == 0 {
		return false, nil
	}
	for _, a := range perm.Allow {
		if server.SubjectMatchesFilter(subject, a) {
			return false, nil
		}
	}
	return true, nil
}
