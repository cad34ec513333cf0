package natstest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// LegacyWorkerCreds writes in authDir (a daemon's DATA-DIR/nats-auth, its
// keys made) the worker.creds an earlier version wrote there: one user
// every worker shared, signed by the account's own key, allowed to publish
// events and inventories in any worker's name. It returns the file's
// content and the user's claims, for a test to keep a copy as a worker
// host would and to check the user is revoked.
func LegacyWorkerCreds(tb testing.TB, authDir string) ([]byte, *jwt.UserClaims) {
	tb.Helper()
	seed, err := os.ReadFile(filepath.Join(authDir, "account.nk"))
	if err != nil {
		tb.Fatal(err)
	}
	account, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		tb.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	upub, _ := user.PublicKey()
	useed, _ := user.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "gitfleet-worker"
	uc.Pub.Allow.Add(wire.SubjectEvents+".>", wire.SubjectInventory+".>")
	uc.Sub.Allow.Add("_INBOX.>")
	j, err := uc.Encode(account)
	if err != nil {
		tb.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(j, useed)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(authDir, natsbus.LegacyWorkerCredsFile), creds, 0o600); err != nil {
		tb.Fatal(err)
	}
	return creds, uc
}
