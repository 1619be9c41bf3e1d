package request

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"rulevalidator/schemas"
)

// FuzzFromJSON: any bytes read as a request's JSON (or YAML) form give a
// request or one *schemas.RequestError, never a panic; a request read
// writes back as JSON that reads the same, and, stamped, encodes as Avro
// and decodes the same.
func FuzzFromJSON(f *testing.F) {
	for _, path := range []string{
		"testdata/request.json",
		"../examples/contract-review/request.json",
		"../examples/contract-review/request-pdf.json",
		"../examples/contract-review/request-unknown-ruleset.json",
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, req := range sampleRequests() {
		data, err := req.JSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("request_id: r\ntenant_id: t\nruleset_ref: {id: rs}\ntext_input: hi\n"))
	f.Add([]byte(`{"request_id": "r", "tenant_id": "t", "inline_ruleset": "{}", "documents": [{"name": "a", "data": "!!"}]}`))
	codecs := newCodecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := FromJSON(data)
		if err != nil {
			var re *schemas.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %T %v, want a *schemas.RequestError", err, err)
			}
			if req != nil {
				t.Fatal("a request came with an error")
			}
			return
		}
		out, err := req.JSON()
		if err != nil {
			t.Fatalf("writing a request read as JSON: %v", err)
		}
		back, err := FromJSON(out)
		if err != nil {
			t.Fatalf("a request written as JSON does not read back: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, req) {
			t.Fatalf("a request written as JSON reads back otherwise:\n%s", out)
		}
		if req.SubmittedAt.IsZero() {
			req.SubmittedAt = t0
		}
		body, err := codecs.Marshal(req)
		if err != nil {
			t.Fatalf("a request read as JSON does not encode as Avro: %v", err)
		}
		ev, err := codecs.Unmarshal(schemas.RequestSchema, body)
		if err != nil {
			t.Fatalf("a request read as JSON, as Avro, does not decode: %v", err)
		}
		if !reflect.DeepEqual(ev, req) {
			t.Fatalf("a request read as JSON reads back from Avro otherwise:\n%+v\n%+v", req, ev)
		}
	})
}
