// Package schemas holds the contracts rulevalidator shares with other
// systems. For the streaming service: the Avro schemas of its events
// (*.avsc, embedded), the Go event types and their conversions, the codecs,
// and the two wire formats, plain (schema fingerprint in headers) and
// Confluent (schema registry id in the value).
//
// The value types the events carry (rule types, evidence, aggregates,
// usage…) are package verdict's, which the engine produces too: one
// declaration of each field. The encoders of this package (Avro, JSON) write
// them field by field, so a field added there reaches the wire only when a
// contract names it.
package schemas

import (
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/linkedin/goavro/v2"
)

// Namespace is the Avro namespace of every event schema. A breaking change
// gets a new namespace (v2); compatible changes (new fields with defaults)
// stay in this one.
const Namespace = "com.rulevalidator.v1"

// Full names of the event schemas.
const (
	RequestSchema    = Namespace + ".ValidationRequest"
	VerdictSchema    = Namespace + ".RuleVerdict"
	SummarySchema    = Namespace + ".ValidationSummary"
	DeadLetterSchema = Namespace + ".DeadLetter"
	ReviewSchema     = Namespace + ".Review"
)

//go:embed validation_request.avsc rule_verdict.avsc validation_summary.avsc dead_letter.avsc review.avsc
var avroFiles embed.FS

// avroFileNames lists the embedded schema files, in the order Codecs lists them.
func avroFileNames() []string {
	return []string{"validation_request.avsc", "rule_verdict.avsc", "validation_summary.avsc", "dead_letter.avsc", "review.avsc"}
}

// Schema is one Avro schema with its codec. It is safe for concurrent use.
type Schema struct {
	name        string
	text        string
	canonical   string
	fingerprint uint64
	codec       *goavro.Codec
	shape       *shape
}

// newSchema parses an Avro schema whose top level is a named record.
func newSchema(text string) (*Schema, error) {
	codec, err := goavro.NewCodec(text)
	if err != nil {
		return nil, err
	}
	sh, err := compileShape(text)
	if err != nil {
		return nil, err
	}
	if sh.kind != kindRecord {
		return nil, errors.New("the schema is not a record")
	}
	canonical := canonicalForm(codec)
	return &Schema{name: sh.name, text: text, canonical: canonical, fingerprint: rabin([]byte(canonical)), codec: codec, shape: sh}, nil
}

// primitiveObject matches a primitive written as an object in goavro's
// canonical form. In Parsing Canonical Form nothing else is an object whose
// only member is "type", and no name or symbol can hold braces or quotes.
var primitiveObject = regexp.MustCompile(`\{"type":"(null|boolean|int|long|float|double|bytes|string)"\}`)

// canonicalForm is the schema's Parsing Canonical Form as the Avro spec
// defines it. goavro's CanonicalSchema keeps {"type":"long"} where a field
// had a logical type (linkedin/goavro#174), which the spec (and Java, and
// fastavro) reduce to "long"; its fingerprints then match no other
// implementation's.
func canonicalForm(codec *goavro.Codec) string {
	return primitiveObject.ReplaceAllString(codec.CanonicalSchema(), `"$1"`)
}

// rabin is the CRC-64-AVRO fingerprint the Avro spec defines.
func rabin(data []byte) uint64 {
	const empty = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := uint64(empty)
	for _, b := range data {
		fp = (fp >> 8) ^ table[byte(fp)^b]
	}
	return fp
}

// Name is the schema's full name, such as com.rulevalidator.v1.RuleVerdict.
func (s *Schema) Name() string { return s.name }

// Text is the schema as written, docs included.
func (s *Schema) Text() string { return s.text }

// Canonical is the schema's Parsing Canonical Form.
func (s *Schema) Canonical() string { return s.canonical }

// Fingerprint is the CRC-64-AVRO (Rabin) fingerprint of the canonical form.
func (s *Schema) Fingerprint() uint64 { return s.fingerprint }

