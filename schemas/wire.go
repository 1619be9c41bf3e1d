package schemas

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

// Header is a Kafka record header: the one header type of the service.
// stream.Record carries it (stream.Header is this type), so headers pass
// between records, Serde and dead letters as they are; it is declared here
// so that the contracts depend on no Kafka client.
type Header struct {
	Key   string
	Value []byte
}

// Headers the plain wire format sets.
const (
	// HeaderSchema carries the full name of the value's schema.
	HeaderSchema = "rv-schema"
	// HeaderFingerprint carries the schema's fingerprint (Schema.FingerprintHex).
	HeaderFingerprint = "rv-schema-fingerprint"
)

// Format is how a value is framed on the wire.
type Format string

const (
	// FormatPlain: the value is the Avro body alone; headers name the schema
	// and carry its fingerprint.
	FormatPlain Format = "plain"
	// FormatConfluent: byte 0x00, the registry's 4-byte big-endian schema
	// id, then the Avro body.
	FormatConfluent Format = "confluent"
)

const (
	confluentMagic  = 0x00
	confluentHeader = 5
)

// ErrUndecodable marks a value that cannot be read as an event; see
// DecodeError. Such a value will never decode, so it belongs in the dead
// letters.
var ErrUndecodable = errors.New("undecodable message")

// ErrRegistryUnavailable marks a failure to reach the schema registry: the
// value may decode once it answers, so retry rather than dead-letter.
var ErrRegistryUnavailable = errors.New("schema registry unavailable")

// DecodeError says why a value could not be decoded. It matches
// errors.Is(err, ErrUndecodable).
type DecodeError struct {
	Topic string
	// Format is the wire format detected; empty when none was.
	Format Format
	// Schema is the full name of the writer's schema, when known.
	Schema string
	// SchemaID is the registry's schema id (Confluent format), else 0.
	SchemaID int
	// Offset is the byte offset in the value where reading failed, -1 when
	// the problem has no position.
	Offset  int
	Problem string
	// Err is the underlying error, if any.
	Err error
}

func (e *DecodeError) Error() string {
	var where []string
	if e.Format != "" {
		where = append(where, string(e.Format))
	}
	if e.SchemaID != 0 {
		where = append(where, fmt.Sprintf("schema id %d", e.SchemaID))
	}
	if e.Schema != "" {
		where = append(where, e.Schema)
	}
	msg := "schemas: cannot decode value"
	if e.Topic != "" {
		msg += fmt.Sprintf(" from topic %q", e.Topic)
	}
	if len(where) > 0 {
		msg += " (" + strings.Join(where, ", ") + ")"
	}
	return msg + ": " + e.Problem
}

// Is makes errors.Is(err, ErrUndecodable) hold.
func (e *DecodeError) Is(target error) bool { return target == ErrUndecodable }

func (e *DecodeError) Unwrap() error { return e.Err }

// SerdeConfig configures a Serde.
type SerdeConfig struct {
	// Format is how Encode frames values; Decode reads both formats.
	// Default FormatPlain.
	Format Format
	// Registry is the schema registry. FormatConfluent needs it; without it
	// Decode reads only plain values.
	Registry *sr.Client
	// Topics maps each topic Encode writes to the full name of the schema
	// its values carry. With FormatConfluent every topic Encode writes must
	// be listed: NewSerde registers its schema under the subject
	// <topic>-value (TopicNameStrategy). With FormatPlain it is optional
	// and, where given, checked by Encode.
	Topics map[string]string
	// Codecs are the event codecs; nil builds them.
	Codecs *Codecs
}

func (c *SerdeConfig) setDefaults() error {
	if c.Format == "" {
		c.Format = FormatPlain
	}
	if c.Codecs == nil {
		codecs, err := NewCodecs()
		if err != nil {
			return err
		}
		c.Codecs = codecs
	}
	return nil
}

// Validate checks the configuration.
func (c *SerdeConfig) Validate() error {
	switch c.Format {
	case FormatPlain, "":
	case FormatConfluent:
		if c.Registry == nil {
			return errors.New("schemas: the confluent format needs a schema registry (SerdeConfig.Registry)")
		}
		if len(c.Topics) == 0 {
			return errors.New("schemas: the confluent format needs the topics to register (SerdeConfig.Topics)")
		}
	default:
		return fmt.Errorf("schemas: unknown format %q (want %s or %s)", c.Format, FormatPlain, FormatConfluent)
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Topics)) {
		name := c.Topics[topic]
		if topic == "" {
			return errors.New("schemas: SerdeConfig.Topics has an empty topic name")
		}
		if c.Codecs != nil {
			if _, ok := c.Codecs.Schema(name); !ok {
				return fmt.Errorf("schemas: topic %q: no schema named %q", topic, name)
			}
		}
	}
	return nil
}

// Serde encodes events for topics and decodes values in either wire format.
// It is safe for concurrent use.
type Serde struct {
	codecs   *Codecs
	format   Format
	registry *sr.Client
	topics   map[string]string
	// ids is the registered schema id of each topic (confluent format).
	ids map[string]int

	mu    sync.RWMutex
	byID  map[int]*Schema
	fetch singleflight.Group
}

