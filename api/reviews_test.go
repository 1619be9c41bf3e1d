package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/segmentio/kafka-go"
	"github.com/xuri/excelize/v2"

	"rulevalidator/engine"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/s3test"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/report"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// reviewRuleset has two boolean rules and a numerical one.
const reviewRuleset = `{"id": "contract-check", "review_below_confidence": 0.8, "rules": [
	{"rule_id": "signed", "rule_text": "Is the contract signed?"},
	{"rule_id": "insured", "rule_text": "Is the supplier insured?"},
	{"rule_id": "clarity", "type": "numerical", "rule_text": "How clear is it?", "numerical_rule_config": {"possible_scores": [0, 2, 4]}},
	{"rule_id": "term", "rule_text": "Is the term under three years?"}]}`

// judged is what the serve pipeline stores for a request on reviewRuleset:
// verdicts with confidences, routed as the engine routes them. It stands
// for the scripted model's log-probabilities.
func judged(t *testing.T, tenant, requestID string, confidences map[string]*float64) (*schemas.Request, judging.Events) {
	t.Helper()
	rs, err := engine.ParseRuleset([]byte(reviewRuleset))
	if err != nil {
		t.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.txt", Pages: []string{"Signed on 1 March 2025. The supplier holds liability insurance.", "The term is two years."}}}}
	pass := true
	res := &engine.Result{RulesetID: rs.ID, Model: "scripted"}
	for _, rule := range rs.Rules {
		v := engine.Verdict{RuleID: rule.RuleID, Type: rule.Type, DataSufficiency: true, Rationale: "Scripted.", Confidence: confidences[rule.RuleID],
			Evidences: []verdict.Evidence{{Text: "Signed on 1 March 2025.", SourceOrigin: "contract.txt", SourcePageNumber: 1, CitedPageNumber: 1, PassageID: "d1p1s1", Anchored: true, Match: verdict.MatchPassage}}}
		if rule.Type == verdict.Numerical {
			v.NumericalOutput = new(4)
		} else {
			v.BooleanOutput = &pass
		}
		if rule.RuleID == "term" {
			v.Problems = []string{"the model gave no rationale"}
		}
		v.ReviewReasons = engine.RouteReview(v, rule, engine.ReviewThreshold(rs, rule, 0))
		v.NeedsReview = len(v.ReviewReasons) > 0
		res.Rules = append(res.Rules, v)
	}
	res.Aggregate = engine.AggregateVerdicts(rs, res.Rules)
	inline := reviewRuleset
	req := &schemas.Request{RequestID: requestID, TenantID: tenant, InlineRuleset: &inline, SubmittedAt: time.Now().UTC()}
	start := time.Now().Add(-time.Minute)
	return req, judging.Events{
		Verdicts: judging.NewVerdictEvents(req, rs, res, "", start, start.Add(time.Second)),
		Summary:  judging.NewSummary(req, rs, res, "", nil, start, start.Add(time.Second)),
		Material: in,
	}
}

type queueResponse struct {
	Items []struct {
		RequestID  string   `json:"request_id"`
		RuleID     string   `json:"rule_id"`
		RulesetID  string   `json:"ruleset_id"`
		Verdict    string   `json:"verdict"`
		Confidence *float64 `json:"confidence"`
		AgeSeconds int64    `json:"age_seconds"`
	} `json:"items"`
	Next *string `json:"next"`
}

func (q queueResponse) ids() string {
	var out []string
	for _, it := range q.Items {
		out = append(out, it.RequestID+"/"+it.RuleID)
	}
	return strings.Join(out, " ")
}

// TestReviewsEndToEnd, on the real broker and S3: the queue in confidence
// order; a review stored once when posted twice, and published again, with
// the same event id; the same id with another review refused, unpublished; a score outside the rule's set refused,
// naming the rule and the allowed scores; an unknown passage refused;
// another tenant refused as a missing validation; the status with the
// review, its history and the final outcome, and the final aggregates
// recomputed beside the model's.
func TestReviewsEndToEnd(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "reviews")
	kafkatest.CreateTopic(t, broker, topic, 1)
	store := s3test.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{Topics: map[string]string{topic: schemas.ReviewSchema}})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := producer.NewReviewWriter(ctx, producer.ReviewWriterConfig{Client: testClient(t, broker), Topic: topic}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })
	jobStore, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reviewStore, err := reviews.NewObjectStore(store, reviews.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	results := reviews.ResultStore{Results: jobStore, Reviews: reviewStore}
	conf := func(signed, insured, clarity float64) map[string]*float64 {
		return map[string]*float64{"signed": &signed, "insured": &insured, "clarity": &clarity}
	}
	for _, j := range []struct {
		id          string
		confidences map[string]*float64
	}{{"req-r1", conf(0.95, 0.3, 0.5)}, {"req-r2", conf(0.1, 0.9, 0.99)}} {
		req, out := judged(t, "acme", j.id, j.confidences)
		if err := results.StoreResult(ctx, req, out); err != nil {
			t.Fatal(err)
		}
	}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: reviewStore, ReviewPublisher: writer})
	acme, globex := id.token(t, "acme"), id.token(t, "globex")

	// The queue: least confident first, verdicts without a confidence last.
	getQueue := func(query, token string) queueResponse {
		t.Helper()
		r := call(t, http.MethodGet, ts.URL+"/v1/reviews?"+query, token, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/reviews?%s: %s", query, r)
		}
		var q queueResponse
		if err := json.Unmarshal(r.body, &q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := getQueue("status=pending", acme)
	if got := q.ids(); got != "req-r2/signed req-r1/insured req-r1/clarity req-r1/term req-r2/term" || q.Next != nil {
		t.Fatalf("queue = %q (next %v)", got, q.Next)
	}
	if it := q.Items[0]; it.Confidence == nil || *it.Confidence != 0.1 || it.RulesetID != "contract-check" || it.Verdict != "pass" || it.AgeSeconds < 59 {
		t.Errorf("first item = %+v", it)
	}
	first := getQueue("status=pending&limit=2", acme)
	if first.ids() != "req-r2/signed req-r1/insured" || first.Next == nil {
		t.Fatalf("first page = %q", first.ids())
	}
	if rest := getQueue("status=pending&limit=2&cursor="+*first.Next, acme); rest.ids() != "req-r1/clarity req-r1/term" {
		t.Errorf("second page = %q", rest.ids())
	}
	if f := getQueue("rule_id=term", acme); f.ids() != "req-r1/term req-r2/term" {
		t.Errorf("filtered by rule = %q", f.ids())
	}
	if other := getQueue("status=pending", globex); len(other.Items) != 0 {
		t.Errorf("another tenant's queue: %q", other.ids())
	}

	post := func(token, requestID, body string) response {
		t.Helper()
		return call(t, http.MethodPost, ts.URL+"/v1/validations/"+requestID+"/reviews", token, []byte(body))
	}
	override := `{"review_id": "rv-1", "rule_id": "insured", "decision": "override", "boolean_output": false,
		"note": "The certificate expired in 2024.", "passage_ids": ["d1p2s1"]}`
	created := post(acme, "req-r1", override)
	if created.status != http.StatusCreated {
		t.Fatalf("POST review: %s", created)
	}
	var stored reviews.Review
	if err := json.Unmarshal(created.body, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Reviewer != "user-of-acme" || stored.ReviewedAt.IsZero() || *stored.BooleanOutput || stored.ModelVerdict.Outcome != engine.OutcomePass {
		t.Errorf("stored review = %+v", stored)
	}
	again := post(acme, "req-r1", override)
	if again.status != http.StatusOK || string(again.body) != string(created.body) {
		t.Errorf("POST again: %s\nwant 200 with %s", again, created.body)
	}

	for _, tc := range []struct {
		name, token, requestID, body string
		status                       int
		want                         string
	}{
		{"the same id, another review", acme, "req-r1", strings.Replace(override, "expired", "lapsed", 1), http.StatusConflict, `review_id "rv-1" is taken`},
		{"a score outside the rule's set", acme, "req-r1", `{"review_id": "rv-2", "rule_id": "clarity", "decision": "override", "numerical_output": 3}`,
			http.StatusBadRequest, `numerical_output: 3 is not an allowed score of rule "clarity" (allowed: 0, 2, 4)`},
		{"a passage not in the material", acme, "req-r1", `{"review_id": "rv-3", "rule_id": "signed", "decision": "confirm", "passage_ids": ["d9p1s1"]}`,
			http.StatusBadRequest, `passage_ids[0]: "d9p1s1" is not a passage`},
		{"an unknown field", acme, "req-r1", `{"review_id": "rv-4", "rule_id": "signed", "decision": "confirm", "verdict": true}`,
			http.StatusBadRequest, `unknown field "verdict"`},
		{"a wrong type", acme, "req-r1", `{"review_id": "rv-5", "rule_id": "signed", "decision": "override", "boolean_output": "no"}`,
			http.StatusBadRequest, `boolean_output: must be`},
		{"an unknown rule", acme, "req-r1", `{"review_id": "rv-6", "rule_id": "nope", "decision": "confirm"}`,
			http.StatusBadRequest, `rule_id: validation "req-r1" has no rule "nope"`},
		{"another tenant", globex, "req-r1", `{"review_id": "rv-7", "rule_id": "signed", "decision": "confirm"}`, http.StatusNotFound, msgValidationNotFound},
		{"a missing validation", acme, "req-none", `{"review_id": "rv-8", "rule_id": "signed", "decision": "confirm"}`, http.StatusNotFound, msgValidationNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.token, tc.requestID, tc.body)
			if r.status != tc.status || !strings.Contains(r.errorMessage(), tc.want) {
				t.Errorf("POST: %s\nwant %d with %q", r, tc.status, tc.want)
			}
		})
	}

	// The reviews topic holds the review, keyed by request and rule, once
	// per post that stored or found it: the same event id twice, which
	// consumers de-duplicate on; the refused reviews are not there.
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	t.Cleanup(func() { _ = reader.Close() })
	msg, err := reader.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("reading the reviews topic: %v", err)
	}
	headers := map[string]string{}
	var schemaHeaders []schemas.Header
	for _, h := range msg.Headers {
		headers[h.Key] = string(h.Value)
		schemaHeaders = append(schemaHeaders, schemas.Header{Key: h.Key, Value: h.Value})
	}
	if string(msg.Key) != "req-r1/insured" || headers[producer.HeaderCEID] != "acme/req-r1/insured/rv-1" ||
		headers[producer.HeaderCEType] != schemas.ReviewSchema || headers[producer.HeaderTenant] != "acme" || headers[producer.HeaderCESpecVersion] != "1.0" {
		t.Errorf("record key %q, headers %v", msg.Key, headers)
	}
	ev, err := serde.Decode(ctx, topic, msg.Value, schemaHeaders)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := ev.(*schemas.ReviewEvent); !ok || r.Decision != "override" || r.FinalOutcome != "fail" || r.ModelOutcome != "pass" ||
		*r.ModelConfidence != 0.3 || r.Note != "The certificate expired in 2024." || r.Reviewer != "user-of-acme" {
		t.Errorf("review event = %+v", ev)
	}
	republished, err := reader.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("reading the reviews topic: %v", err)
	}
	for _, h := range republished.Headers {
		if h.Key == producer.HeaderCEID && string(h.Value) != headers[producer.HeaderCEID] {
			t.Errorf("the review posted again was published as %s, want the same event id %s", h.Value, headers[producer.HeaderCEID])
		}
	}
	if string(republished.Key) != string(msg.Key) || !bytes.Equal(republished.Value, msg.Value) {
		t.Error("the review posted again was published with another event")
	}
	shortCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if extra, err := reader.FetchMessage(shortCtx); err == nil {
		t.Errorf("a third record on the reviews topic: key %q", extra.Key)
	}

	// A later confirm of clarity; the status shows reviews and final outcomes.
	if r := post(acme, "req-r1", `{"review_id": "rv-9", "rule_id": "clarity", "decision": "confirm"}`); r.status != http.StatusCreated {
		t.Fatalf("POST confirm: %s", r)
	}
	status := call(t, http.MethodGet, ts.URL+"/v1/validations/req-r1", acme, nil)
	var body struct {
		Result struct {
			Summary struct {
				Aggregate       verdict.Aggregate `json:"aggregate"`
				FinalAggregates verdict.Aggregate `json:"final_aggregates"`
				Counts          struct {
					NeedsReview int `json:"needs_review"`
				} `json:"counts"`
			} `json:"summary"`
			Verdicts []struct {
				RuleID        string           `json:"rule_id"`
				Confidence    *float64         `json:"confidence"`
				NeedsReview   bool             `json:"needs_review"`
				ReviewReasons []string         `json:"review_reasons"`
				Review        *reviews.Review  `json:"review"`
				History       []reviews.Review `json:"review_history"`
				Final         reviews.Final    `json:"final"`
			} `json:"verdicts"`
		} `json:"result"`
	}
	if err := json.Unmarshal(status.body, &body); err != nil {
		t.Fatalf("%s: %v", status.body, err)
	}
	s := body.Result.Summary
	if !s.Aggregate.Boolean.Passed || s.FinalAggregates.Boolean.Passed || s.FinalAggregates.Boolean.PassedCount != 2 || s.Counts.NeedsReview != 3 {
		t.Errorf("summary: model %+v, final %+v, counts %+v", *s.Aggregate.Boolean, *s.FinalAggregates.Boolean, s.Counts)
	}
	byRule := map[string]int{}
	for i, v := range body.Result.Verdicts {
		byRule[v.RuleID] = i
	}
	insured := body.Result.Verdicts[byRule["insured"]]
	if insured.Review == nil || insured.Review.ReviewID != "rv-1" || len(insured.History) != 1 || insured.Final.Source != reviews.FromReview ||
		insured.Final.Outcome != engine.OutcomeFail || !insured.NeedsReview || insured.ReviewReasons[0] != "low_confidence" || *insured.Confidence != 0.3 {
		t.Errorf("insured = %+v", insured)
	}
	if signed := body.Result.Verdicts[byRule["signed"]]; signed.Review != nil || len(signed.History) != 0 || signed.Final.Source != reviews.FromModel || signed.Final.Reviewed {
		t.Errorf("signed = %+v", signed)
	}
	if c := body.Result.Verdicts[byRule["clarity"]]; c.Final.Outcome != engine.OutcomeScore || *c.Final.NumericalOutput != 4 || !c.Final.Reviewed {
		t.Errorf("clarity = %+v", c)
	}
	// Reviewed verdicts leave the queue.
	if q := getQueue("status=pending", acme); q.ids() != "req-r2/signed req-r1/term req-r2/term" {
		t.Errorf("queue after the reviews = %q", q.ids())
	}
	// The report again, with the reviewers' columns.
	xlsx := call(t, http.MethodGet, ts.URL+"/v1/validations/req-r1/report", acme, nil)
	if xlsx.status != http.StatusOK || xlsx.header.Get("Content-Type") != report.MIMEType {
		t.Fatalf("GET report: %d %s", xlsx.status, xlsx.header)
	}
	f, err := excelize.OpenReader(bytes.NewReader(xlsx.body))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows(report.SheetReport)
	if err != nil {
		t.Fatal(err)
	}
	var insuredRow []string
	for _, row := range rows[report.HeaderRow:] {
		if len(row) >= report.ColRuleID && row[report.ColRuleID-1] == "insured" {
			insuredRow = row
		}
	}
	if len(insuredRow) < report.ColFinal || insuredRow[report.ColReviewDecision-1] != "override" || insuredRow[report.ColReviewer-1] != "user-of-acme" ||
		insuredRow[report.ColFinal-1] != "fail" || insuredRow[report.ColConfidence-1] != "0.3" {
		t.Errorf("the report's insured row = %q", insuredRow)
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/validations/req-r1/report", globex, nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant's report: %s", r)
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/reviews?status=done", acme, nil); r.status != http.StatusBadRequest {
		t.Errorf("status=done: %s", r)
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/reviews?cursor=junk", acme, nil); r.status != http.StatusBadRequest {
		t.Errorf("a bad cursor: %s", r)
	}
}

