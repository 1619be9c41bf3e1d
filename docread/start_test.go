package docread

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// A reader waits for the PDF engine only as long as its context allows,
// and Close does not wait for an engine still compiling: a service that
// stops while the engine compiles stops at once, and the compile releases
// what it built.
func TestEngineStartDoesNotHoldReadersOrClose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome error // what the blocked compile returns once let go
	}{
		{"the compile succeeds after Close", nil},
		{"the compile fails after Close", errors.New("compile failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var closedEngines int
			r.startEngines = func(ctx context.Context, cfg Config) (*pdfEngines, error) {
				<-release
				if tc.outcome != nil {
					return nil, tc.outcome
				}
				return &pdfEngines{onClose: func() { closedEngines++ }}, nil
			}

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err = r.Read(ctx, Source{Name: "a.pdf", Data: []byte("%PDF-1.7\n%%EOF\n")})
			if !errors.Is(err, ErrEngineStarting) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Read while the engine compiles: %v, want ErrEngineStarting wrapping the deadline", err)
			}

			if err := r.Close(); err != nil {
				t.Fatalf("Close while the engine compiles: %v", err)
			}
			st := r.start
			close(release)
			<-st.done
			if st.engines != nil || st.err == nil {
				t.Errorf("the start after Close kept engines %v, err %v; want none and an error", st.engines, st.err)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.outcome == nil]; closedEngines != want {
				t.Errorf("engines closed %d times, want %d", closedEngines, want)
			}
			if err := r.Start(context.Background()); err == nil {
				t.Error("Start after Close succeeded")
			}
		})
	}
}

// A start that failed is tried again by the next read.
func TestEngineStartRetriesAfterAFailure(t *testing.T) {
	r, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	calls := 0
	r.startEngines = func(ctx context.Context, cfg Config) (*pdfEngines, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("out of memory")
		}
		return &pdfEngines{onClose: func() {}}, nil
	}
	if err := r.Start(context.Background()); err == nil {
		t.Fatal("the first start succeeded; the fake fails it")
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("the second start: %v", err)
	}
	if err := r.Start(context.Background()); err != nil || calls != 2 {
		t.Fatalf("a third Start: %v after %d compiles, want the engines of the second", err, calls)
	}
}
