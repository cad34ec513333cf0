package natsbus

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/secret"
)

// Embedded is the --nats value that starts an in-process nats-server.
const Embedded = "embedded"

// Options say where NATS is and how to authenticate. The zero value plus a
// URL is enough for an unauthenticated server.
type Options struct {
	URL       string // "embedded" or nats://host:port[,nats://…]
	DataDir   string // embedded only: the store lives in DataDir/nats
	Port      int    // embedded only: 0 picks a free port
	Host      string // embedded only: the address it listens on (default 127.0.0.1)
	User      string
	Password  string
	Token     string
	NKeySeed  string // path to an NKey seed file
	CredsFile string // path to a .creds file (JWT + NKey)
	TLSCert   string // client certificate (mutual TLS)
	TLSKey    string
	TLSCA     string // CA that signed the server's certificate
	Name      string // client name shown by the server
	// InboxPrefix replaces _INBOX for request replies (a node's
	// credentials let it hear wire.NodeInboxPrefix only).
	InboxPrefix string
	// Auth (embedded only): AuthGenerated (the default: credentials made
	// under DataDir/nats-auth and required) or AuthNone.
	Auth string
	// Limits, when set, are the streams' limits the daemon applies
	// (default DefaultLimits).
	Limits *Limits
	// Replicas is how many servers keep each stream and bucket made
	// (--nats-replicas; 0: 1). An existing one keeps its replicas unless
	// ReplicasSet (the flag was given): then the daemon changes them.
	Replicas    int
	ReplicasSet bool
	// Worker: the process is a worker, which makes only the streams and
	// buckets that are missing (EnsureMissing) and leaves their settings
	// to the daemon.
	Worker bool
	// NodeSigner is a node signer file (node-signer.nk): with it, the
	// local provider gives each node credentials of its own.
	NodeSigner string
	// ReconnectWait between attempts; default 250ms. Reconnects never give up.
	ReconnectWait time.Duration

	// userJWT and userSeed: the embedded server's generated daemon user.
	userJWT  string
	userSeed []byte
}

// BindClientFlags registers what a client needs to reach NATS: --nats (a
// URL) and its credential and TLS options. Commands that only connect
// (kubeconfig, node) bind these alone, so their help offers nothing they
// would ignore.
func (o *Options) BindClientFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "nats", o.URL, "NATS URL nats://host:port (comma-separated for a cluster)")
	fs.StringVar(&o.User, "nats-user", o.User, "NATS user name")
	fs.StringVar(&o.Password, "nats-password", o.Password, "NATS password (prefer $GITFLEET_NATS_PASSWORD)")
	fs.StringVar(&o.Token, "nats-token", o.Token, "NATS token (prefer $GITFLEET_NATS_TOKEN)")
	fs.StringVar(&o.NKeySeed, "nats-nkey", o.NKeySeed, "NATS NKey seed `file`")
	fs.StringVar(&o.CredsFile, "nats-creds", o.CredsFile, "NATS credentials `file` (JWT and NKey)")
	fs.StringVar(&o.TLSCert, "nats-tls-cert", o.TLSCert, "client certificate `file` for NATS TLS")
	fs.StringVar(&o.TLSKey, "nats-tls-key", o.TLSKey, "client key `file` for NATS TLS")
	fs.StringVar(&o.TLSCA, "nats-tls-ca", o.TLSCA, "CA `file` to verify the NATS server")
}

// BindFlags registers every NATS flag of a process that may run the
// embedded server, make streams and sign for nodes (serve, up, worker):
// BindClientFlags' and --nats-node-signer, --nats-auth, --nats-replicas.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.BindClientFlags(fs)
	fs.Lookup("nats").Usage = "NATS: `embedded` or a nats://host:port URL (comma-separated for a cluster)"
	fs.StringVar(&o.NodeSigner, "nats-node-signer", o.NodeSigner, "local and docker providers: node signer `file` (the daemon's DATA-DIR/nats-auth/node-signer.nk): each node gets NATS credentials that publish its own heartbeats and join reviews only")
	fs.StringVar(&o.Auth, "nats-auth", AuthGenerated, "with --nats embedded: generated (credentials made under DATA-DIR/nats-auth and required) or none")
	fs.Func("nats-replicas", "servers that keep each JetStream stream and bucket (default 1): set on those made; given, also on those that exist (never lowered otherwise)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return fmt.Errorf("%q: want 1 to 5 (JetStream's limit)", v)
		}
		o.Replicas, o.ReplicasSet = n, true
		return nil
	})
}

// Args renders the options as flags for a child process (gitfleet node),
// so it connects to the same NATS the same way. Secrets given as values are
// not rendered; child processes inherit them through the environment.
func (o *Options) Args(url string) []string {
	args := []string{"--nats", url}
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	add("--nats-user", o.User)
	add("--nats-nkey", o.NKeySeed)
	add("--nats-creds", o.CredsFile)
	add("--nats-tls-cert", o.TLSCert)
	add("--nats-tls-key", o.TLSKey)
	add("--nats-tls-ca", o.TLSCA)
	return args
}

// NodeArgs are Args for a node that has credentials of its own (a creds
// file a NodeSigner made): the URL, that file and the TLS settings, none of
// the worker's own credentials.
func (o *Options) NodeArgs(url, credsFile string) []string {
	args := []string{"--nats", url, "--nats-creds", credsFile}
	for _, f := range [][2]string{{"--nats-tls-cert", o.TLSCert}, {"--nats-tls-key", o.TLSKey}, {"--nats-tls-ca", o.TLSCA}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	return args
}

// ResolveCredentials gathers the credentials from where they may be
// given: written in the URL (nats://user:password@host, nats://token@host),
// unless flags set them, and $GITFLEET_NATS_PASSWORD / $GITFLEET_NATS_TOKEN.
// The URL is left without them: what is logged or passed to a child then
// holds no secret, and a child gets the secrets it needs in its
// environment. Every URL of a list is cleaned; the first one's
// credentials are kept.
func (o *Options) ResolveCredentials() {
	urls := strings.Split(o.URL, ",")
	for i, u := range urls {
		clean, user, password := secret.StripUserinfo(strings.TrimSpace(u))
		urls[i] = clean
		switch {
		case user == "" || o.User != "" || o.Token != "":
		case password != "":
			o.User, o.Password = user, password
		default:
			o.Token = user
		}
	}
	o.URL = strings.Join(urls, ",")
	if o.Password == "" {
		o.Password = os.Getenv("GITFLEET_NATS_PASSWORD")
	}
	if o.Token == "" {
		o.Token = os.Getenv("GITFLEET_NATS_TOKEN")
	}
}