// TestReviewScope: with a review scope set, a token without it may read but
// not review.
func TestReviewScope(t *testing.T) {
	req, jobStore, reviewStore := judgedInMemory(t, "acme", "req-s")
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: reviewStore, ReviewScope: "reviews:write"})
	body := []byte(`{"review_id": "a", "rule_id": "signed", "decision": "confirm", "passage_ids": ["d1p1s1"]}`)
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations/"+req.RequestID+"/reviews", id.token(t, "acme"), body); r.status != http.StatusForbidden {
		t.Errorf("without the scope: %s", r)
	}
	scoped := id.token(t, "acme", func(c jwt.MapClaims) { c["scope"] = "validations:read reviews:write" })
	// Job status in memory keeps no material: the passages the verdicts cite are known.
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations/"+req.RequestID+"/reviews", scoped, body); r.status != http.StatusCreated {
		t.Errorf("with the scope: %s", r)
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/reviews/agreement", scoped, nil); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"rule_id":"signed","reviews":1,"agreed":1,"accuracy":null,"kappa":null`) {
		t.Errorf("agreement: %s", r)
	}
}

// recordingPublisher records the review events published, or fails each
// publish with fail when it is set.
type recordingPublisher struct {
	mu     sync.Mutex
	fail   error
	events []*schemas.ReviewEvent
}

