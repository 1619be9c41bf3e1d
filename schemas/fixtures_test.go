package schemas

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"rulevalidator/verdict"
)

// Times as events carry them: UTC, whole milliseconds.
var (
	t0 = time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC)
	t1 = t0.Add(1500 * time.Millisecond)
	t2 = t1.Add(42 * time.Second)
)

const unicodeText = "Vertrag für Müller & Söhne — 契約書 🚀 \u200b ‘quotes’ \u0000 end"

type eventCase struct {
	name string
	ev   Event
}

// sampleEvents covers every event type with every optional field set and
// unset, unicode text and empty arrays.
func sampleEvents() []eventCase {
	return []eventCase{
		{"request/full", fullRequest()},
		{"request/minimal", &Request{
			RequestID:   "r-min",
			TenantID:    "t",
			RulesetRef:  &RulesetRef{ID: "rs"},
			SubmittedAt: t0,
		}},
		{"request/inline and empty values", &Request{
			RequestID:     "r-inline",
			TenantID:      "t",
			InlineRuleset: new(`{"rules":[{"rule_id":"r1","rule_text":"Is it signed?"}]}`),
			PrimaryDocs: []Document{
				{Name: "empty-content", Content: new("")},
				{Name: "no-pages", Pages: []string{}},
				{Name: "blank-pages", Pages: []string{"", ""}},
			},
			TextInput:   new(""),
			NamedInputs: []NamedInput{{Name: "nothing", Description: new(""), ValueJSON: "null"}},
			Message:     new(""),
			Options:     Options{GenerateReport: new(false), Model: new(""), CallbackURL: new("")},
			SubmittedAt: time.UnixMilli(0).UTC(),
		}},
		{"verdict/full", fullVerdict()},
		{"verdict/minimal", &VerdictEvent{
			EventID:   "r/x",
			RequestID: "r",
			TenantID:  "t",
			RuleID:    "x",
			RuleType:  verdict.Boolean,
			StartedAt: t1, CompletedAt: t2,
			RuleCount: 1,
		}},
		{"verdict/numerical unicode", &VerdictEvent{
			EventID:         "r/ü",
			RequestID:       "r",
			TenantID:        "t",
			RulesetID:       "rs",
			RulesetVersion:  new(""),
			Model:           "m",
			RuleID:          "ü",
			RuleName:        new(unicodeText),
			RuleType:        verdict.Numerical,
			DataSufficiency: true,
			Rationale:       unicodeText,
			NumericalOutput: new(-3),
			AllowedScores:   []int{-3, 0, 2147483647, -2147483648},
			Evidences: []verdict.Evidence{{
				Text: unicodeText, SourceOrigin: "契約書.pdf", SourcePageNumber: 0, Match: verdict.MatchNone,
			}},
			StartedAt: t1, CompletedAt: t2,
			RuleIndex: 2, RuleCount: 3,
		}},
		{"verdict/kept with content problems", &VerdictEvent{
			EventID: "r/k", RequestID: "r", TenantID: "t", RulesetID: "rs", Model: "m", RuleID: "k",
			RuleType: verdict.Boolean, BooleanOutput: new(true), Rationale: "...",
			SufficiencyNote: new(`kept with problems after every re-ask: the model gave no rationale that explains the verdict (it wrote "..."); the model's quote "x" is not in "a.pdf"`),
			Problems:        []string{`the model gave no rationale that explains the verdict (it wrote "...")`, `the model's quote "x" is not in "a.pdf"`},
			Evidences:       []verdict.Evidence{{Text: "x", QuotedText: "x", SourceOrigin: "a.pdf", SourcePageNumber: 1, CitedPageNumber: 1, Match: verdict.MatchNone}},
			StartedAt:       t1, CompletedAt: t2, RuleCount: 1,
		}},
		{"verdict/from the verdict cache", &VerdictEvent{
			EventID: "r2/c", RequestID: "r2", TenantID: "t", RulesetID: "rs", Model: "m", RuleID: "c",
			RuleType: verdict.Boolean, BooleanOutput: new(false), DataSufficiency: true, Rationale: "Not capped.",
			StartedAt: t2, CompletedAt: t2, RuleCount: 1,
			Cached: &verdict.CachedFrom{JudgedAt: t1, RequestID: "r1"},
		}},
		{"summary/verdicts from the cache", &SummaryEvent{
			EventID: "r2", RequestID: "r2", TenantID: "t", RulesetID: "rs", Model: "m",
			Status:    StatusCompleted,
			Counts:    Counts{Rules: 2, Passed: 1, Failed: 1, Cached: 2},
			StartedAt: t1, CompletedAt: t2,
		}},
		{"summary/full", fullSummary()},
		{"review/override", &ReviewEvent{
			EventID: "acme/req-1/payment-terms/rv-1", ReviewID: "rv-1", RequestID: "req-1", TenantID: "acme", RulesetID: "supplier-onboarding",
			RuleID: "payment-terms", RuleType: verdict.Boolean, Decision: "override", BooleanOutput: new(false),
			Note: "Clause 4.2 says 60 days, not 30.", PassageIDs: []string{"d1p3s2", "d1p3s3"}, Reviewer: "user-7", ReviewedAt: t2,
			ModelOutcome: "pass", ModelBooleanOutput: new(true), ModelConfidence: new(0.55), FinalOutcome: "fail",
		}},
		{"review/confirm", &ReviewEvent{
			EventID: "acme/req-1/clarity/rv-2", ReviewID: "rv-2", RequestID: "req-1", TenantID: "acme",
			RuleID: "clarity", RuleType: verdict.Numerical, Decision: "confirm", Reviewer: "user-7", ReviewedAt: t2,
			ModelOutcome: "score", ModelNumericalOutput: new(3), FinalOutcome: "score",
		}},
		{"summary/failed", &SummaryEvent{
			EventID:   "r",
			RequestID: "r",
			TenantID:  "t",
			Status:    StatusFailed,
			Error:     &SummaryError{Code: ReasonInvalidRuleset, Message: unicodeText},
			StartedAt: t1, CompletedAt: t2,
		}},
		{"summary/numerical no score", &SummaryEvent{
			EventID: "r", RequestID: "r", TenantID: "t", RulesetID: "rs", Model: "m",
			Status:    StatusCompleted,
			Counts:    Counts{Rules: 1, InsufficientData: 1},
			Aggregate: verdict.Aggregate{Numerical: &verdict.NumericalAggregate{Mode: "mean"}},
			StartedAt: t1, CompletedAt: t2,
		}},
		{"deadletter/full", fullDeadLetter()},
		{"deadletter/minimal", &DeadLetter{
			OriginalTopic: "requests",
			OriginalValue: []byte{},
			Reason:        ReasonUndecodable,
			Attempts:      1,
		}},
	}
}

