package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
)

// tailDoc is tail's --help.
var tailDoc = commandDoc{
	synopsis: "tail [--topics verdicts,summaries,deadletter] [--from beginning|end] [--request-id ID] [--json] [--follow] [--max N] [settings]",
	about: []string{
		"Reads the service's topics, every partition, without a consumer group (nothing is committed), " +
			"decodes each record in either wire format and prints it: one line per verdict, summary, dead " +
			"letter or request, or with --json one JSON object per line. A record that cannot be decoded is " +
			"printed with the reason, and reading goes on. Stops after --max records, after --timeout without " +
			"a new one, or with --follow on Ctrl-C.",
	},
	exit: "0 done, 2 invalid flags or settings, 1 a topic could not be read.",
	examples: []string{
		"rulevalidator tail --request-id r-1",
		"rulevalidator tail --topics deadletter --from end --follow --json",
	},
}

// tailTopicNames are the service's topics that tail knows by short name.
type tailTopicNames struct {
	requests, verdicts, summaries, deadLetter string
}

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf    kafkaConfig
		names tailTopicNames
	)
	cl := newCommandLine("tail", tailDoc, tailSettings(&kf, &names), stderr)
	fs := cl.fs
	var (
		topics    = fs.String("topics", "verdicts,summaries,deadletter", "topics to read, comma-separated: requests, verdicts, summaries, deadletter (the service's topics, as --requests-topic and the like name them) or any topic name")
		from      = fs.String("from", "beginning", "where to start in each partition: beginning or end")
		requestID = fs.String("request-id", "", "print only the events of this request (by event or record key)")
		asJSON    = fs.Bool("json", false, "print one JSON object per record: topic, partition, offset, key, headers, event")
		follow    = fs.Bool("follow", false, "keep waiting for new records until Ctrl-C (or --max)")
		idle      = fs.Duration("timeout", 5*time.Second, "without --follow, stop after this long with no new record")
		maxEvents = fs.Int("max", 0, "stop after printing this many records (0: no limit)")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	invalid := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tail: "+format+"\n", a...)
		return exitInvalid
	}
	var start stream.Start
	switch *from {
	case "beginning":
		start = stream.FromStart
	case "end":
		start = stream.FromEnd
	default:
		return invalid("--from: %q is not beginning or end", *from)
	}
	toRead := tailTopics(*topics, names)
	switch {
	case len(toRead) == 0:
		return invalid("--topics: no topic given")
	case *maxEvents < 0:
		return invalid("--max: %d must not be negative", *maxEvents)
	case !*follow && *idle <= 0:
		return invalid("--timeout: %s must be positive", *idle)
	}
	if err := checkKafka(kf.brokers, kf.conn); err != nil {
		return cl.invalid(err)
	}
	serde, err := kf.serde(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "tail: %v\n", err)
		return exitFailure
	}
	client, err := kf.client()
	if err != nil {
		return invalid("%v", err)
	}
	defer client.Close()
	for _, name := range toRead {
		if _, err := client.Partitions(ctx, name); err != nil {
			fmt.Fprintf(stderr, "tail: %v\n", err)
			return exitFailure
		}
	}

	readCtx, stopReading := context.WithCancel(ctx)
	records, readErrs, wait := readTopics(readCtx, client, toRead, start)
	defer func() {
		stopReading()
		wait()
	}()

	p := tailPrinter{w: stdout, asJSON: *asJSON}
	printed := 0
	var idleC <-chan time.Time
	var timer *time.Timer
	if !*follow {
		timer = time.NewTimer(*idle)
		defer timer.Stop()
		idleC = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return exitOK // Ctrl-C is how --follow ends
		case <-idleC:
			return exitOK
		case err := <-readErrs:
			fmt.Fprintf(stderr, "tail: %v\n", err)
			return exitFailure
		case m := <-records:
			if timer != nil {
				timer.Reset(*idle)
			}
			rec := decodeRecord(ctx, serde, m)
			if *requestID != "" && !rec.concerns(*requestID) {
				continue
			}
			if err := p.print(rec); err != nil {
				fmt.Fprintf(stderr, "tail: writing: %v\n", err)
				return exitFailure
			}
			printed++
			if *maxEvents > 0 && printed >= *maxEvents {
				return exitOK
			}
		}
	}
}

