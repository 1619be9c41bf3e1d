package schemas

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzUnmarshalRequest: any Avro body read as a ValidationRequest gives a
// request or a *DecodeError or *RequestError, never a panic nor an
// allocation sized by the input's claims; a request read encodes again to
// the same bytes and reads back the same.
func FuzzUnmarshalRequest(f *testing.F) {
	codecs, err := NewCodecs()
	if err != nil {
		f.Fatal(err)
	}
	for _, tc := range sampleEvents() {
		if tc.ev.SchemaName() != RequestSchema {
			continue
		}
		body, err := codecs.Marshal(tc.ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte{0x02, 'r', 0x02, 't', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := codecs.Unmarshal(RequestSchema, body)
		if err != nil {
			checkDecodeFailure(t, ev, err)
			return
		}
		req, ok := ev.(*Request)
		if !ok {
			t.Fatalf("decoded a %T, not a *Request", ev)
		}
		again, err := codecs.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding a decoded request: %v", err)
		}
		back, err := codecs.Unmarshal(RequestSchema, again)
		if err != nil {
			t.Fatalf("decoding a re-encoded request: %v", err)
		}
		if !reflect.DeepEqual(back, req) {
			t.Fatalf("a re-encoded request reads back otherwise:\n%+v\n%+v", req, back)
		}
		if third, err := codecs.Marshal(back.(*Request)); err != nil || !bytes.Equal(third, again) {
			t.Fatalf("re-encoding is not stable: %v", err)
		}
	})
}
