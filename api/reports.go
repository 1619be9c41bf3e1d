package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/bucket"
	"rulevalidator/objstore"
	"rulevalidator/report"
)

// ErrReportNotFound is what a ReportSource returns, wrapped, for a report
// that does not exist for the tenant asking (missing, another tenant's, or
// an id that cannot name one). errors.Is(err, bucket.ErrNotFound) is
// accepted too.
var ErrReportNotFound = errors.New("report not found")

// ReportInfo describes a report about to be streamed.
type ReportInfo struct {
	FileName    string
	ContentType string
	// Size is the length in bytes; negative when unknown.
	Size int64
}

// ReportSource opens a tenant's report by reference id.
type ReportSource interface {
	Open(ctx context.Context, tenant, referenceID string) (io.ReadCloser, ReportInfo, error)
}

// StoredReports is the ReportSource of reports a report.Writer stored in
// object storage under Prefix.
type StoredReports struct {
	Store  report.Getter
	Prefix string
}

// Open finds the report with report.Open, which checks the id and the
// tenant recorded with the object.
func (s StoredReports) Open(ctx context.Context, tenant, referenceID string) (io.ReadCloser, ReportInfo, error) {
	prefix := s.Prefix
	if prefix == "" {
		prefix = report.DefaultPrefix
	}
	if _, err := report.KeyFor(prefix, tenant, referenceID); err != nil {
		// No report is ever stored under an id or tenant without a key.
		return nil, ReportInfo{}, fmt.Errorf("%w: %w", ErrReportNotFound, err)
	}
	body, stored, err := report.Open(ctx, s.Store, prefix, tenant, referenceID)
	if err != nil {
		if errors.Is(err, bucket.ErrNotFound) {
			return nil, ReportInfo{}, fmt.Errorf("%w: %w", ErrReportNotFound, err)
		}
		return nil, ReportInfo{}, err
	}
	return body, ReportInfo{FileName: stored.FileName, ContentType: stored.ContentType, Size: stored.Size}, nil
}

// getReport serves a report to its own tenant, as named by the token.
func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	s.serveReport(w, r, p.Tenant, r.PathValue("reference_id"))
}

// getInternalReport serves any tenant's report to internal callers, the
// tenant given by the tenant_id query parameter.
func (s *Server) getInternalReport(w http.ResponseWriter, r *http.Request) {
	tenant, ok := s.internalTenant(w, r)
	if !ok {
		return
	}
	s.serveReport(w, r, tenant, r.PathValue("reference_id"))
}

// serveReport streams a report. A reference id that report.NewReferenceID
// could not have made, a missing report and another tenant's report are all
// answered the same 404, byte for byte, so that ids cannot be probed.
func (s *Server) serveReport(w http.ResponseWriter, r *http.Request, tenant, referenceID string) {
	if s.cfg.Reports == nil || !report.ValidReferenceID(referenceID) {
		writeError(w, http.StatusNotFound, CodeNotFound, msgReportNotFound)
		return
	}
	body, info, err := s.cfg.Reports.Open(r.Context(), tenant, referenceID)
	switch {
	case err == nil:
	case errors.Is(err, ErrReportNotFound), errors.Is(err, bucket.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, msgReportNotFound)
		return
	case isTimeout(err), objstore.Temporary(err):
		s.log.Warn("api: report storage unavailable", "tenant_id", tenant, "reference_id", referenceID, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "report storage is unavailable; try again shortly")
		return
	default:
		s.log.Error("api: opening report", "tenant_id", tenant, "reference_id", referenceID, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
		return
	}
	defer body.Close()

	h := w.Header()
	contentType := info.ContentType
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Disposition", contentDisposition(info.FileName))
	h.Set("Cache-Control", "private, no-store")
	if info.Size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if n, err := io.Copy(w, body); err != nil {
		// Too late for an error status: the client sees a short body.
		s.log.Warn("api: report download cut short", "tenant_id", tenant, "reference_id", referenceID, "bytes", n, "err", err)
	}
}

// contentDisposition is an RFC 6266 attachment header: an ASCII filename
// for old clients and the exact name, percent-encoded, in filename*.
func contentDisposition(name string) string {
	name = sanitizeFileName(name)
	var ascii strings.Builder
	for _, c := range name {
		switch {
		case c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '%' || c == ';':
			ascii.WriteByte('_')
		default:
			ascii.WriteRune(c)
		}
	}
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii.String(), encodeRFC5987(name))
}

// sanitizeFileName keeps the last path element of name, without control
// characters, and falls back to report.xlsx when nothing usable is left.
func sanitizeFileName(name string) string {
	name = strings.ToValidUTF8(name, "")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if name == "" {
		return report.ObjectName
	}
	const maxNameBytes = 200
	for len(name) > maxNameBytes {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// encodeRFC5987 percent-encodes everything but RFC 5987's attr-char.
func encodeRFC5987(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
