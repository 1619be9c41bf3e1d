package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// produceBatch bounds the requests encoded and written at once, so that a
// large --count does not hold every message in memory.
const produceBatch = 500

// produceDoc is produce's --help.
var produceDoc = commandDoc{
	synopsis: "produce --file REQUEST.json|yaml [--tenant T] [--request-id ID] [--count N] [--json] [settings]",
	about: []string{
		"Sends a validation request to the requests topic, as an upstream pipeline would: Avro in the " +
			"chosen wire format, keyed by request_id, acknowledged by every in-sync replica, with a W3C " +
			"traceparent header. A missing request_id is generated and a missing submitted_at set to now. " +
			"Prints each request_id sent.",
		"The file holds the request's JSON form (YAML is read as the same structure):",
		`  {"tenant_id": "contoso", "ruleset_ref": {"id": "contract-review"},` + "\n" +
			`   "primary_docs": [{"name": "msa.pdf", "pages": ["page 1", "page 2"]}],` + "\n" +
			`   "named_inputs": [{"name": "approval_limit", "value": 250000}]}`,
		`A document may name a local file ({"file": "msa.pdf"}, relative to the request file), and each ` +
			"--document is one more primary document: the file (PDF, DOCX or text) is sent inline, in the " +
			"request's data field, and read by the service.",
	},
	exit: "0 sent, 2 invalid flags, settings or request (nothing sent), 1 Kafka failed.",
	examples: []string{
		"rulevalidator produce --file request.json --tenant contoso",
		"rulevalidator tail --request-id <the printed id>",
	},
}

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf       kafkaConfig
		topic    string
		maxBytes int
	)
	cl := newCommandLine("produce", produceDoc, produceSettings(&kf, &topic, &maxBytes), stderr)
	fs := cl.fs
	var documents fileList
	fs.Var(&documents, "document", "a document's `file` (PDF, DOCX or text), sent inline as a primary document; repeatable")
	var (
		file        = fs.String("file", "", "the request, JSON or YAML, in the JSON form of a validation request (required)")
		tenant      = fs.String("tenant", "", "tenant_id, overriding the file's")
		requestID   = fs.String("request-id", "", "request_id, overriding the file's; with --count, the prefix of the ids")
		traceparent = fs.String("traceparent", "", "W3C traceparent header to send (default: a new trace per request)")
		count       = fs.Int("count", 1, "how many copies to send, each with its own request_id (load demos)")
		asJSON      = fs.Bool("json", false, "print one JSON object per request: request_id, topic, partition, offset")
		strict      = fs.Bool("strict", true, "also check the inline ruleset and the inputs as the service will; false sends requests the service rejects (dead-letter demos)")
		timeout     = fs.Duration("timeout", 30*time.Second, "bound on each write, acknowledgements included")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	invalid := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "produce: "+format+"\n", a...)
		return exitInvalid
	}
	switch {
	case *file == "":
		fmt.Fprintln(stderr, "produce: --file is required")
		fs.Usage()
		return exitInvalid
	case *count < 1:
		return invalid("--count: %d must be at least 1", *count)
	case topic == "":
		return invalid("--requests-topic is required")
	case *timeout <= 0:
		return invalid("--timeout: %s must be positive", *timeout)
	}
	if err := kf.check(); err != nil {
		return cl.invalid(err)
	}
	if *traceparent != "" {
		if err := producer.CheckTraceparent(*traceparent); err != nil {
			return invalid("--traceparent: %v", err)
		}
	}

	base, readErr := readRequestFile(*file, documents, maxBytes)
	if base == nil {
		return invalid("%v", readErr)
	}
	if *tenant != "" {
		base.TenantID = *tenant
	}
	if *requestID != "" {
		base.RequestID = *requestID
	}
	if base.SubmittedAt.IsZero() {
		base.SubmittedAt = schemas.EventTime(time.Now())
	}
	reqs := requestCopies(base, *count)
	if err := request.JoinProblems(readErr, reqs[0].Validate()); err != nil {
		return invalid("%s: %v", *file, err)
	}
	if *strict {
		if err := judging.CheckRequest(reqs[0]); err != nil {
			return invalid("%s: %v", *file, err)
		}
	}

	client, err := kf.client()
	if err != nil {
		return invalid("%v", err)
	}
	defer client.Close()
	if _, err := client.Partitions(ctx, topic); err != nil {
		fmt.Fprintf(stderr, "produce: %v\n", err)
		return exitFailure
	}
	serde, err := kf.serde(ctx, map[string]string{topic: schemas.RequestSchema})
	if err != nil {
		fmt.Fprintf(stderr, "produce: %v\n", err)
		return exitFailure
	}
	acked := &positions{byID: map[string]stream.Record{}}
	// The one request writer, as the API's: the same record (key, wire
	// format, tenant and trace headers) and the stream writer's one
	// partitioner (murmur2 of the request id, as the Java client's default),
	// so the API and upstream producers put the same id on the same partition.
	w, err := producer.NewRequestWriter(ctx, producer.RequestWriterConfig{
		Client:       client,
		Topic:        topic,
		WriteTimeout: *timeout,
		Completed:    acked.completed,
	}, serde)
	if err != nil {
		fmt.Fprintf(stderr, "produce: %v\n", err)
		return exitFailure
	}
	defer w.Close()

	for start := 0; start < len(reqs); start += produceBatch {
		batch := reqs[start:min(start+produceBatch, len(reqs))]
		werr := writeRequests(ctx, w, batch, *traceparent, *timeout)
		for _, r := range batch {
			m, ok := acked.position(r.RequestID)
			if !ok {
				continue
			}
			if err := printProduced(stdout, m, *asJSON); err != nil {
				fmt.Fprintf(stderr, "produce: %v\n", err)
				return exitFailure
			}
		}
		if werr != nil {
			fmt.Fprintf(stderr, "produce: %v\n", werr)
			return exitFailure
		}
	}
	return exitOK
}

