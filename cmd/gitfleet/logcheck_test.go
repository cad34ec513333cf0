package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// checkLogFile decodes every JSON line of a log file and fails the test on
// a key repeated within one object (jq and most log stores keep only one of
// them) and on a timestamp that is not RFC 3339 with milliseconds. It
// returns how many lines it checked.
func checkLogFile(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, bad := 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		n++
		if err := checkLogLine(line); err != nil {
			bad++
			if bad <= 5 {
				t.Errorf("%s: %v:\n%s", path, err, line)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d lines in all with errors", path, bad)
	}
	return n
}

func checkLogLine(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := noDuplicateKeys(dec, ""); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	ts, _ := m["time"].(string)
	if _, err := time.Parse(time.RFC3339, ts); err != nil || !strings.Contains(ts, ".") || len(ts) != len(logTimeFormat)-5 {
		return fmt.Errorf("time %q is not RFC 3339 in UTC with milliseconds", ts)
	}
	return nil
}

// noDuplicateKeys reads one JSON value from dec and reports the first key
// that appears twice in one object.
func noDuplicateKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q repeated", path+key)
			}
			seen[key] = true
			if err := noDuplicateKeys(dec, path+key+"."); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := noDuplicateKeys(dec, path); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

func TestLogCheckerFindsRepeatedKeys(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{`{"level":"info","time":"2026-05-01T10:00:00.123Z","message":"a"}`, ""},
		{`{"level":"info","time":"2026-05-01T10:00:00.123Z","message":"a","message":"b"}`, `key "message" repeated`},
		{`{"time":"2026-05-01T10:00:00.123Z","a":{"b":1,"b":2}}`, `key "a.b" repeated`},
		{`{"time":"2026-05-01T10:00:00Z","message":"a"}`, "milliseconds"},
	} {
		err := checkLogLine([]byte(tc.line))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v; want %q", tc.line, err, tc.want)
		}
	}
}

// The logger every long-running command uses: JSON by default when not on
// a terminal, RFC 3339 milliseconds, no colour in text written to a file,
// and a clear error for a bad flag.
func TestLogOptions(t *testing.T) {
	var buf bytes.Buffer
	log, err := logOptions{level: "info"}.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	log.Info().Str("k", "v").Msg("shown")
	if err := checkLogLine(bytes.TrimSpace(buf.Bytes())); err != nil || strings.Contains(buf.String(), "hidden") {
		t.Errorf("json log %q: %v", buf.String(), err)
	}
	buf.Reset()
	log, _ = logOptions{level: "debug", format: "text"}.logger(&buf)
	log.Debug().Str("k", "v").Msg("readable")
	if s := buf.String(); !strings.Contains(s, "readable") || !strings.Contains(s, "k=v") || strings.Contains(s, "\x1b[") {
		t.Errorf("text log to a buffer %q: want readable, no colour codes", s)
	}
	// A duration says its unit, in text and JSON alike ("took=330.156452"
	// was milliseconds, and nothing said so).
	for _, format := range []string{logFormatText, logFormatJSON} {
		buf.Reset()
		log, _ = logOptions{level: "info", format: format}.logger(&buf)
		log.Info().Dur("took", 330*time.Millisecond+156*time.Microsecond).Msg("task done")
		if s := buf.String(); !strings.Contains(s, "330.156ms") {
			t.Errorf("%s log %q: want the duration with its unit, 330.156ms", format, s)
		}
	}
	for _, o := range []logOptions{{level: "loud"}, {level: "info", format: "xml"}} {
		if _, err := o.logger(io.Discard); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
