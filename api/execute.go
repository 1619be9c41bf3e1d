package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"rulevalidator/jobs"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// The asynchronous execution path of the specification: an internal caller
// (the workflow engine) posts an execution request, gets a job handle at
// once, and has the result posted to its callback URL when the job is done.
// It runs exactly as POST /v1/validations does (same checks, same size caps,
// same callback rules, the same requests topic); only the envelope differs:
//
//	{
//	  "job_id": "optional; becomes the request_id",
//	  "tenant_id": "required: internal callers name the tenant",
//	  "agent_config": {"type_config": {...the ruleset...}},  // or "type_config" at the top,
//	  "ruleset_ref": {"id": "...", "version": "..."},        // or a stored ruleset
//	  "inputs": {...the typed inputs, in the specification's shapes...},
//	  "callback_url": "https://...",
//	  "options": {"generate_report": true, "model": "..."}
//	}

// executeKeys are the keys of an execution request.
var executeKeys = []string{"job_id", "tenant_id", "agent_config", "type_config", "ruleset_ref", "inputs", "callback_url", "options"}

// executeBody is the job handle and status of an asynchronous execution.
// JobID is the request id of the validation it runs.
type executeBody struct {
	JobID       string       `json:"job_id"`
	TenantID    string       `json:"tenant_id"`
	Status      jobs.Status  `json:"status"`
	SubmittedAt *string      `json:"submitted_at"`
	StatusURL   string       `json:"status_url"`
	Result      *jobs.Result `json:"result"`
}

func newExecuteBody(j jobs.Job) executeBody {
	b := jobs.NewBody(j)
	return executeBody{JobID: j.RequestID, TenantID: j.TenantID, Status: b.Status, SubmittedAt: b.SubmittedAt,
		StatusURL: executeStatusURL(j.TenantID, j.RequestID), Result: b.Result}
}

// executeStatusURL is where internal callers poll a job.
func executeStatusURL(tenant, jobID string) string {
	return executePathPrefix + url.PathEscape(jobID) + "?" + url.Values{"tenant_id": {tenant}}.Encode()
}

// executeAsync accepts an execution request from an internal caller.
func (s *Server) executeAsync(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Internal == nil || s.cfg.Submitter == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
		return
	}
	if !s.internalCaller(w, r) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, readErr := executionRequest(body)
	if req == nil {
		writeInvalid(w, readErr)
		return
	}
	if err := checkTenant(req.TenantID); err != nil && req.TenantID != "" {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "tenant_id "+err.Error())
		return
	}
	// A request naming no tenant is refused by submit, with its other problems.
	if req.TenantID != "" && !s.admitted(w, req.TenantID) {
		return
	}
	s.submit(w, r, req, readErr, func(w http.ResponseWriter, job jobs.Job) {
		w.Header().Set("Location", executeStatusURL(job.TenantID, job.RequestID))
		writeJSON(w, http.StatusAccepted, newExecuteBody(job))
	})
}

// getExecution answers a job's status to internal callers; the tenant is
// the tenant_id query parameter, as for internal report downloads.
func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) {
	tenant, ok := s.internalTenant(w, r)
	if !ok {
		return
	}
	job, ok := s.lookup(w, r, tenant, r.PathValue("job_id"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, newExecuteBody(job))
}

// executionRequest maps an execution request into a validation request:
// the envelope through the same mapping as a request's JSON form, the
// inputs through the same input parser. What is wrong is listed in one
// *schemas.RequestError, next to the request as far as it was read (nil
// when the body is not a JSON object).
func executionRequest(body []byte) (*schemas.Request, error) {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &schemas.RequestError{Problems: []string{fmt.Sprintf("not an execution request (a JSON object): %v", err)}}
	}
	if dec.More() {
		return nil, &schemas.RequestError{Problems: []string{"not an execution request: data after the object"}}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(executeKeys, k) {
			fail("%s: unknown field (known: %s)", k, strings.Join(executeKeys, ", "))
		}
	}

	env := map[string]any{}
	for from, to := range map[string]string{"job_id": "request_id", "tenant_id": "tenant_id", "ruleset_ref": "ruleset_ref"} {
		if v, ok := m[from]; ok {
			env[to] = v
		}
	}
	if _, ok := m["tenant_id"]; !ok {
		fail("tenant_id: missing: internal callers name the tenant")
	}
	typeConfig, inline := m["type_config"]
	if ac, ok := m["agent_config"]; ok {
		obj, isObject := ac.(map[string]any)
		switch {
		case !isObject:
			fail("agent_config: must be an object {type_config}")
		case inline:
			fail("agent_config.type_config and type_config are both given; give the ruleset once")
		default:
			for k := range obj {
				if k != "type_config" {
					fail("agent_config: unknown field %q (known: type_config)", k)
				}
			}
			typeConfig, inline = obj["type_config"]
		}
	}
	if inline {
		env["inline_ruleset"] = typeConfig
	}
	options := map[string]any{}
	if v, ok := m["options"]; ok {
		obj, isObject := v.(map[string]any)
		if !isObject {
			fail("options: must be an object {generate_report?, model?}")
		}
		for k, v := range obj {
			if k == "callback_url" {
				fail("options.callback_url: give the callback as callback_url at the top of the execution request")
				continue
			}
			options[k] = v
		}
	}
	if v, ok := m["callback_url"]; ok {
		options["callback_url"] = v
	}
	if len(options) > 0 {
		env["options"] = options
	}

	req, err := request.FromMap(env)
	problems = append(problems, requestProblems(err)...)
	inputs, ok := m["inputs"].(map[string]any)
	if !ok {
		fail("inputs: must be an object of the typed inputs (primary_docs, auxiliary_docs, text_input, named_inputs, message, ...)")
	} else {
		problems = append(problems, requestProblems(request.ReadInputs(req, inputs))...)
	}
	if len(problems) > 0 {
		return req, &schemas.RequestError{RequestID: req.RequestID, Problems: problems}
	}
	return req, nil
}

// requestProblems lists the problems of a *schemas.RequestError, none for nil.
func requestProblems(err error) []string {
	if err == nil {
		return nil
	}
	if re, ok := err.(*schemas.RequestError); ok {
		return re.Problems
	}
	return []string{err.Error()}
}
