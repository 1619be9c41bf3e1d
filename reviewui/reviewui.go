// Package reviewui is the review page: a reviewer's view, in the browser,
// of the validations waiting for a person (the queue), and of one
// validation, each rule beside the document page it cites with the cited
// passage highlighted, with a form to confirm or override a verdict.
//
// The pages are static shells from Go templates with embedded assets (one
// style sheet, one script, one icon; nothing from another host, no inline
// script or style, so a strict Content-Security-Policy holds). Everything they show
// comes from the public JSON API, called by the script with the bearer
// token the reviewer pasted on the sign-in page, kept in the browser's
// session storage: the API's verification and tenancy stay the only gate,
// and the server sees no token here. Untrusted text (documents,
// rationales, notes) is only ever inserted as text.
package reviewui

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Prefix is where the review page is served.
const Prefix = "/review/"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// securityHeaders are sent with every page and asset: a Content-Security-
// Policy that allows this origin's script, style, images (object URLs of
// page images fetched with the token) and API calls, and nothing inline.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
}

// Handler serves the review page under Prefix.
type Handler struct {
	pages  map[string]*template.Template
	static http.Handler
	log    *slog.Logger
}

// New parses the templates; logger may be nil.
func New(logger *slog.Logger) (*Handler, error) {
	if logger == nil {
		logger = slog.Default()
	}
	h := &Handler{pages: map[string]*template.Template{}, log: logger.With("component", "reviewui")}
	for _, page := range []string{"signin", "queue", "validation"} {
		t, err := template.ParseFS(templateFiles, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		h.pages[page] = t
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	return h, nil
}

// Register adds the review page's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("GET "+Prefix+"{$}", h.page("signin", nil))
	mux.Handle("GET "+Prefix+"queue", h.page("queue", nil))
	mux.Handle("GET "+Prefix+"validations/{request_id}", h.page("validation", func(r *http.Request) map[string]string {
		return map[string]string{"RequestID": r.PathValue("request_id")}
	}))
	mux.Handle("GET "+Prefix+"static/", secure(h.static))
	mux.Handle("GET /review", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
}

// page serves the template name with the data data gives.
func (h *Handler) page(name string, data func(*http.Request) map[string]string) http.Handler {
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d map[string]string
		if data != nil {
			d = data(r)
		}
		var buf bytes.Buffer
		if err := h.pages[name].ExecuteTemplate(&buf, "layout", d); err != nil {
			h.log.Error("reviewui: rendering a page", "page", name, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(buf.Bytes()))
	}))
}

func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		next.ServeHTTP(w, r)
	})
}
