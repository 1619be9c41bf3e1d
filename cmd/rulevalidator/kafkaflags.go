package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/sr"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

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

// kafkaConfig is how an operator command reaches the cluster and frames
// what it writes, named and read as serve's settings are.
type kafkaConfig struct {
	brokers        []string
	conn           kafkaConn
	wireFormat     string
	schemaRegistry []string
}

// client builds the stream client from the settings.
func (f *kafkaConfig) client() (*stream.Client, error) { return f.conn.client(f.brokers) }

// check reports every problem with the connection and wire format settings.
func (f *kafkaConfig) check() error {
	return errors.Join(checkKafka(f.brokers, f.conn), checkWireFormat(f.wireFormat, f.schemaRegistry))
}

// checkKafka reports a problem with the brokers or how to reach them.
func checkKafka(brokers []string, conn kafkaConn) error {
	if len(brokers) == 0 {
		return errors.New("--kafka-brokers: at least one broker is required")
	}
	_, err := conn.client(brokers)
	return err
}

// checkWireFormat reports a wire format that is unknown or lacks its registry.
// A command that only reads has none to check: both formats are read.
func checkWireFormat(format string, registry []string) error {
	switch schemas.Format(format) {
	case schemas.FormatPlain:
	case schemas.FormatConfluent:
		if len(registry) == 0 {
			return errors.New("--wire-format confluent needs --schema-registry")
		}
	default:
		return fmt.Errorf("--wire-format: %q is not plain or confluent", format)
	}
	return nil
}

// serde builds the wire format: topics maps each topic to be written to its
// schema (the confluent format registers them); decoding needs none.
func (f *kafkaConfig) serde(ctx context.Context, topics map[string]string) (*schemas.Serde, error) {
	cfg := schemas.SerdeConfig{Format: schemas.Format(f.wireFormat), Topics: topics}
	if cfg.Format == "" {
		cfg.Format = schemas.FormatPlain
	}
	if len(f.schemaRegistry) > 0 {
		client, err := sr.NewClient(sr.URLs(f.schemaRegistry...))
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
