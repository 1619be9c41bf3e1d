package jobs

import (
	"encoding/json"
	"net/url"

	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// StatusPath is the path under which the public API serves a validation's
// status: StatusPath + the escaped request id.
const StatusPath = "/v1/validations/"

// StatusURL is where a validation's status is polled.
func StatusURL(requestID string) string {
	return StatusPath + url.PathEscape(requestID)
}

// Body is a validation as the API answers it and as callbacks carry it.
// Result is null until the job is done; its summary and verdicts are the
// events' JSON form (schemas.SummaryEvent.MarshalJSON).
type Body struct {
	RequestID   string  `json:"request_id"`
	Status      Status  `json:"status"`
	SubmittedAt *string `json:"submitted_at"`
	StatusURL   string  `json:"status_url"`
	// Delay is set while the job is delayed.
	Delay  *Delay  `json:"delay,omitempty"`
	Result *Result `json:"result"`
}

// Result is a finished validation's summary and verdicts.
type Result struct {
	Summary  schemas.SummaryEvent   `json:"summary"`
	Verdicts []schemas.VerdictEvent `json:"verdicts"`
}

// NewBody is the body of j.
func NewBody(j Job) Body {
	b := Body{RequestID: j.RequestID, Status: j.Status, StatusURL: StatusURL(j.RequestID)}
	if j.Status == Delayed {
		b.Delay = j.Delay
	}
	if !j.SubmittedAt.IsZero() {
		at := j.SubmittedAt.UTC().Format(schemas.TimeLayout)
		b.SubmittedAt = &at
	}
	if j.Done() && j.Summary != nil {
		verdicts := j.Verdicts
		if verdicts == nil {
			verdicts = []schemas.VerdictEvent{}
		}
		b.Result = &Result{Summary: *j.Summary, Verdicts: verdicts}
	}
	return b
}

// ResultPayload is the body of a finished validation, in the shape the
// status route answers and callbacks carry.
func ResultPayload(req *schemas.Request, out judging.Events) ([]byte, error) {
	return json.Marshal(NewBody(Finished(req, out)))
}

// CallbackPayloads are the callback bodies of a finished validation: the
// ResultPayload, and the same body without the verdicts, sent when the full
// one is too large for the callback topic. The second says so in
// result.verdicts_omitted, with how many verdicts there are and the
// status_url that serves them. It fits pipeline.Config's CallbackPayload.
func CallbackPayloads(req *schemas.Request, out judging.Events) (payload, withoutVerdicts []byte, err error) {
	body := NewBody(Finished(req, out))
	if payload, err = json.Marshal(body); err != nil {
		return nil, nil, err
	}
	short := bodyWithoutVerdicts{Body: body, Result: &resultWithoutVerdicts{
		Summary:  out.Summary,
		Verdicts: []schemas.VerdictEvent{},
		Omitted: verdictsOmitted{
			Count:     len(out.Verdicts),
			Reason:    "the verdicts make the callback larger than the callback topic takes; GET status_url for them",
			StatusURL: body.StatusURL,
		},
	}}
	if withoutVerdicts, err = json.Marshal(short); err != nil {
		return nil, nil, err
	}
	return payload, withoutVerdicts, nil
}

// bodyWithoutVerdicts is a Body whose result leaves the verdicts out; its
// Result takes the place of the embedded one in JSON.
type bodyWithoutVerdicts struct {
	Body
	Result *resultWithoutVerdicts `json:"result"`
}

type resultWithoutVerdicts struct {
	Summary  schemas.SummaryEvent   `json:"summary"`
	Verdicts []schemas.VerdictEvent `json:"verdicts"`
	Omitted  verdictsOmitted        `json:"verdicts_omitted"`
}

// verdictsOmitted says that, and why, a callback carries no verdicts.
type verdictsOmitted struct {
	Count     int    `json:"count"`
	Reason    string `json:"reason"`
	StatusURL string `json:"status_url"`
}