// tailTopics resolves the --topics list: the service's topics by their short
// names, as the settings name them; anything else as a topic name.
func tailTopics(list string, t tailTopicNames) []string {
	short := map[string]string{"requests": t.requests, "verdicts": t.verdicts, "summaries": t.summaries, "deadletter": t.deadLetter}
	var out []string
	for _, name := range splitList(list) {
		if full, ok := short[name]; ok {
			name = full
		}
		out = append(out, name)
	}
	return out
}

// readTopics reads every partition of topics from start until ctx ends,
// without a consumer group, following partitions added meanwhile. Records
// arrive in order within a partition. wait returns once reading stopped.
func readTopics(ctx context.Context, client *stream.Client, topics []string, start stream.Start) (records <-chan stream.Record, errs <-chan error, wait func()) {
	out := make(chan stream.Record)
	errc := make(chan error, 1)
	r, err := stream.NewReader(stream.ReaderConfig{
		Client: client,
		Topics: topics,
		Start:  start,
		Handle: func(ctx context.Context, m stream.Record) {
			select {
			case out <- m:
			case <-ctx.Done():
			}
		},
	})
	if err != nil {
		errc <- err
		return out, errc, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx) // returns nil when ctx ends; failures are retried inside
	}()
	return out, errc, func() { <-done }
}

// tailRecord is a record read, decoded or not.
type tailRecord struct {
	msg   stream.Record
	event schemas.Event // nil when err is set
	err   error
}

func decodeRecord(ctx context.Context, serde *schemas.Serde, m stream.Record) tailRecord {
	ev, err := serde.Decode(ctx, m.Topic, m.Value, m.Headers)
	if err != nil {
		// A request that decodes but fails its checks is still worth showing.
		var re *schemas.RequestError
		if errors.As(err, &re) && re.Request != nil {
			return tailRecord{msg: m, event: re.Request}
		}
		return tailRecord{msg: m, err: err}
	}
	return tailRecord{msg: m, event: ev}
}

// concerns says whether the record belongs to the request id: by the event's
// request id, a dead letter's original key, or the record's key.
func (r tailRecord) concerns(id string) bool {
	if string(r.msg.Key) == id {
		return true
	}
	switch ev := r.event.(type) {
	case *schemas.VerdictEvent:
		return ev.RequestID == id
	case *schemas.SummaryEvent:
		return ev.RequestID == id
	case *schemas.Request:
		return ev.RequestID == id
	case *schemas.DeadLetter:
		return ev.OriginalKey != nil && string(ev.OriginalKey) == id
	}
	return false
}

// tailPrinter writes records for a person or, with asJSON, as JSON lines.
type tailPrinter struct {
	w      io.Writer
	asJSON bool
}

func (p tailPrinter) print(r tailRecord) error {
	if p.asJSON {
		data, err := json.Marshal(recordJSON(r))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", data)
		return err
	}
	_, err := fmt.Fprintln(p.w, recordLine(r))
	return err
}