func fullRequest() *Request {
	return &Request{
		RequestID:  "req-1",
		TenantID:   "acme",
		RulesetRef: &RulesetRef{ID: "supplier-onboarding", Version: new("3")},
		PrimaryDocs: []Document{
			{Name: "agreement.pdf", Pages: []string{"page one", unicodeText}},
			{Name: "scan.pdf", URI: new("s3://inbox/acme/scan.pdf"), ContentType: new("application/pdf")},
			{Name: "order.pdf", Data: []byte("%PDF-1.7\n\x00\xff binary\n%%EOF\n"), ContentType: new("application/pdf")},
		},
		AuxiliaryDocs: []Document{{Name: "policy.md", Content: new("first\fsecond"), ContentType: new("text/markdown")}},
		TextInput:     new(unicodeText),
		NamedInputs: []NamedInput{
			{Name: "volume", Description: new("yearly volume"), ValueJSON: "12345678901234567890"},
			{Name: "contacts", ValueJSON: `[{"email":"a@b.example","role":"sales"}]`},
		},
		Message:     new("Flag blockers."),
		Options:     Options{GenerateReport: new(true), Model: new("gemma-3-270m"), CallbackURL: new("https://hooks.example/x"), Cache: new(false)},
		SubmittedAt: t0,
	}
}

func fullVerdict() *VerdictEvent {
	return &VerdictEvent{
		EventID:         "req-1/payment-terms",
		RequestID:       "req-1",
		TenantID:        "acme",
		RulesetID:       "supplier-onboarding",
		RulesetVersion:  new("3"),
		Model:           "gemma-3-270m",
		RuleID:          "payment-terms",
		RuleName:        new("Payment terms"),
		RuleType:        verdict.Boolean,
		DataSufficiency: true,
		Rationale:       "Invoices are payable within 30 days, under the 45-day limit.",
		BooleanOutput:   new(true),
		NotApplicable:   false,
		PagesConsidered: []verdict.DocumentPages{{Document: "agreement.pdf", Pages: []int{1, 2, 3, 250}}, {Document: "契約書", Pages: []int{1}}},
		Evidences: []verdict.Evidence{
			{Text: "payable within 30 days", QuotedText: "payable within 30 days", Similarity: 1, SourceOrigin: "agreement.pdf", SourcePageNumber: 2, CitedPageNumber: 2,
				Anchored: true, Match: verdict.MatchExact, StartOffset: new(30), EndOffset: new(52)},
			{Text: "volume 250000", QuotedText: "volume 250000", SourceOrigin: "volume", Match: verdict.MatchNotDocument, PassageID: "volume"},
			// Found on page 3 where the model cited page 9.
			{Text: "payable within sixty (60) days", QuotedText: "payable within six (6) days", Similarity: 0.875, SourceOrigin: "agreement.pdf", SourcePageNumber: 3, CitedPageNumber: 9,
				Anchored: true, Match: verdict.MatchFuzzy, StartOffset: new(80), EndOffset: new(110), Altered: true,
				Differences: []verdict.Difference{{Kind: "number", Quote: "six (6)", Document: "sixty (60)"}, {Kind: "negation", Quote: "", Document: "not"}}},
			{Text: "Payment is due … on receipt", QuotedText: "Payment is due [...] on receipt", Similarity: 0.93, SourceOrigin: "agreement.pdf", SourcePageNumber: 1,
				Anchored: true, Match: verdict.MatchElided, StartOffset: new(0), EndOffset: new(27)},
			// Cited by reference: the passage's text, origin, page and offsets.
			{Text: "Invoices are payable within 30 days.", SourceOrigin: "agreement.pdf", SourcePageNumber: 2, CitedPageNumber: 2, PassageID: "d1p2s4",
				Anchored: true, Match: verdict.MatchExact, Similarity: 1, StartOffset: new(22), EndOffset: new(58)},
			// Cited by reference with words that stand in another passage: the
			// evidence is that passage, beside the id and page the model gave.
			{Text: "Late payments bear interest at 1% a month.", QuotedText: "late payments bear interest at 1% a month", SourceOrigin: "agreement.pdf",
				SourcePageNumber: 3, CitedPageNumber: 2, PassageID: "d1p3s1", CitedPassageID: "d1p2s5",
				Anchored: true, Match: verdict.MatchPassage, Similarity: 1, StartOffset: new(80), EndOffset: new(122)},
		},
		StartedAt:     t1,
		CompletedAt:   t2,
		RuleIndex:     1,
		RuleCount:     4,
		Confidence:    new(0.62),
		NeedsReview:   true,
		ReviewReasons: []string{"low_confidence", "corrected_page", "altered_evidence"},
		RuleWeight:    new(2.5),
	}
}

