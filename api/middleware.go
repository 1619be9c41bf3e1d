package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"
)

// statusWriter remembers the response's status: whether it has started, so
// that a recovered panic only writes an error when nothing was sent yet, and
// which status the request's span reports.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// securityHeaders are set on every response. The API serves JSON and file
// downloads only: nothing may be framed, sniffed, scripted or cached.
var securityHeaders = map[string]string{
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Content-Security-Policy":      "default-src 'none'; frame-ancestors 'none'",
	"Referrer-Policy":              "no-referrer",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Strict-Transport-Security":    "max-age=63072000",
	"Cache-Control":                "no-store",
}

// base wraps a whole handler tree: security headers, recovery from panics
// (logged with the stack, answered 500 when nothing was sent yet), the body
// size limit, and refusal of paths that are not clean (404, where ServeMux
// would redirect: a redirect would take a request to a route it did not name).
func base(h http.Handler, maxBody int64, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // net/http's way to abort a response: let it through
				panic(v)
			}
			log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if sw.status == 0 {
				writeError(sw, http.StatusInternalServerError, CodeInternal, "internal error")
			}
		}()
		if r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, maxBody)
		}
		// ServeMux matches on the escaped path: "..%2F" stays inside one
		// segment and reaches the handler, which checks the value.
		if !cleanPath(r.URL.EscapedPath()) {
			writeError(sw, http.StatusNotFound, CodeNotFound, "no such route")
			return
		}
		h.ServeHTTP(sw, r)
	})
}

// cleanPath reports whether p is absolute and already in path.Clean's form
// (no "//", "." or ".." segments), trailing slash aside.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// withTimeout bounds the request's context.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// discardWriter records the status and headers a handler sets, and drops
// the body: it runs ServeMux's own not-found and method-not-allowed
// handlers, whose plain-text answers are replaced by JSON ones.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

// router answers unmatched requests in JSON: 405 with Allow when the path
// exists for other methods, 404 otherwise.
type router struct {
	mux       *http.ServeMux
	unmatched http.Handler
}

func newRouter(mux *http.ServeMux, instrument func(string, http.Handler) http.Handler) *router {
	rt := &router{mux: mux}
	rt.unmatched = instrument("unmatched", http.HandlerFunc(rt.answerUnmatched))
	return rt
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := rt.mux.Handler(r); pattern == "" {
		rt.unmatched.ServeHTTP(w, r)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

func (rt *router) answerUnmatched(w http.ResponseWriter, r *http.Request) {
	h, _ := rt.mux.Handler(r)
	probe := &discardWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, probe.header.Get("Allow")))
		return
	}
	writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
}

// isTimeout reports whether err is the request's deadline or cancellation.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
