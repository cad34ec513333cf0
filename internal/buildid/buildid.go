// Package buildid names the running gitfleet build, for caches that must
// not outlive it: what one build computed and wrote down (a validation
// verdict, a status file's summary) is trusted only by the same build.
package buildid

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
)

// ID names this build: its module version, Go version and the executable's
// path, size and modification time, so a rebuilt binary — whose checks or
// formats may differ — trusts nothing an older one wrote. "" when the
// executable cannot be found: callers keep their cache in memory then.
var ID = sync.OnceValue(func() string {
	id := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		id = bi.Main.Path + "@" + bi.Main.Version + " " + bi.GoVersion
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	id += " " + exe + " " + strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
})
