package api

import (
	"net/http"
	"testing"

	"rulevalidator/internal/s3test"
	"rulevalidator/jobs"
	"rulevalidator/objstore"
)

// objectStore is a job store on a bucket of its own on the test S3 server.
func objectStore(t *testing.T) (*jobs.ObjectStore, *objstore.Store) {
	t.Helper()
	store := s3test.Store(t)
	js, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return js, store
}

// TestJobsInObjectStorageAcrossServers: servers sharing stored jobs answer the same
// job, whichever accepted it; a request id re-posted to another server
// queues nothing; a new server (a restart) answers the finished job.
func TestJobsInObjectStorageAcrossServers(t *testing.T) {
	shared, store := objectStore(t)
	other, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The serve pipeline stores results with a job store of its own.
	results, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	runner := newStandIn(t, results)
	runner.gate = make(chan struct{})
	id := newIdentity(t)
	_, a := serve(t, Config{Verifier: id.verifier, Submitter: runner, Jobs: shared})
	_, b := serve(t, Config{Verifier: id.verifier, Submitter: runner, Jobs: other})
	acme := id.token(t, "acme")

	posted := call(t, http.MethodPost, a.URL+"/v1/validations", acme, validationBody("req-s1"))
	if posted.status != http.StatusAccepted {
		t.Fatalf("POST on A: %s", posted)
	}
	onB := call(t, http.MethodGet, b.URL+"/v1/validations/req-s1", acme, nil)
	if j := decodeJob(t, onB); onB.status != http.StatusOK || j.Status != "pending" || *j.SubmittedAt != *decodeJob(t, posted).SubmittedAt {
		t.Fatalf("GET on B before the result: %s", onB)
	}
	if r := call(t, http.MethodGet, b.URL+"/v1/validations/req-s1", id.token(t, "globex"), nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant's GET on B: %s, want 404", r)
	}
	if r := call(t, http.MethodPost, b.URL+"/v1/validations", acme, validationBody("req-s1")); r.status != http.StatusAccepted || *decodeJob(t, r).SubmittedAt != *decodeJob(t, posted).SubmittedAt {
		t.Errorf("POST of the same id on B: %s, want 202 with A's job", r)
	}
	close(runner.gate)
	done := pollDone(t, b.URL+"/v1/validations/req-s1", acme)
	if done.Status != "completed" || done.Result == nil || len(done.Result.Verdicts) != 2 {
		t.Fatalf("job on B: %+v", done)
	}
	if n := len(runner.requests()); n != 1 {
		t.Errorf("the request was submitted %d times, want once", n)
	}

	restarted, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Config{Verifier: id.verifier, Submitter: runner, Jobs: restarted})
	again := call(t, http.MethodGet, c.URL+"/v1/validations/req-s1", acme, nil)
	fromB := call(t, http.MethodGet, b.URL+"/v1/validations/req-s1", acme, nil)
	if again.status != http.StatusOK || string(again.body) != string(fromB.body) {
		t.Errorf("after a restart: %s\nwant B's answer: %s", again, fromB)
	}
}

// TestJobStorageUnavailable: with job storage refusing, POST and GET answer
// 503 with Retry-After, and nothing runs.
func TestJobStorageUnavailable(t *testing.T) {
	endpoint, access, secret := s3test.Endpoint(t)
	store, err := objstore.New(objstore.Config{Endpoint: endpoint, AccessKey: access, SecretKey: secret + "-wrong", Bucket: s3test.UniqueBucket(t), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	refusing, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Jobs: refusing})
	acme := id.token(t, "acme")
	for _, r := range []response{
		call(t, http.MethodPost, ts.URL+"/v1/validations", acme, validationBody("req-u")),
		call(t, http.MethodGet, ts.URL+"/v1/validations/req-u", acme, nil),
	} {
		if r.status != http.StatusServiceUnavailable || r.errorCode() != CodeUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("%s, want 503 unavailable with Retry-After", r)
		}
	}
	if n := len(runner.requests()); n != 0 {
		t.Errorf("%d requests submitted with job storage down, want 0", n)
	}
}
