package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// The callback bodies of a Kafka request: the full one is the status body;
// the one without verdicts keeps the summary and says how many verdicts were
// left out and where to GET them.
func TestCallbackPayloads(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	req := &schemas.Request{RequestID: "req-9", TenantID: "acme", SubmittedAt: at}
	out := judging.Events{
		Summary: schemas.SummaryEvent{EventID: "acme/req-9", RequestID: "req-9", TenantID: "acme", RulesetID: "rs", Status: schemas.StatusCompleted, StartedAt: at, CompletedAt: at},
		Verdicts: []schemas.VerdictEvent{
			{EventID: "acme/req-9/r1", RequestID: "req-9", TenantID: "acme", RuleID: "r1", StartedAt: at, CompletedAt: at},
			{EventID: "acme/req-9/r2", RequestID: "req-9", TenantID: "acme", RuleID: "r2", StartedAt: at, CompletedAt: at},
		},
	}
	full, short, err := CallbackPayloads(req, out)
	if err != nil {
		t.Fatal(err)
	}
	type body struct {
		RequestID string `json:"request_id"`
		Status    string `json:"status"`
		StatusURL string `json:"status_url"`
		Result    struct {
			Summary struct {
				EventID string `json:"event_id"`
			} `json:"summary"`
			Verdicts []json.RawMessage `json:"verdicts"`
			Omitted  *struct {
				Count     int    `json:"count"`
				Reason    string `json:"reason"`
				StatusURL string `json:"status_url"`
			} `json:"verdicts_omitted"`
		} `json:"result"`
	}
	tests := []struct {
		name         string
		raw          []byte
		wantVerdicts int
		wantOmitted  bool
	}{
		{"full", full, 2, false},
		{"without verdicts", short, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b body
			if err := json.Unmarshal(tc.raw, &b); err != nil {
				t.Fatalf("%v: %s", err, tc.raw)
			}
			if b.RequestID != "req-9" || b.Status != "completed" || b.StatusURL != "/v1/validations/req-9" || b.Result.Summary.EventID != "acme/req-9" {
				t.Errorf("body %s", tc.raw)
			}
			if len(b.Result.Verdicts) != tc.wantVerdicts || (b.Result.Omitted != nil) != tc.wantOmitted {
				t.Errorf("%d verdicts, omitted %v; want %d, %v: %s", len(b.Result.Verdicts), b.Result.Omitted != nil, tc.wantVerdicts, tc.wantOmitted, tc.raw)
			}
			if o := b.Result.Omitted; o != nil && (o.Count != 2 || o.StatusURL != "/v1/validations/req-9" || o.Reason == "") {
				t.Errorf("verdicts_omitted %+v", *o)
			}
		})
	}
	if string(full) != string(mustPayload(t, req, out)) {
		t.Error("the full callback body differs from ResultPayload")
	}
}

func mustPayload(t *testing.T, req *schemas.Request, out judging.Events) []byte {
	t.Helper()
	b, err := ResultPayload(req, out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