// NewSerde checks cfg and, for the confluent format, registers each topic's
// schema with the registry.
func NewSerde(ctx context.Context, cfg SerdeConfig) (*Serde, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Serde{
		codecs:   cfg.Codecs,
		format:   cfg.Format,
		registry: cfg.Registry,
		topics:   map[string]string{},
		ids:      map[string]int{},
		byID:     map[int]*Schema{},
	}
	maps.Copy(s.topics, cfg.Topics)
	if s.format == FormatConfluent {
		for _, topic := range slices.Sorted(maps.Keys(s.topics)) {
			schema, _ := s.codecs.Schema(s.topics[topic])
			subject := topic + "-value"
			id, err := s.registry.RegisterSchema(ctx, subject, sr.Schema{Schema: schema.Text(), Type: sr.TypeAvro}, -1, -1)
			if err != nil {
				return nil, fmt.Errorf("schemas: registering %s under subject %q: %w", schema.Name(), subject, err)
			}
			s.ids[topic] = id
			s.byID[id] = schema
		}
	}
	return s, nil
}

// Encode frames v for topic in the configured format. The headers are to be
// sent with the value: the plain format needs them to be read back.
func (s *Serde) Encode(topic string, v Event) (value []byte, headers []Header, err error) {
	schema, ok := s.codecs.Schema(v.SchemaName())
	if !ok {
		return nil, nil, fmt.Errorf("schemas: no schema named %s", v.SchemaName())
	}
	if want, ok := s.topics[topic]; ok && want != schema.Name() {
		return nil, nil, fmt.Errorf("schemas: topic %q carries %s, not %s", topic, want, schema.Name())
	}
	headers = []Header{{Key: HeaderSchema, Value: []byte(schema.Name())}}
	switch s.format {
	case FormatConfluent:
		id, ok := s.ids[topic]
		if !ok {
			return nil, nil, fmt.Errorf("schemas: topic %q has no registered schema: list it in SerdeConfig.Topics", topic)
		}
		value = binary.BigEndian.AppendUint32([]byte{confluentMagic}, uint32(id))
		value, err = schema.marshal(value, v)
	default:
		headers = append(headers, Header{Key: HeaderFingerprint, Value: []byte(schema.FingerprintHex())})
		value, err = schema.marshal(nil, v)
	}
	if err != nil {
		return nil, nil, err
	}
	return value, headers, nil
}

// Decode reads a value in either wire format: a rv-schema-fingerprint header
// means plain; otherwise a value starting with 0x00 is read as Confluent
// framing when a registry is configured. The event is a *Request,
// *VerdictEvent, *SummaryEvent or *DeadLetter.
//
// Errors: *DecodeError (matching ErrUndecodable) when the value cannot be
// read; *RequestError (matching ErrInvalidRequest) for a readable request
// whose fields are missing or contradictory; an error wrapping
// ErrRegistryUnavailable, or ctx's error, when the registry could not be
// asked for an unknown schema id.
func (s *Serde) Decode(ctx context.Context, topic string, value []byte, headers []Header) (Event, error) {
	ev, err := s.decode(ctx, value, headers)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Topic = topic
		}
		return nil, err
	}
	return ev, nil
}

func (s *Serde) decode(ctx context.Context, value []byte, headers []Header) (Event, error) {
	fingerprint, hasFingerprint, err := singleHeader(headers, HeaderFingerprint)
	if err != nil {
		return nil, &DecodeError{Format: FormatPlain, Offset: -1, Problem: err.Error()}
	}
	if hasFingerprint {
		return s.decodePlain(value, headers, fingerprint)
	}
	if len(value) > 0 && value[0] == confluentMagic && s.registry != nil {
		return s.decodeConfluent(ctx, value)
	}
	return nil, &DecodeError{Offset: -1, Problem: undetected(value, s.registry != nil)}
}

// undetected explains why neither wire format applies.
func undetected(value []byte, haveRegistry bool) string {
	switch {
	case len(value) == 0:
		return "empty value and no " + HeaderFingerprint + " header"
	case value[0] == confluentMagic:
		return "no " + HeaderFingerprint + " header, and the value starts with the Confluent magic byte 0x00 but no schema registry is configured"
	case value[0] == '{' || value[0] == '[':
		return fmt.Sprintf("no %s header and no Confluent magic byte 0x00 (the value starts with %q: JSON? Encode requests as Avro)", HeaderFingerprint, value[0])
	default:
		return fmt.Sprintf("no %s header and no Confluent magic byte 0x00 (first byte 0x%02x)", HeaderFingerprint, value[0])
	}
}