// tailJSON is one record as `tail --json` prints it.
type tailJSON struct {
	Topic     string            `json:"topic"`
	Partition int               `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp string            `json:"timestamp"`
	Key       *string           `json:"key"`
	Headers   map[string]string `json:"headers"`
	Schema    string            `json:"schema,omitempty"`
	Event     schemas.Event     `json:"event,omitempty"`
	// Error, Value and ValueBytes describe a record that could not be decoded.
	Error      string `json:"error,omitempty"`
	Value      []byte `json:"value,omitempty"`
	ValueBytes *int   `json:"value_bytes,omitempty"`
}

func recordJSON(r tailRecord) tailJSON {
	m := r.msg
	out := tailJSON{
		Topic:     m.Topic,
		Partition: m.Partition,
		Offset:    m.Offset,
		Timestamp: m.Time.UTC().Format(schemas.TimeLayout),
		Headers:   make(map[string]string, len(m.Headers)),
	}
	if m.Key != nil {
		key := string(m.Key)
		out.Key = &key
	}
	for _, h := range m.Headers {
		out.Headers[h.Key] = string(h.Value)
	}
	if r.err != nil {
		size := len(m.Value)
		out.Error, out.Value, out.ValueBytes = r.err.Error(), m.Value, &size
		return out
	}
	out.Schema, out.Event = r.event.SchemaName(), r.event
	return out
}

// recordLine is one record on one line, for a person.
func recordLine(r tailRecord) string {
	m := r.msg
	where := fmt.Sprintf("[%s %d:%d]", m.Topic, m.Partition, m.Offset)
	var line string
	switch ev := r.event.(type) {
	case *schemas.VerdictEvent:
		line = verdictLine(ev)
	case *schemas.SummaryEvent:
		line = summaryLine(ev)
	case *schemas.DeadLetter:
		line = deadLetterLine(ev)
	case *schemas.Request:
		line = requestLine(ev)
	case nil:
		line = fmt.Sprintf("UNDECODABLE  key %s  %d bytes  %s", keyText(m.Key), len(m.Value), r.err)
	default:
		line = ev.SchemaName()
	}
	return line + "  " + where
}

// Widths, in characters, of the texts a line quotes.
const (
	rationaleWidth = 160
	quoteWidth     = 100
	messageWidth   = 200
)

// verdictLine: request r-1  rule liability-cap  PASS  "rationale"  evidence: "quote" (msa.pdf p.3, anchored exact)
func verdictLine(v *schemas.VerdictEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "request %s  rule %s  %s", v.RequestID, v.RuleID, verdictOutcome(v))
	if v.Confidence != nil {
		fmt.Fprintf(&b, "  confidence %s", confidenceText(v.Confidence))
	}
	if v.NeedsReview {
		fmt.Fprintf(&b, "  NEEDS REVIEW (%s)", strings.Join(v.ReviewReasons, ", "))
	}
	if !v.DataSufficiency {
		b.WriteString("  insufficient data")
		if v.SufficiencyNote != nil {
			fmt.Fprintf(&b, " (%s)", clip(*v.SufficiencyNote, rationaleWidth))
		}
	}
	if len(v.Problems) > 0 {
		fmt.Fprintf(&b, "  kept with problems (%s)", clip(strings.Join(v.Problems, "; "), rationaleWidth))
	}
	fmt.Fprintf(&b, "  %q  evidence: ", clip(v.Rationale, rationaleWidth))
	if len(v.Evidences) == 0 {
		b.WriteString("none")
	}
	for i, e := range v.Evidences {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q (%s)", clip(e.Text, quoteWidth), evidenceWhere(e))
	}
	if c := v.Cached; c != nil {
		fmt.Fprintf(&b, "  cached: judged %s under request %s", c.JudgedAt.UTC().Format(time.RFC3339), c.RequestID)
	}
	return b.String()
}

func verdictOutcome(v *schemas.VerdictEvent) string {
	return outcomeText(v.RuleType, v.NotApplicable, v.BooleanOutput, v.NumericalOutput, v.AllowedScores)
}

// evidenceWhere: msa.pdf p.3 (cited p.9), passage d1p3s4, anchored exact
func evidenceWhere(e verdict.Evidence) string {
	origin := orDash(e.SourceOrigin)
	if page := pagePlace("p.", e.SourcePageNumber, e.CitedPageNumber); page != "" {
		origin += " " + page
	}
	parts := []string{origin}
	if passage := passagePlace(e.PassageID, e.CitedPassageID, e.SourceOrigin); passage != "" {
		parts = append(parts, passage)
	}
	switch {
	case e.Altered:
		parts = append(parts, "ALTERED: the model wrote "+strconv.Quote(e.QuotedText))
	case e.Anchored:
		parts = append(parts, strings.TrimSpace("anchored "+string(e.Match)))
	case e.Match == verdict.MatchNotDocument:
		parts = append(parts, "named input")
	default:
		parts = append(parts, "not found in the document")
	}
	return strings.Join(parts, ", ")
}

// summaryLine: request r-1  summary completed  ruleset contract-review 1.0.0  6 rules: ...
func summaryLine(s *schemas.SummaryEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "request %s  summary %s  ruleset %s", s.RequestID, s.Status, orDash(s.RulesetID))
	if s.RulesetVersion != nil {
		b.WriteString(" " + *s.RulesetVersion)
	}
	if e := s.Error; e != nil {
		fmt.Fprintf(&b, "  error %s: %q", e.Code, clip(e.Message, messageWidth))
	}
	c := s.Counts
	if c.Rules > 0 || s.Status == schemas.StatusCompleted {
		fmt.Fprintf(&b, "  %d rules: %d passed, %d failed, %d not applicable, %d insufficient data",
			c.Rules, c.Passed, c.Failed, c.NotApplicable, c.InsufficientData)
		if c.Cached > 0 {
			fmt.Fprintf(&b, ", %d from the verdict cache", c.Cached)
		}
		if c.NeedsReview > 0 {
			fmt.Fprintf(&b, ", %d need review", c.NeedsReview)
		}
	}
	if a := s.Aggregate.Boolean; a != nil {
		verdict := "FAILED"
		if a.Passed {
			verdict = "PASSED"
		}
		fmt.Fprintf(&b, "  boolean (%s) %s %d/%d", a.Mode, verdict, a.PassedCount, a.Applicable)
	}
	if a := s.Aggregate.Numerical; a != nil {
		score := "no score"
		if a.Score != nil {
			score = strconv.FormatFloat(*a.Score, 'f', 2, 64)
		}
		fmt.Fprintf(&b, "  numerical (%s) %s over %d", a.Mode, score, a.Counted)
	}
	if len(s.Groups) > 0 {
		groups := make([]string, len(s.Groups))
		for i, g := range s.Groups {
			groups[i] = groupLabel(g) + " " + groupResult(g)
		}
		b.WriteString("  groups " + strings.Join(groups, "; "))
	}
	if n := decidedWithoutModel(s.Usage); n != "" {
		b.WriteString("  " + n)
	}
	if r := s.Report; r != nil {
		b.WriteString("  report " + r.URI)
	}
	if s.Model != "" {
		b.WriteString("  model " + s.Model)
	}
	if u := s.Usage; u.LLMCalls > 0 {
		fmt.Fprintf(&b, "  tokens %d in (%d cached), %d out, %d call(s)", u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.LLMCalls)
		if u.PlannedCalls > 1 {
			fmt.Fprintf(&b, ", split into %d", u.PlannedCalls)
		}
	}
	return b.String()
}

// deadLetterLine: dead letter  reason invalid_request  from requests 0:12  key "r-1"  "message"  original value 123 bytes
func deadLetterLine(d *schemas.DeadLetter) string {
	return fmt.Sprintf("dead letter  reason %s  from %s %d:%d  key %s  %q  original value %d bytes",
		d.Reason, d.OriginalTopic, d.OriginalPartition, d.OriginalOffset, keyText(d.OriginalKey), clip(d.Message, messageWidth), len(d.OriginalValue))
}

// requestLine: request r-1  tenant contoso  ruleset contract-review  2 document(s)  submitted ...
func requestLine(r *schemas.Request) string {
	ruleset := "inline"
	if ref := r.RulesetRef; ref != nil {
		ruleset = ref.ID
		if ref.Version != nil {
			ruleset += " " + *ref.Version
		}
	}
	return fmt.Sprintf("request %s  tenant %s  ruleset %s  %d document(s), %d named input(s)  submitted %s",
		orDash(r.RequestID), orDash(r.TenantID), ruleset, len(r.PrimaryDocs)+len(r.AuxiliaryDocs), len(r.NamedInputs),
		r.SubmittedAt.UTC().Format(schemas.TimeLayout))
}

// keyText quotes a record key; a missing key is "none".
func keyText(key []byte) string {
	if key == nil {
		return "none"
	}
	return strconv.Quote(string(key))
}

// clip shortens s to at most n characters, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
