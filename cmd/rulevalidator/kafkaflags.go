package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Defaults and environment variables the operator commands share with serve.
const (
	defaultBrokers  = "127.0.0.1:9092"
	envBrokers      = "RULEVALIDATOR_KAFKA_BROKERS"
	envClientID     = "RULEVALIDATOR_KAFKA_CLIENT_ID"
	envKafkaTLS     = "RULEVALIDATOR_KAFKA_TLS"
	envKafkaTLSCA   = "RULEVALIDATOR_KAFKA_TLS_CA"
	envSASLMech     = "RULEVALIDATOR_KAFKA_SASL_MECHANISM"
	envSASLUser     = "RULEVALIDATOR_KAFKA_SASL_USERNAME"
	envSASLPassword = "RULEVALIDATOR_KAFKA_SASL_PASSWORD"
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

// kafkaConn is how to reach the cluster beyond the brokers: the client id,
// TLS and SASL, shared by serve and the operator commands.
type kafkaConn struct {
	clientID      string
	tls           bool
	tlsCAFile     string
	saslMechanism string
	saslUsername  string
	saslPassword  string
}

// client checks the connection settings once and builds the stream client
// every Kafka part is built on.
func (k kafkaConn) client(brokers []string) (*stream.Client, error) {
	cfg := stream.ClientConfig{
		Brokers:  brokers,
		ClientID: k.clientID,
		SASL:     stream.SASLConfig{Mechanism: k.saslMechanism, Username: k.saslUsername, Password: k.saslPassword},
	}
	if k.tls || k.tlsCAFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if k.tlsCAFile != "" {
			pem, err := os.ReadFile(k.tlsCAFile)
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--kafka-tls-ca: %s holds no PEM certificate", k.tlsCAFile)
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	return stream.NewClient(cfg)
}

// kafkaSettings binds serve's Kafka connection settings to k.
func kafkaSettings(s *settings, k *kafkaConn) {
	s.str(&k.clientID, "kafka-client-id", envClientID, stream.DefaultClientID, "client id the brokers see (logs, quotas)")
	s.boolean(&k.tls, "kafka-tls", envKafkaTLS, "false", "connect to the brokers over TLS (system roots unless --kafka-tls-ca)")
	s.str(&k.tlsCAFile, "kafka-tls-ca", envKafkaTLSCA, "", "PEM file of the CA that signs the brokers' certificates; implies --kafka-tls")
	s.str(&k.saslMechanism, "kafka-sasl-mechanism", envSASLMech, "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none")
	s.str(&k.saslUsername, "kafka-sasl-username", envSASLUser, "", "SASL user name")
	s.secret(&k.saslPassword, "kafka-sasl-password", envSASLPassword, "SASL password")
}

// kafkaFlags are the connection flags of the operator commands, named as in
// serve's configuration and read from the same environment variables.
type kafkaFlags struct {
	brokers        string
	wireFormat     string
	schemaRegistry string
	conn           kafkaConn
}

// registerBrokers adds --brokers (and --kafka-brokers, serve's name for it)
// and the TLS and SASL flags.
func (f *kafkaFlags) registerBrokers(fs *flag.FlagSet, getenv env) {
	def := orEnv(getenv, envBrokers, defaultBrokers)
	fs.StringVar(&f.brokers, "brokers", def, "Kafka bootstrap brokers, comma-separated (env "+envBrokers+")")
	fs.StringVar(&f.brokers, "kafka-brokers", def, "same as --brokers")
	fs.StringVar(&f.conn.clientID, "kafka-client-id", orEnv(getenv, envClientID, stream.DefaultClientID), "client id the brokers see (env "+envClientID+")")
	fs.BoolVar(&f.conn.tls, "kafka-tls", getenv(envKafkaTLS) == "true", "connect over TLS (env "+envKafkaTLS+")")
	fs.StringVar(&f.conn.tlsCAFile, "kafka-tls-ca", getenv(envKafkaTLSCA), "PEM file of the brokers' CA; implies --kafka-tls (env "+envKafkaTLSCA+")")
	fs.StringVar(&f.conn.saslMechanism, "kafka-sasl-mechanism", getenv(envSASLMech), "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (env "+envSASLMech+")")
	fs.StringVar(&f.conn.saslUsername, "kafka-sasl-username", getenv(envSASLUser), "SASL user name (env "+envSASLUser+")")
	// The password is read from the environment only, never from a flag that ps shows.
	f.conn.saslPassword = getenv(envSASLPassword)
}

// client builds the stream client from the flags.
func (f *kafkaFlags) client() (*stream.Client, error) { return f.conn.client(f.brokerList()) }

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
	if _, err := f.client(); err != nil {
		return err
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
