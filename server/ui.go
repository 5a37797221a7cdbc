package server

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/auth"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The dashboard (CONTRACT.md ui.*): plain HTML, CSS and JavaScript embedded in the
// binary, no build step. It reads GET /v1/ui/config, /v1/models,
// /v1/catalogue and the /v1/events stream, and with management enabled
// calls the management endpoints.

//go:embed ui/index.html ui/app.js ui/style.css
var uiFiles embed.FS

// uiFS is ui/ as the root of the dashboard's files.
var uiFS = func() fs.FS {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}()

// UIConfig is the answer of GET /v1/ui/config: what the dashboard may show.
type UIConfig struct {
	Management   bool `json:"management"`    // --ui-management: show the buttons
	ParallelJobs bool `json:"parallel_jobs"` // slot counts may be set
	Fixture      bool `json:"fixture"`
	MaxSlots     int  `json:"max_slots"`
	// CanManage says whether this request's key or session passes the
	// management check on the dashboard's management routes; when it does
	// not, ManagementNote says why (the buttons show disabled with it).
	CanManage      bool   `json:"can_manage"`
	ManagementNote string `json:"management_note,omitempty"`
	// Session is the scope of this request's dashboard session: "api",
	// "management", or "" (none: a Bearer key, or no key needed).
	Session string `json:"session"`
}

// handleUIConfig answers GET /v1/ui/config.
func (s *Server) handleUIConfig(w http.ResponseWriter, r *http.Request) error {
	c := UIConfig{Management: s.cfg.UIManagement, ParallelJobs: s.cfg.ParallelJobs, Fixture: s.cfg.Fixture, MaxSlots: core.MaxSlots}
	if s.cfg.UIManagement {
		c.CanManage, c.ManagementNote = s.auth.CanManage(r)
	}
	c.Session = auth.SessionScope(r)
	w.Header().Set("Cache-Control", "no-store")
	return httpapi.WriteJSON(w, c)
}

// uiHandler serves the embedded dashboard: / is index.html, /ui/NAME the
// other files.
func uiHandler() http.Handler {
	files := http.StripPrefix("/ui/", http.FileServerFS(uiFS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, uiFS, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
}
