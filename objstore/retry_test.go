package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"rulevalidator/objstore"
)

// scriptedS3 answers each request with the next scripted reply and records what it got. It
// stands in for S3 only where a real server can't be made to fail on cue.
type scriptedS3 struct {
	mu      sync.Mutex
	replies []reply
	got     []string // "METHOD /path"
	bodies  [][]byte
}

type reply struct {
	status int
	code   string // S3 error code for an XML error body; empty for success
}

func (s *scriptedS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, r.Method+" "+r.URL.Path)
	s.bodies = append(s.bodies, body)
	next := reply{status: http.StatusInternalServerError, code: "InternalError"}
	if len(s.replies) > 0 {
		next, s.replies = s.replies[0], s.replies[1:]
	}
	s.mu.Unlock()

	if next.code == "" {
		w.Header().Set("ETag", `"etag-from-the-fake"`)
		w.WriteHeader(next.status)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(next.status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>scripted %s</Message><Resource>%s</Resource><RequestId>1</RequestId></Error>`,
		next.code, next.code, r.URL.Path)
}

func (s *scriptedS3) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// logRecorder collects the messages logged through it.
type logRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.messages = append(h.messages, r.Message)
	return nil
}

func (h *logRecorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.messages)
}

func TestPutRetriesTransientFailuresOnly(t *testing.T) {
	tests := []struct {
		name         string
		replies      []reply
		wantRequests int
		wantErr      string // empty: Put succeeds
		wantRetries  int    // warnings logged
	}{
		{name: "503 SlowDown then 200",
			replies:      []reply{{http.StatusServiceUnavailable, "SlowDown"}, {http.StatusOK, ""}},
			wantRequests: 2, wantRetries: 1},
		{name: "500 twice then 200",
			replies:      []reply{{http.StatusInternalServerError, "InternalError"}, {http.StatusBadGateway, "BadGateway"}, {http.StatusOK, ""}},
			wantRequests: 3, wantRetries: 2},
		{name: "429 then 200",
			replies:      []reply{{http.StatusTooManyRequests, "TooManyRequests"}, {http.StatusOK, ""}},
			wantRequests: 2, wantRetries: 1},
		{name: "AccessDenied fails fast",
			replies:      []reply{{http.StatusForbidden, "AccessDenied"}, {http.StatusOK, ""}},
			wantRequests: 1, wantErr: "AccessDenied, HTTP 403) (1 attempt)"},
		{name: "NoSuchBucket fails fast",
			replies:      []reply{{http.StatusNotFound, "NoSuchBucket"}, {http.StatusOK, ""}},
			wantRequests: 1, wantErr: "NoSuchBucket, HTTP 404) (1 attempt)"},
		{name: "InvalidArgument fails fast",
			replies:      []reply{{http.StatusBadRequest, "InvalidArgument"}, {http.StatusOK, ""}},
			wantRequests: 1, wantErr: "InvalidArgument, HTTP 400) (1 attempt)"},
		{name: "gives up after MaxAttempts",
			replies:      []reply{{503, "SlowDown"}, {503, "SlowDown"}, {503, "SlowDown"}, {503, "SlowDown"}, {http.StatusOK, ""}},
			wantRequests: 4, wantRetries: 3, wantErr: "SlowDown, HTTP 503) (4 attempts)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &scriptedS3{replies: tt.replies}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			logs := &logRecorder{}
			store, err := objstore.New(objstore.Config{
				Endpoint:    srv.URL,
				AccessKey:   "access",
				SecretKey:   "secret",
				Bucket:      "reports",
				MaxAttempts: 4,
				BaseDelay:   time.Millisecond,
				Logger:      slog.New(logs),
			})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			body := []byte("report bytes")
			info, err := store.Put(context.Background(), "acme/42/r.xlsx", body, "application/octet-stream", nil)

			got := fake.requests()
			if len(got) != tt.wantRequests {
				t.Errorf("server saw %d requests %v, want %d", len(got), got, tt.wantRequests)
			}
			for i, req := range got {
				if req != "PUT /reports/acme/42/r.xlsx" {
					t.Errorf("request %d = %q, want PUT /reports/acme/42/r.xlsx", i+1, req)
				}
				// minio-go signs the body in aws-chunked encoding, so the payload sits inside chunk framing.
				if !bytes.Contains(fake.bodies[i], body) {
					t.Errorf("request %d sent body %q, want it to carry %q (a retry must resend the whole body)", i+1, fake.bodies[i], body)
				}
			}
			if n := logs.count(); n != tt.wantRetries {
				t.Errorf("logged %d retry warnings, want %d", n, tt.wantRetries)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				if info.ETag != "etag-from-the-fake" || info.URI != "s3://reports/acme/42/r.xlsx" || info.Size != int64(len(body)) {
					t.Fatalf("Put = %+v, want the fake's ETag, s3://reports/acme/42/r.xlsx and size %d", info, len(body))
				}
				return
			}
			if err == nil {
				t.Fatalf("Put succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			}
			var opErr *objstore.OpError
			if !errors.As(err, &opErr) || opErr.Attempts != tt.wantRequests {
				t.Fatalf("error %#v, want an *OpError with Attempts %d", err, tt.wantRequests)
			}
			var resp minio.ErrorResponse
			if !errors.As(err, &resp) || resp.Code != tt.replies[0].code {
				t.Fatalf("error %v does not wrap the server's %s response", err, tt.replies[0].code)
			}
		})
	}
}

func TestPutStopsRetryingWhenContextEnds(t *testing.T) {
	fake := &scriptedS3{} // every reply is a 500
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	store, err := objstore.New(objstore.Config{
		Endpoint: srv.URL, AccessKey: "a", SecretKey: "s", Bucket: "reports",
		MaxAttempts: 100, BaseDelay: time.Hour,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = store.Put(ctx, "k", []byte("x"), "", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put error %v, want one wrapping context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Put returned after %s, want soon after the 200ms deadline", waited)
	}
	if n := len(fake.requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1 (the second attempt waits an hour)", n)
	}
}

func TestPutRefusesBadInputWithoutARequest(t *testing.T) {
	fake := &scriptedS3{replies: []reply{{http.StatusOK, ""}}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	store, err := objstore.New(objstore.Config{Endpoint: srv.URL, AccessKey: "a", SecretKey: "s", Bucket: "reports"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tests := []struct {
		name    string
		key     string
		meta    map[string]string
		wantErr string
	}{
		{name: "traversal", key: "acme/../globex/r.xlsx", wantErr: `segment 2: ".." is not allowed`},
		{name: "empty key", key: "", wantErr: "key is empty"},
		{name: "metadata key with space", key: "k", meta: map[string]string{"tenant id": "x"}, wantErr: `metadata key "tenant id"`},
		{name: "metadata value with newline", key: "k", meta: map[string]string{"tenant": "a\r\nX-Evil: 1"}, wantErr: `metadata "tenant": control character at byte 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Put(context.Background(), tt.key, []byte("x"), "text/plain", tt.meta)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Put error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if got := fake.requests(); len(got) != 0 {
		t.Fatalf("server saw requests %v, want none", got)
	}
}