// requestCopies returns n requests like base, each with its own id: base's
// id alone when n is 1; base's id with a numbered suffix when it has one;
// otherwise a new random id for each.
func requestCopies(base *schemas.Request, n int) []*schemas.Request {
	out := make([]*schemas.Request, n)
	width := len(fmt.Sprint(n))
	for i := range out {
		r := *base
		switch {
		case n == 1 && r.RequestID != "":
		case base.RequestID != "":
			r.RequestID = fmt.Sprintf("%s-%0*d", base.RequestID, width, i+1)
		default:
			r.RequestID = producer.NewRequestID()
		}
		out[i] = &r
	}
	return out
}

func writeRequests(ctx context.Context, w *producer.RequestWriter, reqs []*schemas.Request, trace string, timeout time.Duration) error {
	subs := make([]producer.Submission, len(reqs))
	for i, r := range reqs {
		tp := trace
		if tp == "" {
			tp = producer.NewTraceparent()
		}
		subs[i] = producer.Submission{Request: r, Trace: producer.TraceHeaders(tp, "")}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return w.Write(ctx, subs...)
}

// positions remembers where each acknowledged request landed.
type positions struct {
	mu   sync.Mutex
	byID map[string]stream.Record
}

// completed records the partition and offset of acknowledged records; the
// writer calls it before Write returns.
func (p *positions) completed(recs []stream.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range recs {
		p.byID[string(m.Key)] = stream.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key}
	}
}

func (p *positions) position(id string) (stream.Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.byID[id]
	return m, ok
}

// producedLine is what `produce --json` prints for each request.
type producedLine struct {
	RequestID string `json:"request_id"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
}

func printProduced(w io.Writer, m stream.Record, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(w, string(m.Key))
		return err
	}
	data, err := json.Marshal(producedLine{RequestID: string(m.Key), Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
