package main

// Blank imports pin the design card's dependencies in go.mod while the
// packages that use them are being written. Remove once each is imported for real.
import (
	_ "cuelang.org/go/cue/cuecontext"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/rs/zerolog"
	_ "gopkg.in/yaml.v3"
	_ "sigs.k8s.io/kustomize/api/krusty"
)