func (p *recordingPublisher) PublishReview(_ context.Context, ev *schemas.ReviewEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.events = append(p.events, ev)
	return nil
}

func (p *recordingPublisher) setFail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

// published lists the events published so far.
func (p *recordingPublisher) published() []*schemas.ReviewEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// eventIDs are the ids of events.
func eventIDs(events []*schemas.ReviewEvent) []string {
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.EventID
	}
	return ids
}

// TestReviewIsPublishedOnlyOnceStored: a review refused (409, the store's
// conditional add fails; 400) is never published; one stored whose publish
// fails is answered 503 with Retry-After and published by the retry of the
// same post, with the stored review's event. The use case decides this
// (reviews.Recorder, tested beside it); here, the answers the handler maps
// its outcomes to.
func TestReviewIsPublishedOnlyOnceStored(t *testing.T) {
	req, jobStore, reviewStore := judgedInMemory(t, "acme", "req-pub")
	pub := &recordingPublisher{}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: reviewStore, ReviewPublisher: pub})
	acme := id.token(t, "acme")
	post := func(body string) response {
		t.Helper()
		return call(t, http.MethodPost, ts.URL+"/v1/validations/"+req.RequestID+"/reviews", acme, []byte(body))
	}
	const confirm = `{"review_id": "rv-1", "rule_id": "signed", "decision": "confirm", "passage_ids": ["d1p1s1"]}`
	const eventID = "acme/req-pub/signed/rv-1"

	if r := post(confirm); r.status != http.StatusCreated {
		t.Fatalf("POST: %s", r)
	}
	if got := eventIDs(pub.published()); !slices.Equal(got, []string{eventID}) {
		t.Fatalf("published %v, want [%s]", got, eventID)
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"the same id, another review", `{"review_id": "rv-1", "rule_id": "signed", "decision": "override", "boolean_output": false}`, http.StatusConflict},
		{"an invalid review", `{"review_id": "rv-2", "rule_id": "signed", "decision": "override"}`, http.StatusBadRequest},
	} {
		if r := post(tc.body); r.status != tc.status {
			t.Errorf("%s: %s, want %d", tc.name, r, tc.status)
		}
		if got := eventIDs(pub.published()); len(got) != 1 {
			t.Errorf("%s: published %v; a refused review must not be", tc.name, got)
		}
	}

	// The broker fails after the store: 503, the review kept.
	pub.setFail(errors.New("broker down"))
	const second = `{"review_id": "rv-3", "rule_id": "insured", "decision": "override", "boolean_output": false, "note": "Lapsed."}`
	r := post(second)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("POST with the broker down: %s, want 503 with Retry-After", r)
	}
	kept, err := reviewStore.List(context.Background(), "acme", req.RequestID)
	if err != nil || len(kept) != 2 || kept[1].ReviewID != "rv-3" {
		t.Fatalf("stored reviews %+v, %v; want rv-3 kept", kept, err)
	}
	// The client's retry publishes it: the stored review's event.
	pub.setFail(nil)
	if r := post(second); r.status != http.StatusOK {
		t.Fatalf("retry: %s, want 200", r)
	}
	events := pub.published()
	if got := eventIDs(events); !slices.Equal(got, []string{eventID, "acme/req-pub/insured/rv-3"}) {
		t.Fatalf("published %v after the retry", got)
	}
	if ev := events[1]; !ev.ReviewedAt.Equal(kept[1].ReviewedAt) || ev.Note != "Lapsed." || ev.FinalOutcome != "fail" {
		t.Errorf("event %+v, want the stored review's", ev)
	}
}

