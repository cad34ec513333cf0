package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// Log lines carry RFC 3339 timestamps in UTC with milliseconds, so lines
// from several processes sort and a burst of events within a second keeps
// its order.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

func init() {
	zerolog.TimeFieldFormat = logTimeFormat
	// A duration with its unit ("330.156ms"), not a bare number of
	// milliseconds a reader must know to assume.
	zerolog.DurationFieldFormat = zerolog.DurationFormatString
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
}

// Log formats.
const (
	logFormatJSON = "json"
	logFormatText = "text"
)

// logOptions are --log-level and --log-format, shared by every
// long-running command (up, serve, worker, node) with the same defaults.
type logOptions struct {
	level  string
	format string
}

func (o *logOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.format, "log-format", "", "json or text (default: text on a terminal, json otherwise)")
}

// logger returns the logger the options describe, writing to w. Text is
// coloured only when w is a terminal. Workers, the reconciler and NATS
// callbacks log from many goroutines, so the writer is serialized: a
// bytes.Buffer (tests) or a pipe must not see interleaved writes.
func (o logOptions) logger(w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(o.level)
	if err != nil || o.level == "" {
		return zerolog.Nop(), &exitError{code: exitUsage, err: fmt.Errorf("--log-level %q: use debug, info, warn or error", o.level)}
	}
	tty := isTerminal(w)
	format := o.format
	if format == "" {
		format = logFormatJSON
		if tty {
			format = logFormatText
		}
	}
	out := zerolog.SyncWriter(w)
	switch format {
	case logFormatJSON:
	case logFormatText:
		out = zerolog.ConsoleWriter{Out: out, NoColor: !tty, TimeFormat: "15:04:05.000"}
	default:
		return zerolog.Nop(), &exitError{code: exitUsage, err: fmt.Errorf("--log-format %q: use json or text", o.format)}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
