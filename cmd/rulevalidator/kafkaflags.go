package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/sr"

	"rulevalidator/schemas"
)

// Defaults and environment variables the operator commands share with serve.
const (
	defaultBrokers  = "127.0.0.1:9092"
	envBrokers      = "RULEVALIDATOR_KAFKA_BROKERS"
	envWireFormat   = "RULEVALIDATOR_WIRE_FORMAT"
	envRegistryURLs = "RULEVALIDATOR_SCHEMA_REGISTRY"
)

// serviceTopic is one of the service's topics: its short name on the command
// line, and the environment variable and default serve uses for it.
type serviceTopic struct {
	alias, env, def string
}

var (
	topicRequests   = serviceTopic{"requests", "RULEVALIDATOR_TOPIC_REQUESTS", "rulevalidator.requests"}
	topicVerdicts   = serviceTopic{"verdicts", "RULEVALIDATOR_TOPIC_VERDICTS", "rulevalidator.verdicts"}
	topicSummaries  = serviceTopic{"summaries", "RULEVALIDATOR_TOPIC_SUMMARIES", "rulevalidator.summaries"}
	topicDeadLetter = serviceTopic{"deadletter", "RULEVALIDATOR_TOPIC_DEADLETTER", "rulevalidator.deadletter"}
	topicRulesets   = serviceTopic{"rulesets", "RULEVALIDATOR_TOPIC_RULESETS", "rulevalidator.rulesets"}
)

// name is the topic's name in this environment.
func (t serviceTopic) name(getenv env) string { return orEnv(getenv, t.env, t.def) }

// kafkaFlags are the connection flags of the operator commands, named as in
// serve's configuration and read from the same environment variables.
type kafkaFlags struct {
	brokers        string
	wireFormat     string
	schemaRegistry string
}

// registerBrokers adds --brokers (and --kafka-brokers, serve's name for it).
func (f *kafkaFlags) registerBrokers(fs *flag.FlagSet, getenv env) {
	def := orEnv(getenv, envBrokers, defaultBrokers)
	fs.StringVar(&f.brokers, "brokers", def, "Kafka bootstrap brokers, comma-separated (env "+envBrokers+")")
	fs.StringVar(&f.brokers, "kafka-brokers", def, "same as --brokers")
}

// registerWireFormat adds --wire-format and --schema-registry, for commands
// that encode events.
func (f *kafkaFlags) registerWireFormat(fs *flag.FlagSet, getenv env) {
	fs.StringVar(&f.wireFormat, "wire-format", orEnv(getenv, envWireFormat, string(schemas.FormatPlain)),
		"how values are framed: plain (Avro, fingerprint header) or confluent (schema registry ids) (env "+envWireFormat+")")
	f.registerSchemaRegistry(fs, getenv)
}

// registerSchemaRegistry adds --schema-registry alone, for commands that
// only decode: both wire formats are read, the confluent one with a registry.
func (f *kafkaFlags) registerSchemaRegistry(fs *flag.FlagSet, getenv env) {
	fs.StringVar(&f.schemaRegistry, "schema-registry", getenv(envRegistryURLs),
		"schema registry URLs, comma-separated; needed by the confluent format (env "+envRegistryURLs+")")
}

// brokerList is --brokers split at commas.
func (f *kafkaFlags) brokerList() []string { return splitList(f.brokers) }

// check reports the first problem with the connection flags.
func (f *kafkaFlags) check() error {
	if len(f.brokerList()) == 0 {
		return errors.New("--brokers: at least one broker is required")
	}
	switch schemas.Format(f.wireFormat) {
	case "", schemas.FormatPlain:
	case schemas.FormatConfluent:
		if len(splitList(f.schemaRegistry)) == 0 {
			return errors.New("--wire-format confluent needs --schema-registry")
		}
	default:
		return fmt.Errorf("--wire-format: %q is not plain or confluent", f.wireFormat)
	}
	return nil
}

// serde builds the wire format: topics maps each topic to be written to its
// schema (the confluent format registers them); decoding needs none.
func (f *kafkaFlags) serde(ctx context.Context, topics map[string]string) (*schemas.Serde, error) {
	cfg := schemas.SerdeConfig{Format: schemas.Format(f.wireFormat), Topics: topics}
	if cfg.Format == "" {
		cfg.Format = schemas.FormatPlain
	}
	if urls := splitList(f.schemaRegistry); len(urls) > 0 {
		client, err := sr.NewClient(sr.URLs(urls...))
		if err != nil {
			return nil, fmt.Errorf("--schema-registry: %w", err)
		}
		cfg.Registry = client
	}
	serde, err := schemas.NewSerde(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up the %s wire format: %w", cfg.Format, err)
	}
	return serde, nil
}

// errNoTopic marks a topic the brokers do not have.
var errNoTopic = errors.New("no such topic")

// topicPartitions asks the brokers, in turn, for the partitions of topic.
// Unlike a metadata request from kafka.Conn, kafka.Client's never creates
// the topic.
func topicPartitions(ctx context.Context, brokers []string, topic string) ([]int, error) {
	transport := &kafka.Transport{DialTimeout: 10 * time.Second, ClientID: "rulevalidator-cli"}
	defer transport.CloseIdleConnections()
	var errs []error
	for _, broker := range brokers {
		client := &kafka.Client{Addr: kafka.TCP(broker), Transport: transport, Timeout: 10 * time.Second}
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %s: %w", broker, err))
			continue
		}
		for _, t := range meta.Topics {
			if t.Name != topic {
				continue
			}
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("topic %q: %w on %s", topic, errNoTopic, strings.Join(brokers, ","))
			}
			if t.Error != nil {
				return nil, fmt.Errorf("topic %q: %w", topic, t.Error)
			}
			ids := make([]int, len(t.Partitions))
			for i, p := range t.Partitions {
				ids[i] = p.ID
			}
			slices.Sort(ids)
			if len(ids) == 0 {
				return nil, fmt.Errorf("topic %q has no partitions", topic)
			}
			return ids, nil
		}
		return nil, fmt.Errorf("topic %q: %w on %s", topic, errNoTopic, strings.Join(brokers, ","))
	}
	return nil, fmt.Errorf("no broker of %s answered: %w", strings.Join(brokers, ","), errors.Join(errs...))
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parseFlags parses args, reporting through code when the command should
// stop: --help (exit 0) or a bad flag (exit 2, the flag package has said why).
// Positional arguments are refused unless allowArgs.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, allowArgs bool) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitInvalid, false
	}
	if !allowArgs && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		return exitInvalid, false
	}
	return 0, true
}