func fullSummary() *SummaryEvent {
	return &SummaryEvent{
		EventID:        "req-1",
		RequestID:      "req-1",
		TenantID:       "acme",
		RulesetID:      "supplier-onboarding",
		RulesetVersion: new("3"),
		Model:          "gemma-3-270m",
		Status:         StatusCompleted,
		Counts:         Counts{Rules: 4, Passed: 2, Failed: 1, NotApplicable: 1, InsufficientData: 1, NeedsReview: 2},
		Aggregate: verdict.Aggregate{
			Boolean:   &verdict.BooleanAggregate{Mode: "all", Passed: false, Applicable: 3, PassedCount: 2},
			Numerical: &verdict.NumericalAggregate{Mode: "weighted_mean", Score: new(3.75), Counted: 2},
		},
		Sources: []verdict.Source{
			{SourceOrigin: "agreement.pdf", Text: "payable within 30 days", SourcePageNumber: 2},
			{SourceOrigin: "契約書", Text: unicodeText},
		},
		Usage: verdict.Usage{PromptTokens: 1 << 40, CompletionTokens: 321, CachedTokens: 7, LLMCalls: 4, PlannedCalls: 3, RulesFiltered: 2, RulesChecked: 1},
		Groups: []verdict.GroupResult{
			{ID: "liability", Path: "liability", Name: "Liability", Required: true, GatedBy: []string{"liability/caps"}, RuleIDs: []string{"l1", "l2"},
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Applicable: 2, PassedCount: 2}}},
			{ID: "caps", Path: "liability/caps", Required: true, RuleIDs: []string{"c1"},
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "any", Applicable: 1}, Numerical: &verdict.NumericalAggregate{Mode: "min", Score: new(2.0), Counted: 1}}},
			{ID: "payment", Path: "payment", NotApplicable: true, Reason: "not applicable: filter_criteria of nested ruleset \"payment\" (inputs.contract_value > 100000) is false",
				RuleIDs: []string{"p1"}, Aggregate: verdict.Aggregate{Numerical: &verdict.NumericalAggregate{Mode: "mean"}}},
		},
		Report:      &ReportDescriptor{FileName: "req-1.xlsx", URI: "s3://reports/acme/req-1.xlsx", MIMEType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ReferenceID: "acme/req-1.xlsx"},
		StartedAt:   t1,
		CompletedAt: t2,
	}
}

func fullDeadLetter() *DeadLetter {
	return &DeadLetter{
		OriginalTopic:     "rulevalidator.requests",
		OriginalPartition: 7,
		OriginalOffset:    1 << 42,
		OriginalTimestamp: t0,
		OriginalKey:       []byte{},
		OriginalValue:     []byte{0x00, 0xff, '{', 0x80},
		OriginalHeaders: []Header{
			{Key: "traceparent", Value: []byte("00-abc-def-01")},
			{Key: "no-value"},
			{Key: "empty", Value: []byte{}},
			{Key: "traceparent", Value: []byte{0xff}},
		},
		Reason:   ReasonInvalidRequest,
		Message:  "invalid request \"req-1\": tenant_id is empty",
		FailedAt: t2,
		Attempts: 3,
	}
}

func newTestCodecs(t testing.TB) *Codecs {
	t.Helper()
	c, err := NewCodecs()
	if err != nil {
		t.Fatalf("NewCodecs: %v", err)
	}
	return c
}

// assertEqual compares deeply and shows both sides as JSON when they differ.
func assertEqual(t *testing.T, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("values differ\n got: %s\nwant: %s", g, w)
}
