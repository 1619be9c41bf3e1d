package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"rulevalidator/internal/tlserr"
	"rulevalidator/internal/tracing"
)

// failureKind says what to do about a failed attempt.
type failureKind int

const (
	// transient: try again after a wait.
	transient failureKind = iota
	// permanent: the same request will fail the same way.
	permanent
	// formatRefused: the server does not do the response_format asked for;
	// try a weaker one.
	formatRefused
	// logProbsRefused: the server does not give log-probabilities; ask
	// again without them.
	logProbsRefused
	// environment: this service's configuration is wrong (API key, model
	// name, TLS trust); no request will succeed until the operator fixes it,
	// so it is returned at once, for the caller to hold its work.
	environment
)

// Fault causes of environment failures.
const (
	CauseModelAuth        = "model_auth"
	CauseModelNotFound    = "model_not_found"
	CauseModelUnavailable = "model_unavailable"
	CauseTLS              = "tls"
)

// failure is one failed attempt, classified.
type failure struct {
	kind failureKind
	// status is the HTTP status, 0 when no response arrived.
	status int
	// reason says what happened, for errors and logs.
	reason string
	// retryAfter is the server's requested wait, when it sent one.
	retryAfter    time.Duration
	hasRetryAfter bool
	// cause is the error go-openai or the transport returned.
	cause error
	// fault names an environment failure's cause (CauseModelAuth, ...).
	fault string
	// queued says no request was sent: the call's context ended while it
	// waited for a slot under the concurrency limit.
	queued bool
}

// attemptRecord is what the HTTP layer saw of one attempt. Each attempt has
// its own record, carried in the request context, so concurrent calls share
// nothing.
type attemptRecord struct {
	sent   bool
	status int
	header http.Header
	// errorBody is the start of an error response's body, for what servers say beside the
	// fields go-openai keeps (llama.cpp's n_ctx).
	errorBody []byte
	extensions
	// contents are long message contents by the placeholder that stands for
	// them in the body (see spliceContents).
	contents map[string]string
}

// extensions are the llama.cpp fields go-openai has no place for, added to
// the body on the wire.
type extensions struct {
	// schemaHint, when set, is added to a json_object response_format as
	// "schema" (see Config.OmitSchemaHint).
	schemaHint json.RawMessage
	// grammar, when set, is sent as "grammar" (engine.FormatGrammar).
	grammar string
	// zeroTemperature sends "temperature": 0, which go-openai leaves out.
	zeroTemperature bool
}

type attemptKey struct{}

// recordingDoer notes whether a request went out and the status and headers
// of its response; go-openai's errors do not carry the headers (Retry-After).
// It sends the attempt's trace context in traceparent.
type recordingDoer struct{ next *http.Client }

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	rec, _ := req.Context().Value(attemptKey{}).(*attemptRecord)
	if rec != nil && (rec.schemaHint != nil || rec.grammar != "" || rec.zeroTemperature) {
		if err := addExtensions(req, rec.extensions); err != nil {
			return nil, err
		}
	}
	if rec != nil && len(rec.contents) > 0 {
		if err := spliceContents(req, rec.contents); err != nil {
			return nil, err
		}
	}
	releaseBody(req)
	tracing.InjectHTTP(req.Context(), req.Header) // the attempt's span
	resp, err := d.next.Do(req)
	if rec != nil {
		rec.sent = true
		if resp != nil {
			rec.status = resp.StatusCode
			rec.header = resp.Header.Clone()
			if resp.StatusCode >= http.StatusBadRequest {
				rec.errorBody = peekBody(resp)
			}
		}
	}
	return resp, err
}

// peekBody reads the start of resp's body and puts it back for go-openai to read.
func peekBody(resp *http.Response) []byte {
	const limit = 64 << 10
	head, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return head
}

// releaseBody makes the request let go of its body once the transport has
// sent it, instead of when the response arrives: a prompt holding a long
// document is megabytes of JSON, and a slow model would otherwise keep it in
// memory, per call in flight, for the whole wait. The body is not replayed
// (POST is not retried by the transport; a redirect of a chat completion is
// not followed).
func releaseBody(req *http.Request) {
	if req.Body == nil || req.Body == http.NoBody {
		return
	}
	req.Body = &sentBody{rc: req.Body}
	req.GetBody = nil
}