// concurrentPost is a review store in which, just before each Add, another
// post of the same review id with another review lands first (on another
// replica, say): the race only the store's conditional add settles.
type concurrentPost struct{ reviews.Store }

func (s concurrentPost) Add(ctx context.Context, tenant string, r reviews.Review) (reviews.Review, bool, error) {
	other := r
	other.Note = "the other post's review"
	if _, _, err := s.Store.Add(ctx, tenant, other); err != nil {
		return reviews.Review{}, false, err
	}
	return s.Store.Add(ctx, tenant, r)
}

// TestReviewLosingARaceIsNotPublished: a review that loses the race for its
// id to another one is refused by the conditional store (409) and never
// published, though no review held the id when it was posted.
func TestReviewLosingARaceIsNotPublished(t *testing.T) {
	req, jobStore, reviewStore := judgedInMemory(t, "acme", "req-race")
	pub := &recordingPublisher{}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: concurrentPost{reviewStore}, ReviewPublisher: pub})
	body := []byte(`{"review_id": "rv-1", "rule_id": "signed", "decision": "confirm", "passage_ids": ["d1p1s1"]}`)
	r := call(t, http.MethodPost, ts.URL+"/v1/validations/"+req.RequestID+"/reviews", id.token(t, "acme"), body)
	if r.status != http.StatusConflict {
		t.Fatalf("POST: %s, want 409", r)
	}
	if got := eventIDs(pub.published()); len(got) != 0 {
		t.Errorf("published %v: a review refused as a conflict must not be", got)
	}
}
