package schemas

import (
	"encoding/json"
	"fmt"
	"time"

	"rulevalidator/internal/clone"
	"rulevalidator/verdict"
)

// ReviewEvent is a person's review of one verdict (Avro Review), published
// to the reviews topic keyed ReviewEventKey.
type ReviewEvent struct {
	EventID   string
	ReviewID  string
	RequestID string
	TenantID  string
	RulesetID string
	RuleID    string
	RuleType  verdict.RuleType
	// Decision is "confirm" or "override".
	Decision        string
	BooleanOutput   *bool
	NumericalOutput *int
	NotApplicable   bool
	Note            string
	PassageIDs      []string
	Reviewer        string
	ReviewedAt      time.Time
	// ModelOutcome, ModelBooleanOutput, ModelNumericalOutput and
	// ModelConfidence are the model's verdict the review answered.
	ModelOutcome         string
	ModelBooleanOutput   *bool
	ModelNumericalOutput *int
	ModelConfidence      *float64
	// FinalOutcome is the rule's outcome once the review applies.
	FinalOutcome string
}

// SchemaName is ReviewSchema.
func (r *ReviewEvent) SchemaName() string { return ReviewSchema }

// ReviewEventID is the deterministic id of a review,
// tenant/request_id/rule_id/review_id.
func ReviewEventID(tenantID, requestID, ruleID, reviewID string) string {
	return VerdictEventID(tenantID, requestID, ruleID) + "/" + reviewID
}

// ReviewEventKey is a review's record key, request_id/rule_id: one rule's
// reviews go to one partition, in order.
func ReviewEventKey(requestID, ruleID string) string { return requestID + "/" + ruleID }

func (r *ReviewEvent) native() (map[string]any, error) {
	return map[string]any{
		"event_id":               r.EventID,
		"review_id":              r.ReviewID,
		"request_id":             r.RequestID,
		"tenant_id":              r.TenantID,
		"ruleset_id":             r.RulesetID,
		"rule_id":                r.RuleID,
		"rule_type":              string(r.RuleType),
		"decision":               r.Decision,
		"boolean_output":         opt("boolean", r.BooleanOutput),
		"numerical_output":       opt("int", r.NumericalOutput),
		"not_applicable":         r.NotApplicable,
		"note":                   r.Note,
		"passage_ids":            nativeList(r.PassageIDs),
		"reviewer":               r.Reviewer,
		"reviewed_at":            millis(r.ReviewedAt),
		"model_outcome":          r.ModelOutcome,
		"model_boolean_output":   opt("boolean", r.ModelBooleanOutput),
		"model_numerical_output": opt("int", r.ModelNumericalOutput),
		"model_confidence":       opt("double", r.ModelConfidence),
		"final_outcome":          r.FinalOutcome,
	}, nil
}

func reviewFromNative(r nativeReader) *ReviewEvent {
	return &ReviewEvent{
		EventID:              r.str("event_id"),
		ReviewID:             r.str("review_id"),
		RequestID:            r.str("request_id"),
		TenantID:             r.str("tenant_id"),
		RulesetID:            r.str("ruleset_id"),
		RuleID:               r.str("rule_id"),
		RuleType:             verdict.RuleType(r.str("rule_type")),
		Decision:             r.str("decision"),
		BooleanOutput:        r.optBoolean("boolean_output"),
		NumericalOutput:      r.optInt("numerical_output"),
		NotApplicable:        r.defaultedBool("not_applicable"),
		Note:                 r.str("note"),
		PassageIDs:           r.strs("passage_ids"),
		Reviewer:             r.str("reviewer"),
		ReviewedAt:           r.time("reviewed_at"),
		ModelOutcome:         r.str("model_outcome"),
		ModelBooleanOutput:   r.optBoolean("model_boolean_output"),
		ModelNumericalOutput: r.optInt("model_numerical_output"),
		ModelConfidence:      r.optDouble("model_confidence"),
		FinalOutcome:         r.str("final_outcome"),
	}
}

type reviewJSON struct {
	EventID              string          `json:"event_id"`
	ReviewID             string          `json:"review_id"`
	RequestID            string          `json:"request_id"`
	TenantID             string          `json:"tenant_id"`
	RulesetID            string          `json:"ruleset_id"`
	RuleID               string          `json:"rule_id"`
	RuleType             string          `json:"rule_type"`
	Decision             string          `json:"decision"`
	BooleanOutput        *bool           `json:"boolean_output"`
	NumericalOutput      *int            `json:"numerical_output"`
	NotApplicable        bool            `json:"not_applicable"`
	Note                 string          `json:"note"`
	PassageIDs           []string        `json:"passage_ids"`
	Reviewer             string          `json:"reviewer"`
	ReviewedAt           json.RawMessage `json:"reviewed_at"`
	ModelOutcome         string          `json:"model_outcome"`
	ModelBooleanOutput   *bool           `json:"model_boolean_output"`
	ModelNumericalOutput *int            `json:"model_numerical_output"`
	ModelConfidence      *float64        `json:"model_confidence"`
	FinalOutcome         string          `json:"final_outcome"`
}

// MarshalJSON writes the review's JSON form: the Avro field names, times
// in TimeLayout.
func (r ReviewEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(reviewJSON{
		EventID: r.EventID, ReviewID: r.ReviewID, RequestID: r.RequestID, TenantID: r.TenantID, RulesetID: r.RulesetID,
		RuleID: r.RuleID, RuleType: string(r.RuleType), Decision: r.Decision, BooleanOutput: r.BooleanOutput,
		NumericalOutput: r.NumericalOutput, NotApplicable: r.NotApplicable, Note: r.Note, PassageIDs: emptyIfNil(r.PassageIDs),
		Reviewer: r.Reviewer, ReviewedAt: timeJSON(r.ReviewedAt), ModelOutcome: r.ModelOutcome,
		ModelBooleanOutput: r.ModelBooleanOutput, ModelNumericalOutput: r.ModelNumericalOutput,
		ModelConfidence: r.ModelConfidence, FinalOutcome: r.FinalOutcome,
	})
}

// UnmarshalJSON reads the review's JSON form.
func (r *ReviewEvent) UnmarshalJSON(data []byte) error {
	var in reviewJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("schemas: not a review in JSON form: %w", err)
	}
	out := ReviewEvent{
		EventID: in.EventID, ReviewID: in.ReviewID, RequestID: in.RequestID, TenantID: in.TenantID, RulesetID: in.RulesetID,
		RuleID: in.RuleID, RuleType: verdict.RuleType(in.RuleType), Decision: in.Decision, BooleanOutput: in.BooleanOutput,
		NumericalOutput: in.NumericalOutput, NotApplicable: in.NotApplicable, Note: in.Note, PassageIDs: clone.OrNil(in.PassageIDs),
		Reviewer: in.Reviewer, ModelOutcome: in.ModelOutcome, ModelBooleanOutput: in.ModelBooleanOutput,
		ModelNumericalOutput: in.ModelNumericalOutput, ModelConfidence: in.ModelConfidence, FinalOutcome: in.FinalOutcome,
	}
	if err := parseTimes(fmt.Sprintf("review %q", in.EventID), timeField{"reviewed_at", in.ReviewedAt, &out.ReviewedAt}); err != nil {
		return err
	}
	*r = out
	return nil
}