// sentBody drops the body it wraps at its end or when closed.
type sentBody struct {
	mu sync.Mutex
	rc io.ReadCloser
}

func (b *sentBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.rc.Close()
		b.rc = nil
	}
	return n, err
}

func (b *sentBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return nil
	}
	err := b.rc.Close()
	b.rc = nil
	return err
}

// addExtensions rewrites a chat request's body to carry ext: the schema in
// its json_object response_format, the grammar beside it. go-openai has no
// fields for these llama.cpp extensions, so they are added on the wire.
func addExtensions(req *http.Request, ext extensions) error {
	return rewriteBody(req, func(raw []byte) ([]byte, error) {
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil {
			return raw, nil // not the request it is meant for: sent as it is
		}
		if ext.schemaHint != nil {
			var rf map[string]json.RawMessage
			if err := json.Unmarshal(body["response_format"], &rf); err != nil || string(rf["type"]) != `"json_object"` {
				return raw, nil
			}
			rf["schema"] = ext.schemaHint
			var err error
			if body["response_format"], err = json.Marshal(rf); err != nil {
				return raw, nil
			}
		}
		if ext.grammar != "" {
			g, err := json.Marshal(ext.grammar)
			if err != nil {
				return raw, nil
			}
			body["grammar"] = g
		}
		if ext.zeroTemperature {
			body["temperature"] = json.RawMessage("0")
		}
		patched, err := json.Marshal(body)
		if err != nil {
			return raw, nil
		}
		return patched, nil
	})
}

// attemptInfo describes the attempt being classified.
type attemptInfo struct {
	model string
	// configuredModel says model is the one this service is configured
	// with, not one a request chose.
	configuredModel bool
	// withFormat says the request carried a response_format or a grammar.
	withFormat bool
	// grammar says it carried a grammar (engine.FormatGrammar).
	grammar bool
	// logProbs says it asked for log-probabilities.
	logProbs bool
	timeout  time.Duration
	// timedOut says the attempt's own deadline expired while the caller's
	// context is still live.
	timedOut bool
	now      time.Time
}

// classify turns the error of one attempt into a failure.
func classify(err error, rec *attemptRecord, a attemptInfo) *failure {
	f := &failure{kind: transient, status: rec.status, cause: err}
	if wait, ok := retryAfter(rec.header, a.now); ok {
		f.retryAfter, f.hasRetryAfter = wait, true
	}

	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode >= http.StatusBadRequest:
		f.status = apiErr.HTTPStatusCode
		classifyStatus(f, serverError{
			message: apiErr.Message,
			code:    fmt.Sprint(nonNil(apiErr.Code)),
			typ:     apiErr.Type,
			param:   deref(apiErr.Param),
			body:    string(rec.errorBody),
		}, a)
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode >= http.StatusBadRequest:
		// An error status with a body that is not an OpenAI error object,
		// e.g. a proxy's HTML page.
		f.status = reqErr.HTTPStatusCode
		classifyStatus(f, serverError{message: bodySnippet(reqErr.Body), body: string(reqErr.Body)}, a)
	case !rec.sent:
		// go-openai refused the request before sending it (e.g. a
		// parameter its model table says the model does not take).
		f.kind = permanent
		f.reason = "the request was refused before sending: " + err.Error()
	case a.timedOut:
		f.reason = fmt.Sprintf("no response within %s (attempt timeout)", a.timeout)
	case tlserr.IsSetup(err):
		f.kind, f.fault = environment, CauseTLS
		f.reason = "TLS with the server failed (a refused certificate, or no TLS at that address): " + err.Error()
	case rec.status != 0:
		// The status line arrived but the body could not be read or
		// decoded: a connection dropped mid-response or a garbled reply.
		f.reason = fmt.Sprintf("%s, then reading the response failed: %v", statusLine(rec.status), err)
	default:
		// No response at all: connection refused or reset, DNS, EOF.
		f.reason = err.Error()
	}
	return f
}

// serverError is the useful part of an error response.
type serverError struct {
	message, code, typ, param string
	// body is the response's body as far as it was kept, fields beyond OpenAI's included.
	body string
}

