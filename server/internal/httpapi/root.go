package httpapi

import (
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"
)

// Root serves mux under one context node made before it: the request
// state RequestIDs fills (WithRequestState) and the router's route
// context, taken from a pool as chi takes it. chi finds its context there
// and adds none, and RequestIDs fills the state in place: the request is
// copied once per request instead of twice.
func Root(mux *chi.Mux) http.Handler {
	return &root{mux: mux, pool: sync.Pool{New: func() any { return chi.NewRouteContext() }}}
}

type root struct {
	mux  *chi.Mux
	pool sync.Pool
}

func (h *root) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rctx := h.pool.Get().(*chi.Context)
	rctx.Reset()
	rctx.Routes = h.mux
	h.mux.ServeHTTP(w, r.WithContext(WithRequestState(r.Context(), chi.RouteCtxKey, rctx)))
	h.pool.Put(rctx)
}
