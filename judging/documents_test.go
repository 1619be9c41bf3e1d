package judging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/registry"
	"rulevalidator/schemas"
)

// journal records, in order, what the fakes below were asked.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// fakeObjects holds claim-checked objects; stat, when set, is the size ClaimSize reports (an
// object replaced after the stat).
type fakeObjects struct {
	j       *journal
	data    []byte
	stat    int64
	statErr error
}

func (f *fakeObjects) ClaimSize(context.Context, string, string) (int64, error) {
	f.j.add("stat")
	if f.statErr != nil {
		return 0, f.statErr
	}
	size := int64(len(f.data))
	if f.stat != 0 {
		size = f.stat
	}
	return size, nil
}

func (f *fakeObjects) GetClaim(context.Context, string, string) ([]byte, error) {
	f.j.add("get")
	return f.data, nil
}

// recordingReserver stands in for the consumer's reservation of a message (Config.Reserve).
type recordingReserver struct {
	j    *journal
	err  error
	mu   sync.Mutex
	held int64
}

func (r *recordingReserver) Reserve(_ context.Context, n int64) (func(), error) {
	if r.err != nil {
		r.j.add("reserve %d refused", n)
		return nil, r.err
	}
	r.j.add("reserve %d", n)
	r.mu.Lock()
	r.held += n
	r.mu.Unlock()
	return func() {
		r.j.add("release %d", n)
		r.mu.Lock()
		r.held -= n
		r.mu.Unlock()
	}, nil
}

// TestClaimCheckedDocumentIsReserved: a claim-checked document's size is learned from a stat
// and its cost reserved in the bytes in flight before it is downloaded (a request's documents
// all at once), and given back when the request is let go of; one too large is refused from
// the stat, and storage down still holds.
func TestClaimCheckedDocumentIsReserved(t *testing.T) {
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	text := []byte("page one\fpage two, a little longer")
	n := int64(len(text))
	draining := errors.New("no room: the consumer is draining")
	for _, tc := range []struct {
		name       string
		objects    fakeObjects
		inline     bool
		mode       engine.EvidenceMode // "": cite, the default
		two        bool                // a second claim-checked document, of the same size
		reserveErr error
		wantReason string // "" = judged; "transient" = not permanent
		want       []string
	}{
		{name: "claim-checked", objects: fakeObjects{data: text},
			want: []string{"stat", fmt.Sprintf("reserve %d", 5*n), "get", fmt.Sprintf("reserve %d", n), fmt.Sprintf("release %d", 5*n), fmt.Sprintf("release %d", n)}},
		{name: "claim-checked, quote mode", objects: fakeObjects{data: text}, mode: engine.EvidenceQuote,
			want: []string{"stat", fmt.Sprintf("reserve %d", 7*n/2), "get", fmt.Sprintf("reserve %d", n), fmt.Sprintf("release %d", 7*n/2), fmt.Sprintf("release %d", n)}},
		{name: "two documents, reserved for in one wait", objects: fakeObjects{data: text}, two: true,
			want: []string{"stat", "stat", fmt.Sprintf("reserve %d", 10*n), "get", fmt.Sprintf("reserve %d", n), "get", fmt.Sprintf("reserve %d", n),
				fmt.Sprintf("release %d", 10*n), fmt.Sprintf("release %d", n), fmt.Sprintf("release %d", n)}},
		{name: "replaced after the stat by a larger object", objects: fakeObjects{data: text, stat: n - 4},
			want: []string{"stat", fmt.Sprintf("reserve %d", 5*(n-4)), "get", "reserve 20", fmt.Sprintf("reserve %d", n),
				fmt.Sprintf("release %d", 5*(n-4)), "release 20", fmt.Sprintf("release %d", n)}},
		{name: "over --document-max-bytes", objects: fakeObjects{data: make([]byte, 1000)},
			wantReason: string(schemas.ReasonUnreadableDocument), want: []string{"stat"}},
		{name: "storage down", objects: fakeObjects{statErr: s3Error("ServiceUnavailable", 503)},
			wantReason: "transient", want: []string{"stat"}},
		{name: "no room before the drain", objects: fakeObjects{data: text}, reserveErr: draining,
			wantReason: "transient", want: []string{"stat", fmt.Sprintf("reserve %d refused", 5*n)}},
		{name: "inline data is in the record; the file kept besides its text is reserved", inline: true,
			want: []string{fmt.Sprintf("reserve %d", n), fmt.Sprintf("release %d", n)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			objects := tc.objects
			objects.j = j
			reader, err := docread.New(docread.Config{MaxBytes: 500})
			if err != nil {
				t.Fatal(err)
			}
			reserver := &recordingReserver{j: j, err: tc.reserveErr}
			judge, err := New(Config{Engine: fakeEngine{res: passResult()}, Evidence: tc.mode, Rulesets: static, Objects: &objects, Documents: reader,
				Reserve: reserver.Reserve})
			if err != nil {
				t.Fatal(err)
			}
			doc := schemas.Document{Name: "a.txt", URI: ptr("s3://docs/a.txt"), ContentType: ptr("text/plain")}
			if tc.inline {
				doc.URI, doc.Data = nil, text
			}
			req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"},
				PrimaryDocs: []schemas.Document{doc}, SubmittedAt: time.Now()}
			if tc.two {
				req.AuxiliaryDocs = []schemas.Document{{Name: "b.txt", URI: ptr("s3://docs/b.txt"), ContentType: ptr("text/plain")}}
			}

			_, release, err := judge.Judge(context.Background(), req, time.Now())
			release()
			reason, permanent := MessageFault(err)
			switch tc.wantReason {
			case "":
				if err != nil {
					t.Fatalf("Judge = %v, want it judged", err)
				}
			case "transient":
				if err == nil || permanent {
					t.Fatalf("Judge = %v (permanent %v), want a transient error", err, permanent)
				}
			default:
				if reason != tc.wantReason {
					t.Fatalf("Judge = %v (reason %q), want reason %q", err, reason, tc.wantReason)
				}
			}
			if got := j.list(); !slices.Equal(got, tc.want) {
				t.Errorf("calls %q, want %q", got, tc.want)
			}
			if reserver.held != 0 {
				t.Errorf("%d bytes still reserved after Judge's release, want 0", reserver.held)
			}
		})
	}
}
