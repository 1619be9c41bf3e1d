// Package pdftest gives tests a PDF reader whose engine is compiled before the
// test's own clock starts.
//
// Compiling PDFium takes seconds on a warm machine and minutes on a cold one
// under the race detector, and every reader (in this process or in a service
// the test starts) compiles it unless the compiled code is in the cache
// directory. Tests that each start a reader at once on a cold cache compile it
// side by side and starve each other past their timeouts; Warm compiles it
// once, into the directory a service uses by default, and the rest load it.
package pdftest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"rulevalidator/docread"
)

// compileLimit bounds the one compile: minutes on a cold, loaded machine.
const compileLimit = 10 * time.Minute

var warm struct {
	once sync.Once
	err  error
}

// Warm returns once the compiled PDF engine is in docread.DefaultCacheDir,
// compiling it on the first call in this process.
func Warm(t testing.TB) {
	t.Helper()
	warm.once.Do(func() {
		r, err := start()
		if err == nil {
			err = r.Close()
		}
		warm.err = err
	})
	if warm.err != nil {
		t.Fatalf("pdftest: compiling the PDF engine: %v", warm.err)
	}
}

// Reader returns a reader as a service has it by default, its engine
// started; it is closed when the test ends.
func Reader(t testing.TB) *docread.Reader {
	t.Helper()
	Warm(t)
	r, err := start()
	if err != nil {
		t.Fatalf("pdftest: starting the PDF engine: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func start() (*docread.Reader, error) {
	r, err := docread.New(docread.Config{CacheDir: docread.DefaultCacheDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), compileLimit)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
