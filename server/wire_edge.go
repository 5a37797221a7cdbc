package server

import (
	"log/slog"

	"github.com/sluice-dev/sluice/server/internal/auth"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// newEdge builds the serving edge (server/internal/edge: connections and
// their limit, body limits and upload spooling, Host and Origin checks)
// from cfg; its refusals go through httpapi.WriteError like every other answer.
func newEdge(cfg Config, log *slog.Logger) (*edge.Edge, error) {
	return edge.New(edge.Config{
		Listen: cfg.Listen, AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins,
		MaxConns: cfg.MaxConns, WriteTimeout: cfg.WriteTimeout,
		MaxBody: cfg.MaxBody, MaxJSONBody: cfg.MaxJSONBody,
		BodyReadTimeout: cfg.BodyReadTimeout, MinBodyRate: cfg.MinBodyRate, BodyRateGrace: cfg.BodyRateGrace,
		SpoolThreshold: cfg.SpoolThreshold, SpoolDir: cfg.SpoolDir,
		BodyBudget: cfg.BodyBudget, SpoolBudget: cfg.SpoolBudget,
		WriteError: httpapi.WriteError, Log: log,
	})
}

// RaiseFileLimit raises the process's soft RLIMIT_NOFILE to its hard limit
// (edge.conn-limit) and returns the soft limit in use afterwards.
func RaiseFileLimit() (uint64, error) { return edge.RaiseFileLimit() }

// APIKeyOnlyWarning is logged once at start when --api-key is set without
// --management-key (CONTRACT.md ui.api-key-only).
const APIKeyOnlyWarning = auth.APIKeyOnlyWarning

// DefaultSignInLimit is the default of Config.SignInLimit: failed sign-ins
// allowed a minute for the whole server (CONTRACT.md ui.sign-in-rate).
const DefaultSignInLimit = auth.DefaultSignInLimit

// newAuth builds the keys, dashboard sessions and route guards
// (server/internal/auth) from the configuration; refusals are written by
// httpapi.WriteError (auth decodes sign-in bodies like every JSON body,
// with edge.Decode).
func (s *Server) newAuth() *auth.Auth {
	c := s.cfg
	return auth.New(auth.Config{APIKey: c.APIKey, ManagementKey: c.ManagementKey, Management: c.UIManagement,
		SignInLimit: c.SignInLimit, WriteError: httpapi.WriteError, Log: s.log})
}