func (s *Serde) decodePlain(value []byte, headers []Header, fingerprint []byte) (Event, error) {
	fail := func(schema, format string, args ...any) error {
		return &DecodeError{Format: FormatPlain, Schema: schema, Offset: -1, Problem: fmt.Sprintf(format, args...)}
	}
	raw, err := hex.DecodeString(string(fingerprint))
	if err != nil || len(raw) != 8 {
		return nil, fail("", "%s header %q is not 16 hex digits", HeaderFingerprint, truncate(string(fingerprint), 40))
	}
	schema, ok := s.codecs.ByFingerprint(binary.LittleEndian.Uint64(raw))
	if !ok {
		return nil, fail("", "unknown schema fingerprint %s (known: %s)", strings.ToLower(string(fingerprint)), s.knownFingerprints())
	}
	name, hasName, err := singleHeader(headers, HeaderSchema)
	if err != nil {
		return nil, fail(schema.Name(), "%v", err)
	}
	if hasName && string(name) != schema.Name() {
		return nil, fail(schema.Name(), "%s header says %q but the fingerprint is that of %s", HeaderSchema, truncate(string(name), 80), schema.Name())
	}
	ev, err := schema.unmarshal(value, 0)
	return ev, withFormat(err, FormatPlain, 0)
}

func (s *Serde) decodeConfluent(ctx context.Context, value []byte) (Event, error) {
	if len(value) < confluentHeader {
		return nil, &DecodeError{Format: FormatConfluent, Offset: len(value),
			Problem: fmt.Sprintf("value too short for the Confluent wire format (%d bytes)", len(value))}
	}
	id := int(binary.BigEndian.Uint32(value[1:confluentHeader]))
	schema, err := s.schemaByID(ctx, id)
	if err != nil {
		return nil, withFormat(err, FormatConfluent, id)
	}
	ev, err := schema.unmarshal(value[confluentHeader:], confluentHeader)
	return ev, withFormat(err, FormatConfluent, id)
}

// registryTimeout bounds one schema fetch, shared by every decode waiting
// for it.
const registryTimeout = 30 * time.Second

// schemaByID returns the writer's schema for a registry id, asking the
// registry once per id and caching what it says. The fetch is shared by every
// caller waiting for the id, so it runs detached from any one of them (with
// its own timeout): a caller whose ctx ends (a drain) stops waiting, the
// others and the fetch go on.
func (s *Serde) schemaByID(ctx context.Context, id int) (*Schema, error) {
	s.mu.RLock()
	schema, ok := s.byID[id]
	s.mu.RUnlock()
	if ok {
		return schema, nil
	}
	shared := context.WithoutCancel(ctx)
	fetched := s.fetch.DoChan(strconv.Itoa(id), func() (any, error) {
		s.mu.RLock()
		schema, ok := s.byID[id]
		s.mu.RUnlock()
		if ok {
			return schema, nil
		}
		fctx, cancel := context.WithTimeout(shared, registryTimeout)
		defer cancel()
		schema, err := s.fetchSchema(fctx, id)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.byID[id] = schema
		s.mu.Unlock()
		return schema, nil
	})
	select {
	case r := <-fetched:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Schema), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("schemas: fetching schema id %d: %w", id, context.Cause(ctx))
	}
}

func (s *Serde) fetchSchema(ctx context.Context, id int) (*Schema, error) {
	fail := func(format string, args ...any) error {
		return &DecodeError{Offset: 1, Problem: fmt.Sprintf(format, args...)}
	}
	got, err := s.registry.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusNotFound || re.ErrorCode == sr.ErrSchemaNotFound.Code) {
			return nil, fail("schema id %d is not in the schema registry", id)
		}
		// ctx is the fetch's own: its end is the registry not answering in time.
		return nil, fmt.Errorf("%w: fetching schema id %d: %v", ErrRegistryUnavailable, id, err)
	}
	if got.Type != sr.TypeAvro {
		return nil, fail("schema id %d is a %s schema, not Avro", id, got.Type)
	}
	if len(got.References) > 0 {
		return nil, fail("schema id %d references other schemas, which rulevalidator events never do", id)
	}
	writer, err := newSchema(got.Schema)
	if err != nil {
		return nil, fail("schema id %d does not parse: %v", id, err)
	}
	// Our own schema, registered by someone else: use our codec.
	if known, ok := s.codecs.ByFingerprint(writer.Fingerprint()); ok {
		return known, nil
	}
	// Another version of one of our schemas: decode with the writer's
	// schema; the conversion reads the fields it knows.
	if _, ok := s.codecs.Schema(writer.Name()); ok {
		return writer, nil
	}
	return nil, fail("schema id %d is %s, not a rulevalidator event", id, writer.Name())
}

// withFormat fills in where a decode error came from.
func withFormat(err error, format Format, id int) error {
	var de *DecodeError
	if errors.As(err, &de) {
		de.Format, de.SchemaID = format, id
	}
	return err
}

func (s *Serde) knownFingerprints() string {
	var known []string
	for _, schema := range s.codecs.Schemas() {
		known = append(known, schema.FingerprintHex()+" "+schema.Name())
	}
	return strings.Join(known, ", ")
}

// singleHeader returns the value of the header named key; the same key
// given twice with different values is an error.
func singleHeader(headers []Header, key string) (value []byte, found bool, err error) {
	for _, h := range headers {
		if h.Key != key {
			continue
		}
		if found && string(h.Value) != string(value) {
			return nil, false, fmt.Errorf("%s header given twice with different values", key)
		}
		value, found = h.Value, true
	}
	return value, found, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