// classifyStatus fills in f for an HTTP error status.
//
// Rules, first match wins:
//   - a message or code about the context length (any status): permanent,
//     the input is too long for the model's context window;
//   - a 500 to a request with a response_format whose message names the
//     response_format parameter: formatRefused. llama-cpp-python's server
//     reports its request validation errors ("Input should be 'text' or
//     'json_object'" at body.response_format.type) as 500s; retrying
//     those would only repeat the refusal. So is a 500 naming the grammar
//     to a request that carried one;
//   - 408, 429 and 5xx other than 501 and 505: transient;
//   - 400 or 422 to a request with a response_format, pointing at it (param response_format,
//     or a message mentioning response_format, json_schema, json_object,
//     schema, grammar or structured output): formatRefused. A 400 that
//     says nothing about the format is a bad request, not a reason to
//     give up structured output for every later call;
//   - 401/403: the API key was refused, and a 404 for the configured model:
//     environment, the operator must fix the key or the model name;
//   - a 404 for a model the request chose, and any other 4xx: the request
//     was refused, permanent.
func classifyStatus(f *failure, se serverError, a attemptInfo) {
	status := f.status
	detail := ""
	if se.message != "" && !strings.EqualFold(se.message, http.StatusText(status)) {
		detail = ": " + se.message
	}
	switch {
	case isContextLength(se):
		f.kind = permanent
		f.reason = fmt.Sprintf("the input is too long for the model's context window (%d%s)", status, detail)
		f.cause = newContextLengthError(f.cause, se.message, se.body)
	case a.logProbs && status >= http.StatusBadRequest && status != http.StatusTooManyRequests && strings.Contains(strings.ToLower(se.message), "logprobs"):
		f.kind = logProbsRefused
		f.reason = fmt.Sprintf("the server refused log-probabilities (%d%s)", status, detail)
	case a.withFormat && status == http.StatusInternalServerError &&
		(strings.Contains(se.message, "response_format") || a.grammar && strings.Contains(strings.ToLower(se.message), "grammar")):
		f.kind = formatRefused
		f.reason = fmt.Sprintf("the server refused the response format (%d%s)", status, detail)
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests ||
		(status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported):
		f.kind = transient
		f.reason = statusLine(status) + detail
	case a.withFormat && (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity) && isFormatRefusal(se):
		f.kind = formatRefused
		f.reason = fmt.Sprintf("the server refused the response format (%d%s)", status, detail)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		f.kind, f.fault = environment, CauseModelAuth
		f.reason = fmt.Sprintf("the server refused the API key (%d%s); check the configured API key", status, detail)
	case status == http.StatusNotFound && a.configuredModel:
		f.kind, f.fault = environment, CauseModelNotFound
		f.reason = fmt.Sprintf("the configured model %q was not found (404%s); check the model name and the base URL", a.model, detail)
	case status == http.StatusNotFound:
		f.kind = permanent
		f.reason = fmt.Sprintf("model %q not found (404%s)", a.model, detail)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		f.kind = permanent
		f.reason = fmt.Sprintf("bad request (%d%s)", status, detail)
	default:
		f.kind = permanent
		f.reason = statusLine(status) + detail
	}
}

func isContextLength(se serverError) bool {
	if se.code == "context_length_exceeded" || strings.Contains(se.typ, "context") {
		return true
	}
	msg := strings.ToLower(se.message)
	for _, s := range []string{"context length", "maximum context", "context window", "context size", "context_length"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func isFormatRefusal(se serverError) bool {
	if se.param == "response_format" || strings.HasPrefix(se.param, "response_format.") {
		return true
	}
	msg := strings.ToLower(se.message)
	for _, s := range []string{"response_format", "response format", "json_schema", "json schema", "json_object", "schema", "grammar", "structured output"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// retryAfter reads the wait a server asked for: retry-after-ms (OpenAI,
// Azure) in milliseconds, else Retry-After in seconds or as an HTTP-date.
// A date in the past means no wait.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func statusLine(status int) string {
	if text := http.StatusText(status); text != "" {
		return fmt.Sprintf("%d %s", status, text)
	}
	return strconv.Itoa(status)
}

// bodySnippet shortens an error body for messages.
func bodySnippet(b []byte) string {
	const limit = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return s
}

func nonNil(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
