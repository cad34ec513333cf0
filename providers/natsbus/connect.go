package natsbus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// ErrConnect is wrapped by every failure to reach NATS.
var ErrConnect = errors.New("nats connect")

// Bus is one connection to NATS with JetStream, and the embedded server
// when Options.URL was "embedded".
type Bus struct {
	Server *Server // nil when connected to an external NATS
	Conn   *nats.Conn
	JS     jetstream.JetStream
	URL    string // the URL clients (and child processes) use
	// Auth is the embedded server's generated credentials (nil: none).
	Auth *Auth
}

// Open starts the embedded server if opts.URL is "embedded" (or empty) and
// connects to it, or connects to the external NATS at opts.URL. Reconnects
// are automatic, never give up, and are logged.
func Open(ctx context.Context, opts Options, log zerolog.Logger) (*Bus, error) {
	b := &Bus{URL: opts.URL}
	if opts.URL == "" || opts.URL == Embedded {
		if opts.DataDir == "" {
			return nil, fmt.Errorf("%w: --nats embedded needs a data dir (set --data-dir)", ErrConnect)
		}
		so := ServerOptions{DataDir: filepath.Join(opts.DataDir, "nats"), Port: opts.Port, Host: opts.Host}
		switch opts.Auth {
		case "", AuthGenerated:
			a, err := LoadAuth(filepath.Join(opts.DataDir, AuthDirName))
			if err != nil {
				return nil, err
			}
			if err := a.ownsStore(opts.DataDir); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConnect, err)
			}
			so.Auth, b.Auth = a, a
			opts.userJWT, opts.userSeed = a.daemonJWT, a.daemonSeed
		case AuthNone:
		default:
			return nil, fmt.Errorf("%w: --nats-auth %q: use %s or %s", ErrConnect, opts.Auth, AuthGenerated, AuthNone)
		}
		srv, err := StartServer(ctx, so)
		if err != nil {
			return nil, err
		}
		b.Server, b.URL = srv, srv.ClientURL()
		log.Info().Str("url", b.URL).Str("store", filepath.Join(opts.DataDir, "nats")).Msg("embedded nats-server started")
	}
	nc, err := Connect(ctx, b.URL, opts, log)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.Conn = nc
	if b.JS, err = jetstream.New(nc); err != nil {
		b.Close()
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	return b, nil
}

// Close drains the connection and stops the embedded server, if any.
func (b *Bus) Close() {
	if b.Conn != nil {
		_ = b.Conn.Drain()
		for !b.Conn.IsClosed() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if b.Server != nil {
		b.Server.Shutdown()
	}
}

// Connect dials url with opts' credentials and TLS settings. The password
// and token fall back to $GITFLEET_NATS_PASSWORD and $GITFLEET_NATS_TOKEN.
func Connect(ctx context.Context, url string, opts Options, log zerolog.Logger) (*nats.Conn, error) {
	no, err := natsOptions(opts, log)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		no = append(no, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(url, no...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, url, err)
	}
	return nc, nil
}

func natsOptions(opts Options, log zerolog.Logger) ([]nats.Option, error) {
	wait := opts.ReconnectWait
	if wait == 0 {
		wait = 250 * time.Millisecond
	}
	name := opts.Name
	if name == "" {
		name = "gitfleet"
	}
	no := []nats.Option{}
	if opts.InboxPrefix != "" {
		no = append(no, nats.CustomInboxPrefix(opts.InboxPrefix))
	}
	no = append(no,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.ReconnectBufSize(64<<20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected; reconnecting")
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
	)
	password := opts.Password
	if password == "" {
		password = os.Getenv("GITFLEET_NATS_PASSWORD")
	}
	token := opts.Token
	if token == "" {
		token = os.Getenv("GITFLEET_NATS_TOKEN")
	}
	if opts.User != "" {
		no = append(no, nats.UserInfo(opts.User, password))
	}
	if token != "" {
		no = append(no, nats.Token(token))
	}
	if opts.NKeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("%w: --nats-nkey %s: %w", ErrConnect, opts.NKeySeed, err)
		}
		no = append(no, o)
	}
	if opts.userJWT != "" {
		no = append(no, nats.UserJWTAndSeed(opts.userJWT, string(opts.userSeed)))
	}
	if opts.CredsFile != "" {
		if _, err := os.Stat(opts.CredsFile); err != nil {
			return nil, fmt.Errorf("%w: --nats-creds: %w", ErrConnect, err)
		}
		no = append(no, nats.UserCredentials(opts.CredsFile))
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, fmt.Errorf("%w: --nats-tls-cert and --nats-tls-key go together", ErrConnect)
	}
	if opts.TLSCert != "" {
		no = append(no, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	if opts.TLSCA != "" {
		no = append(no, nats.RootCAs(opts.TLSCA))
	}
	return no, nil
}
