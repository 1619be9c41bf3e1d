package objstore_test

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"rulevalidator/bucket"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
)

// Of writers racing to create one key exactly one wins; the others are told the object
// exists, and the stored object is the winner's.
func TestPutNewCreatesOnce(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	const key = "jobs/acme/once.json"
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = store.PutNew(ctx, key, []byte{byte('a' + i)}, "application/json", nil)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created %s", winner, i, key)
		case err == nil:
			winner = i
		case !errors.Is(err, bucket.ErrConditionFailed):
			t.Fatalf("writer %d: %v, want ErrConditionFailed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created the object")
	}
	got, err := store.GetBytes(ctx, key)
	if err != nil || string(got) != string(rune('a'+winner)) {
		t.Fatalf("stored %q (%v), want the winner's %q", got, err, string(rune('a'+winner)))
	}
	var op *objstore.OpError
	if _, err := store.PutNew(ctx, key, []byte("late"), "", nil); !errors.As(err, &op) || op.MessageFault() != true {
		t.Errorf("PutNew over an existing object: %v, want an OpError blaming the object", err)
	}
}

// PutIfMatch replaces only the version it was given; Delete removes, twice without error.
func TestPutIfMatchAndDelete(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	const key = "jobs/acme/cas.json"
	first, err := store.PutNew(ctx, key, []byte("v1"), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := store.PutIfMatch(ctx, key, first.ETag, []byte("v2"), "application/json", nil)
	if err != nil {
		t.Fatalf("PutIfMatch with the current ETag: %v", err)
	}
	if _, err := store.PutIfMatch(ctx, key, first.ETag, []byte("v3"), "application/json", nil); !errors.Is(err, bucket.ErrConditionFailed) {
		t.Fatalf("PutIfMatch with a stale ETag: %v, want ErrConditionFailed", err)
	}
	body, info, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(body)
	body.Close()
	if string(data) != "v2" || info.ETag != second.ETag {
		t.Errorf("stored %q with ETag %q, want v2 with %q", data, info.ETag, second.ETag)
	}
	for range 2 {
		if err := store.Delete(ctx, key); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := store.GetBytes(ctx, key); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("after Delete: %v, want ErrNotFound", err)
	}
	if _, err := store.PutIfMatch(ctx, key, second.ETag, []byte("v4"), "", nil); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("PutIfMatch on a deleted object: %v, want ErrNotFound", err)
	}
}

// An object replaced over and over while it is read, also between a read's request and its
// first byte, reads as one whole version, with its ETag, and never fails.
func TestGetBytesInfoReadsOneVersion(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	const key = "jobs/acme/busy.json"
	put := func(c byte) {
		if _, err := store.Put(ctx, key, bytes.Repeat([]byte{c}, 256<<10), "application/json", nil); err != nil {
			t.Error(err)
		}
	}
	put('a')
	// The writer stops before the test returns, whichever way it ends: a t.Error after
	// that would panic.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			put("ab"[i%2])
		}
	})
	for range 40 {
		data, info, err := store.GetBytesInfo(ctx, key)
		if err != nil {
			t.Fatalf("GetBytesInfo while the object is replaced: %v", err)
		}
		if len(data) != 256<<10 || bytes.Count(data, data[:1]) != len(data) || info.ETag == "" {
			t.Fatalf("read %d bytes mixing versions (ETag %q)", len(data), info.ETag)
		}
	}
}
