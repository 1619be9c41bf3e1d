package api

import (
	"encoding/json"

	"rulevalidator/pipeline"
	"rulevalidator/schemas"
)

// CallbackPayloads are the callback bodies of a finished validation that
// came through Kafka: the ResultPayload, and the same body without the
// verdicts, sent when the full one is too large for the callback topic. The
// second says so in result.verdicts_omitted, with how many verdicts there
// are and the status_url that serves them. It fits pipeline.Config's
// CallbackPayload.
func CallbackPayloads(req *schemas.Request, out pipeline.Outcome) (payload, withoutVerdicts []byte, err error) {
	body := newJobBody(finishedJob(req, out))
	if payload, err = json.Marshal(body); err != nil {
		return nil, nil, err
	}
	short := bodyWithoutVerdicts{jobBody: body, Result: &resultWithoutVerdicts{
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

// bodyWithoutVerdicts is a jobBody whose result leaves the verdicts out; its
// Result takes the place of the embedded one in JSON.
type bodyWithoutVerdicts struct {
	jobBody
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
