package schemas

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"rulevalidator/verdict"
)

var testTopics = map[string]string{
	"rv.requests":    RequestSchema,
	"rv.verdicts":    VerdictSchema,
	"rv.summaries":   SummarySchema,
	"rv.deadletters": DeadLetterSchema,
	"rv.reviews":     ReviewSchema,
}

func topicFor(ev Event) string {
	for topic, name := range testTopics {
		if name == ev.SchemaName() {
			return topic
		}
	}
	return ""
}

func newPlainSerde(t testing.TB) *Serde {
	t.Helper()
	s, err := NewSerde(context.Background(), SerdeConfig{Topics: testTopics})
	if err != nil {
		t.Fatalf("NewSerde: %v", err)
	}
	return s
}

// fakeRegistry is franz-go's in-memory Schema Registry HTTP server; byID
// counts the requests for a schema by id.
type fakeRegistry struct {
	*srfake.Registry
	byID atomic.Int64
}

func newFakeRegistry(t testing.TB) *fakeRegistry {
	t.Helper()
	reg := &fakeRegistry{Registry: srfake.New()}
	t.Cleanup(reg.Close)
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			reg.byID.Add(1)
		}
		return false
	})
	return reg
}

func (r *fakeRegistry) client(t testing.TB) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(r.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func newConfluentSerde(t testing.TB, reg *fakeRegistry) *Serde {
	t.Helper()
	s, err := NewSerde(context.Background(), SerdeConfig{Format: FormatConfluent, Registry: reg.client(t), Topics: testTopics})
	if err != nil {
		t.Fatalf("NewSerde: %v", err)
	}
	return s
}

func TestWirePlainRoundTrip(t *testing.T) {
	s := newPlainSerde(t)
	c := newTestCodecs(t)
	for _, tc := range sampleEvents() {
		t.Run(tc.name, func(t *testing.T) {
			topic := topicFor(tc.ev)
			value, headers, err := s.Encode(topic, tc.ev)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			schema, _ := c.Schema(tc.ev.SchemaName())
			assertEqual(t, headers, []Header{
				{Key: HeaderSchema, Value: []byte(tc.ev.SchemaName())},
				{Key: HeaderFingerprint, Value: []byte(schema.FingerprintHex())},
			})
			body, _ := c.Marshal(tc.ev)
			if !bytes.Equal(value, body) {
				t.Error("the plain value is not the bare Avro body")
			}
			got, err := s.Decode(context.Background(), topic, value, headers)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			assertEqual(t, got, tc.ev)
		})
	}
}

func TestWireEncodeErrors(t *testing.T) {
	s := newPlainSerde(t)
	if _, _, err := s.Encode("rv.verdicts", fullSummary()); err == nil || !strings.Contains(err.Error(), `topic "rv.verdicts" carries com.rulevalidator.v1.RuleVerdict, not com.rulevalidator.v1.ValidationSummary`) {
		t.Errorf("wrong topic: %v", err)
	}
	// Topics not listed are allowed in the plain format.
	if _, _, err := s.Encode("elsewhere", fullSummary()); err != nil {
		t.Errorf("unlisted topic: %v", err)
	}
}

func TestWireDecodeErrors(t *testing.T) {
	s := newPlainSerde(t)
	c := newTestCodecs(t)
	verdict, _ := c.Schema(VerdictSchema)
	body, _ := c.Marshal(fullVerdict())
	fp := func(v string) []Header { return []Header{{Key: HeaderFingerprint, Value: []byte(v)}} }
	for _, tc := range []struct {
		name    string
		value   []byte
		headers []Header
		want    string
		offset  int
	}{
		{"tombstone", nil, nil, "empty value and no rv-schema-fingerprint header", -1},
		{"json", []byte(`{"request_id":"r"}`), nil, `no rv-schema-fingerprint header and no Confluent magic byte 0x00 (the value starts with '{': JSON? Encode requests as Avro)`, -1},
		{"confluent without registry", []byte{0, 0, 0, 0, 1, 2}, nil, "starts with the Confluent magic byte 0x00 but no schema registry is configured", -1},
		{"bad fingerprint", body, fp("xyz"), `rv-schema-fingerprint header "xyz" is not 16 hex digits`, -1},
		{"unknown fingerprint", body, fp("9f3c0000000000aa"), "unknown schema fingerprint 9f3c0000000000aa (known: ", -1},
		{"conflicting fingerprints", body, append(fp(verdict.FingerprintHex()), fp("9f3c0000000000aa")...), "rv-schema-fingerprint header given twice with different values", -1},
		{"name disagrees", body, append(fp(verdict.FingerprintHex()), Header{Key: HeaderSchema, Value: []byte("com.other.Thing")}), `rv-schema header says "com.other.Thing" but the fingerprint is that of com.rulevalidator.v1.RuleVerdict`, -1},
		{"wrong schema's body", body, fp(mustSchema(t, c, DeadLetterSchema).FingerprintHex()), "avro: ", 0},
		{"truncated body", body[:20], fp(verdict.FingerprintHex()), "avro: ", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := s.Decode(context.Background(), "rv.verdicts", tc.value, tc.headers)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrUndecodable) || ev != nil {
				t.Fatalf("got %v, %v; want a *DecodeError", ev, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if de.Topic != "rv.verdicts" || !strings.Contains(err.Error(), `from topic "rv.verdicts"`) {
				t.Errorf("error does not name the topic: %v", err)
			}
			if (tc.offset < 0) != (de.Offset < 0) {
				t.Errorf("offset %d; want one only for Avro problems", de.Offset)
			}
		})
	}
}

func mustSchema(t testing.TB, c *Codecs, name string) *Schema {
	t.Helper()
	s, ok := c.Schema(name)
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	return s
}

func TestSerdeConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  SerdeConfig
		want string
	}{
		{"unknown format", SerdeConfig{Format: "xml"}, `unknown format "xml"`},
		{"confluent without registry", SerdeConfig{Format: FormatConfluent, Topics: testTopics}, "needs a schema registry"},
		{"confluent without topics", SerdeConfig{Format: FormatConfluent, Registry: &sr.Client{}}, "needs the topics to register"},
		{"unknown schema", SerdeConfig{Topics: map[string]string{"t": "com.rulevalidator.v1.Nope"}}, `topic "t": no schema named "com.rulevalidator.v1.Nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSerde(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSerdeConfluentRoundTrip(t *testing.T) {
	reg := newFakeRegistry(t)
	s := newConfluentSerde(t, reg)
	for topic, name := range testTopics {
		got, ok := reg.GetSchema(topic+"-value", 1)
		if !ok || got.Type != sr.TypeAvro || got.Schema.Schema != mustSchema(t, newTestCodecs(t), name).Text() {
			t.Errorf("subject %s-value: %+v, %v", topic, got, ok)
		}
	}
	fresh := newConfluentSerde(t, reg) // registers again: same ids
	readOnly, err := NewSerde(context.Background(), SerdeConfig{Registry: reg.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range sampleEvents() {
		t.Run(tc.name, func(t *testing.T) {
			topic := topicFor(tc.ev)
			value, headers, err := s.Encode(topic, tc.ev)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if value[0] != 0 || int(binary.BigEndian.Uint32(value[1:5])) != s.ids[topic] {
				t.Fatalf("framing % x, want 0x00 and id %d", value[:5], s.ids[topic])
			}
			assertEqual(t, headers, []Header{{Key: HeaderSchema, Value: []byte(tc.ev.SchemaName())}})
			for name, d := range map[string]*Serde{"registering serde": s, "second serde": fresh, "serde with an empty cache": readOnly} {
				got, err := d.Decode(context.Background(), topic, value, nil)
				if err != nil {
					t.Fatalf("%s: Decode: %v", name, err)
				}
				assertEqual(t, got, tc.ev)
			}
		})
	}
	// The cache-less serde asked for each of the five ids once; the
	// registering ones never asked.
	if n := reg.byID.Load(); n != 5 {
		t.Errorf("%d schema-by-id requests, want 5", n)
	}
}

// TestSerdeConfluentFetchesOnce: concurrent decodes of an id not yet cached
// ask the registry once between them.
func TestSerdeConfluentFetchesOnce(t *testing.T) {
	reg := newFakeRegistry(t)
	value, _, err := newConfluentSerde(t, reg).Encode("rv.verdicts", fullVerdict())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSerde(context.Background(), SerdeConfig{Registry: reg.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := d.Decode(context.Background(), "rv.verdicts", value, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.byID.Load(); n != 1 {
		t.Errorf("%d schema-by-id requests, want 1", n)
	}
}

// TestSerdeConfluentSharedFetchOutlivesItsFirstCaller: the registry fetch
// that concurrent decodes of one unknown id share is not the first caller's:
// that caller giving up (its context ends at a drain) returns at once and
// fails none of the others, who get the schema once the registry answers,
// from the one request.
func TestSerdeConfluentSharedFetchOutlivesItsFirstCaller(t *testing.T) {
	reg := newFakeRegistry(t)
	value, _, err := newConfluentSerde(t, reg).Encode("rv.verdicts", fullVerdict())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSerde(context.Background(), SerdeConfig{Registry: reg.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}, 8), make(chan struct{})
	var releaseOnce sync.Once
	answer := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(answer)
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool { // counted by newFakeRegistry's own
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			arrived <- struct{}{}
			<-release // a slow registry
		}
		return false
	})
	decode := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := d.Decode(ctx, "rv.verdicts", value, nil)
			done <- err
		}()
		return done
	}

	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := decode(firstCtx)
	<-arrived
	waiter := decode(context.Background())
	time.Sleep(100 * time.Millisecond) // the waiter joins the fetch in flight

	cancelFirst()
	select {
	case err := <-first:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled caller got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled caller kept waiting for the registry")
	}
	select {
	case err := <-waiter:
		t.Fatalf("the waiter returned (%v) when the first caller gave up; want it still waiting", err)
	case <-time.After(200 * time.Millisecond):
	}

	answer()
	select {
	case err := <-waiter:
		if err != nil {
			t.Fatalf("the waiter: %v, want the schema", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the schema once the registry answered")
	}
	if n := reg.byID.Load(); n != 1 {
		t.Errorf("%d schema-by-id requests, want 1 shared by both callers", n)
	}
}

func TestSerdeConfluentErrors(t *testing.T) {
	reg := newFakeRegistry(t)
	s := newConfluentSerde(t, reg)
	value, _, err := s.Encode("rv.verdicts", fullVerdict())
	if err != nil {
		t.Fatal(err)
	}
	foreignID, _, err := reg.RegisterSchema("other-value", sr.Schema{Schema: `{"type":"record","name":"Other","namespace":"com.example","fields":[{"name":"a","type":"string"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	jsonID, _, err := reg.RegisterSchema("json-value", sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	withID := func(id int, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), body...)
	}
	for _, tc := range []struct {
		name   string
		value  []byte
		want   string
		offset int
	}{
		{"too short", []byte{0, 0, 1}, "value too short for the Confluent wire format (3 bytes)", 3},
		{"unknown id", withID(4242, value[5:]), "schema id 4242 is not in the schema registry", 1},
		{"foreign schema", withID(foreignID, value[5:]), "is com.example.Other, not a rulevalidator event", 1},
		{"not avro", withID(jsonID, value[5:]), "is a JSON schema, not Avro", 1},
		{"bad body", append(bytes.Clone(value[:len(value)-1]), 0xff, 0xff), "avro: ", -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Decode(context.Background(), "rv.verdicts", tc.value, nil)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrUndecodable) {
				t.Fatalf("got %v, want a *DecodeError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || de.Format != FormatConfluent {
				t.Errorf("error %q (format %q) does not contain %q", err, de.Format, tc.want)
			}
			if tc.offset == -2 {
				if de.Offset < 5 {
					t.Errorf("offset %d does not count the 5-byte header", de.Offset)
				}
			} else if de.Offset != tc.offset {
				t.Errorf("offset %d, want %d", de.Offset, tc.offset)
			}
		})
	}
}

// TestSerdeConfluentRegistryDown: an unreachable registry is transient, not
// a dead letter.
func TestSerdeConfluentRegistryDown(t *testing.T) {
	reg := newFakeRegistry(t)
	value, _, err := newConfluentSerde(t, reg).Encode("rv.verdicts", fullVerdict())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSerde(context.Background(), SerdeConfig{Registry: reg.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	_, err = d.Decode(context.Background(), "rv.verdicts", value, nil)
	if !errors.Is(err, ErrRegistryUnavailable) || errors.Is(err, ErrUndecodable) {
		t.Fatalf("got %v, want ErrRegistryUnavailable", err)
	}
}

// TestSerdeConfluentWriterSchemaEvolved: a producer on a newer minor
// version of the verdict schema registers it; we read the fields we know.
func TestSerdeConfluentWriterSchemaEvolved(t *testing.T) {
	reg := newFakeRegistry(t)
	c := newTestCodecs(t)
	newer := strings.Replace(mustSchema(t, c, VerdictSchema).Text(), `"fields": [`, `"fields": [
    {"name": "calibrated_confidence", "type": ["null", "double"], "default": null, "doc": "A field from the future."},`, 1)
	id, _, err := reg.RegisterSchema("rv.verdicts-value", sr.Schema{Schema: newer})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := goavro.NewCodec(newer)
	if err != nil {
		t.Fatal(err)
	}
	native, _ := fullVerdict().native()
	native["calibrated_confidence"] = goavro.Union("double", 0.5)
	value, err := codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), native)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSerde(context.Background(), SerdeConfig{Registry: reg.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(context.Background(), "rv.verdicts", value, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, fullVerdict())
}

func ExampleSerde() {
	ctx := context.Background()
	serde, err := NewSerde(ctx, SerdeConfig{Topics: map[string]string{"rulevalidator.verdicts": VerdictSchema}})
	if err != nil {
		fmt.Println(err)
		return
	}
	verdict := VerdictEvent{
		EventID: VerdictEventID("acme", "req-1", "signed"), RequestID: "req-1", TenantID: "acme",
		RulesetID: "onboarding", Model: "gemma-3-270m", RuleID: "signed", RuleType: verdict.Boolean,
		DataSufficiency: true, Rationale: "Signed on page 2.", BooleanOutput: new(true),
		RuleIndex: 0, RuleCount: 1,
	}
	value, headers, err := serde.Encode("rulevalidator.verdicts", &verdict)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	decoded, err := serde.Decode(ctx, "rulevalidator.verdicts", value, headers)
	if err != nil {
		fmt.Println(err)
		return
	}
	v := decoded.(*VerdictEvent)
	fmt.Println(v.EventID, *v.BooleanOutput)

	_, err = serde.Decode(ctx, "rulevalidator.verdicts", value[:3], nil)
	fmt.Println(errors.Is(err, ErrUndecodable), err)
	// Output:
	// rv-schema: com.rulevalidator.v1.RuleVerdict
	// rv-schema-fingerprint: 206958b7aedd5500
	// acme/req-1/signed true
	// true schemas: cannot decode value from topic "rulevalidator.verdicts": no rv-schema-fingerprint header and no Confluent magic byte 0x00 (first byte 0x22)
}

// checkDecodeFailure fails t unless a failed decode gave no event and a
// *DecodeError or *RequestError.
func checkDecodeFailure(t *testing.T, ev Event, err error) {
	t.Helper()
	var de *DecodeError
	var re *RequestError
	if !errors.As(err, &de) && !errors.As(err, &re) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
	if ev != nil {
		t.Fatal("an event came with an error")
	}
}

// FuzzDecode: Decode never panics, fails only with typed errors, and what
// it accepts re-encodes to a value that decodes the same.
func FuzzDecode(f *testing.F) {
	reg := newFakeRegistry(f)
	s := newConfluentSerde(f, reg)
	plain := newPlainSerde(f)
	for _, tc := range sampleEvents() {
		topic := topicFor(tc.ev)
		for _, serde := range []*Serde{s, plain} {
			value, headers, err := serde.Encode(topic, tc.ev)
			if err != nil {
				f.Fatal(err)
			}
			fp := ""
			if len(headers) > 1 {
				fp = string(headers[1].Value)
			}
			f.Add(value, fp)
		}
	}
	f.Add([]byte{0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f}, "")
	f.Add([]byte{}, "zz")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, value []byte, fingerprint string) {
		var headers []Header
		if fingerprint != "" {
			headers = []Header{{Key: HeaderFingerprint, Value: []byte(fingerprint)}}
		}
		ev, err := s.Decode(ctx, "fuzz", value, headers)
		if err != nil {
			checkDecodeFailure(t, ev, err)
			return
		}
		again, againHeaders, err := plain.Encode(topicFor(ev), ev)
		if err != nil {
			t.Fatalf("re-encoding a decoded %s: %v", ev.SchemaName(), err)
		}
		back, err := plain.Decode(ctx, "fuzz", again, againHeaders)
		if err != nil {
			t.Fatalf("decoding a re-encoded %s: %v", ev.SchemaName(), err)
		}
		third, _, err := plain.Encode(topicFor(back), back)
		if err != nil || !bytes.Equal(third, again) {
			t.Fatalf("re-encoding is not stable: %v", err)
		}
	})
}
