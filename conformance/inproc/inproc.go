// Package inproc builds the conformance suite's in-process servers from
// package server: conformance.InProcess{Build: inproc.Build}. It is the
// only part of the suite that imports server; the suite's core
// (package conformance) runs against a binary or a URL as well, and
// `sluice conformance` and the suite's tests wire this in.
package inproc

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/conformance"
	"github.com/sluice-dev/sluice/server"
)

// Build builds one server of package server as `sluice serve` does
// before it listens: New, then LoadRestored (the state dir's models), then
// the startup config's models.
func Build(b conformance.Build) (conformance.Server, error) {
	s, err := server.New(config(b), server.Options{Logger: b.Log, CheckInvariants: b.CheckInvariants, Engines: b.Engines})
	if err != nil {
		return nil, err
	}
	if err := s.LoadRestored(context.Background()); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, fmt.Errorf("inproc: %w", err)
	}
	if b.Startup != nil {
		models, err := server.ParseModelsYAML(b.Startup)
		if err == nil {
			err = s.RegisterModels(context.Background(), models)
		}
		if err != nil {
			_ = s.Shutdown(context.Background())
			return nil, fmt.Errorf("inproc: startup models: %w", err)
		}
	}
	return s, nil
}

// config returns the server.Config of b's spec, listening on loopback, with
// the files the runner gave it.
func config(b conformance.Build) server.Config {
	sp := &b.Spec
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ModelsRoot, cfg.TraceFile, cfg.StateDir, cfg.SpoolDir = b.ModelsRoot, b.TraceFile, b.StateDir, b.SpoolDir
	cfg.ParallelJobs = boolOr(sp.ParallelJobs, true)
	cfg.UIManagement = boolOr(sp.UIManagement, true)
	cfg.Fixture = boolOr(sp.Fixture, true)
	cfg.APIKey, cfg.ManagementKey = sp.APIKey, sp.ManagementKey
	cfg.SignInLimit = sp.SignInLimit
	cfg.MaxLoadedModels = sp.MaxLoadedModels
	cfg.MemoryBudgetMB = sp.MemoryBudgetMB
	cfg.IdleTimeout = time.Duration(sp.IdleTimeoutMS) * time.Millisecond
	cfg.AdmissionTimeout = time.Duration(sp.AdmissionTimeoutMS) * time.Millisecond
	cfg.AdmissionCeiling = time.Duration(sp.AdmissionCeilingMS) * time.Millisecond
	cfg.SerializeColdLoads = sp.SerializeColdLoads
	switch {
	case sp.LoadBackoffMS > 0:
		cfg.LoadBackoff = time.Duration(sp.LoadBackoffMS) * time.Millisecond
	case sp.LoadBackoffMS < 0:
		cfg.LoadBackoff = 0
	}
	if sp.LoadBackoffMaxMS > 0 {
		cfg.LoadBackoffMax = time.Duration(sp.LoadBackoffMaxMS) * time.Millisecond
	}
	cfg.ShutdownTimeout = b.ShutdownTimeout
	if sp.MaxBody > 0 {
		cfg.MaxBody = sp.MaxBody
	}
	if sp.MaxModels != nil {
		cfg.MaxModels = *sp.MaxModels
	}
	cfg.AllowedHosts, cfg.AllowedOrigins = sp.AllowedHosts, sp.AllowedOrigins
	setMS := func(v int64, d *time.Duration) {
		if v > 0 {
			*d = time.Duration(v) * time.Millisecond
		}
	}
	setMS(sp.ReadHeaderTimeoutMS, &cfg.ReadHeaderTimeout)
	setMS(sp.IdleConnTimeoutMS, &cfg.IdleConnTimeout)
	setMS(sp.WriteTimeoutMS, &cfg.WriteTimeout)
	setMS(sp.RealtimeDrainMS, &cfg.RealtimeDrain)
	setMS(sp.RealtimeIdleMS, &cfg.RealtimeIdle)
	setMS(sp.BodyReadTimeoutMS, &cfg.BodyReadTimeout)
	setMS(sp.BodyRateGraceMS, &cfg.BodyRateGrace)
	for _, v := range []struct{ in, out *int64 }{{&sp.MinBodyRate, &cfg.MinBodyRate}, {&sp.MaxJSONBody, &cfg.MaxJSONBody},
		{&sp.SpoolThreshold, &cfg.SpoolThreshold}, {&sp.BodyBudget, &cfg.BodyBudget}, {&sp.SpoolBudget, &cfg.SpoolBudget}} {
		if *v.in > 0 {
			*v.out = *v.in
		}
	}
	if sp.MaxConns > 0 {
		cfg.MaxConns = sp.MaxConns
	}
	return cfg
}

// boolOr is *p, or def when p is nil (a spec's unset flag).
func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