// FingerprintHex is the fingerprint as the rv-schema-fingerprint header
// carries it: its 8 bytes in little-endian order, in hex, which is what
// Java's SchemaNormalization.parsingFingerprint and fastavro's
// schema.fingerprint give.
func (s *Schema) FingerprintHex() string {
	return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, s.fingerprint))
}

// Codecs holds the event schemas and their codecs, built once. It is safe
// for concurrent use.
type Codecs struct {
	list          []*Schema
	byName        map[string]*Schema
	byFingerprint map[uint64]*Schema
}

// NewCodecs parses the embedded event schemas.
func NewCodecs() (*Codecs, error) {
	c := &Codecs{byName: map[string]*Schema{}, byFingerprint: map[uint64]*Schema{}}
	for _, file := range avroFileNames() {
		text, err := avroFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s, err := newSchema(string(text))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", file, err)
		}
		c.list = append(c.list, s)
		c.byName[s.name] = s
		c.byFingerprint[s.Fingerprint()] = s
	}
	return c, nil
}

// Schemas lists the event schemas: request, verdict, summary, dead letter,
// review.
func (c *Codecs) Schemas() []*Schema { return slices.Clone(c.list) }

// Schema returns the event schema with the given full name.
func (c *Codecs) Schema(name string) (*Schema, bool) {
	s, ok := c.byName[name]
	return s, ok
}

// ByFingerprint returns the event schema with the given fingerprint.
func (c *Codecs) ByFingerprint(fp uint64) (*Schema, bool) {
	s, ok := c.byFingerprint[fp]
	return s, ok
}

// Marshal encodes v as an Avro binary body (no framing).
func (c *Codecs) Marshal(v Event) ([]byte, error) {
	s, ok := c.byName[v.SchemaName()]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema named %s", v.SchemaName())
	}
	return s.marshal(nil, v)
}

// Unmarshal decodes an Avro binary body written with the named event schema.
// Errors are *DecodeError (malformed body) or *RequestError (a request
// whose fields contradict each other).
func (c *Codecs) Unmarshal(name string, body []byte) (Event, error) {
	s, ok := c.byName[name]
	if !ok {
		return nil, &DecodeError{Offset: -1, Problem: fmt.Sprintf("no schema named %s", name)}
	}
	return s.unmarshal(body, 0)
}

// marshal appends v's Avro binary encoding to buf. The result is checked as
// a reader would check it, so nothing is published that a consumer (or this
// package) would refuse, such as a string that is not UTF-8.
func (s *Schema) marshal(buf []byte, v Event) ([]byte, error) {
	if v.SchemaName() != s.name {
		return nil, fmt.Errorf("schemas: cannot encode a %s event with schema %s", v.SchemaName(), s.name)
	}
	m, err := v.native()
	if err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	start := len(buf)
	out, err := s.codec.BinaryFromNative(buf, m)
	if err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	if err := checkBinary(s.shape, out[start:], 0); err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	return out, nil
}

// unmarshal decodes body; base is where body starts in the Kafka value, so
// error offsets count from the start of the value.
func (s *Schema) unmarshal(body []byte, base int) (Event, error) {
	// Checked before goavro reads it: goavro sizes arrays by the block count
	// it reads, so a few crafted bytes could make it allocate gigabytes.
	if err := checkBinary(s.shape, body, base); err != nil {
		var be *binaryError
		if errors.As(err, &be) {
			return nil, &DecodeError{Schema: s.name, Offset: be.offset, Problem: be.Error(), Err: err}
		}
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: err.Error(), Err: err}
	}
	native, _, err := s.codec.NativeFromBinary(body)
	if err != nil {
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: "avro: " + err.Error(), Err: err}
	}
	rec, ok := native.(map[string]any)
	if !ok {
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: fmt.Sprintf("decoded a %T, not a record", native)}
	}
	ev, err := eventFromNative(s.name, rec)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: err.Error(), Err: err}
	}
	return ev, nil
}
