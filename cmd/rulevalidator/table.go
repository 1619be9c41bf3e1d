package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/engine/modelprofile"
	"rulevalidator/engine/openai"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// The settings table. Every setting that more than one command reads is
// declared here, once, so that it has the same name, environment variable,
// default and help on each; a command's own settings are declared with the
// command (serveSettings, httpSettings). commandSettings says which command
// reads which, for --help, the configuration reference (docs/configuration.md) and its test.

// Defaults for reaching a model; the local server is the one ops/llm.sh runs.
const (
	defaultBaseURL = "http://127.0.0.1:8081/v1"
	defaultModel   = "qwen2.5-coder-1.5b-instruct"
)

// kafkaSettings binds the brokers and how to reach them: client id, TLS, SASL.
func kafkaSettings(s *settings, brokers *[]string, k *kafkaConn) {
	s.section("Kafka")
	s.strList(brokers, "kafka-brokers", "RULEVALIDATOR_KAFKA_BROKERS", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated")
	s.str(&k.clientID, "kafka-client-id", "RULEVALIDATOR_KAFKA_CLIENT_ID", stream.DefaultClientID, "client id the brokers see (logs, quotas)")
	s.boolean(&k.tls, "kafka-tls", "RULEVALIDATOR_KAFKA_TLS", "false", "connect to the brokers over TLS (system roots unless --kafka-tls-ca)")
	s.str(&k.tlsCAFile, "kafka-tls-ca", "RULEVALIDATOR_KAFKA_TLS_CA", "", "PEM file of the CA that signs the brokers' certificates; implies --kafka-tls")
	s.str(&k.saslMechanism, "kafka-sasl-mechanism", "RULEVALIDATOR_KAFKA_SASL_MECHANISM", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none")
	s.str(&k.saslUsername, "kafka-sasl-username", "RULEVALIDATOR_KAFKA_SASL_USERNAME", "", "SASL user name")
	s.secret(&k.saslPassword, "kafka-sasl-password", "RULEVALIDATOR_KAFKA_SASL_PASSWORD", "SASL password")
}

// The service's topics, one setting each.

func requestsTopicSetting(s *settings, p *string) {
	s.str(p, "requests-topic", "RULEVALIDATOR_TOPIC_REQUESTS", schemas.TopicRequests, "topic of validation requests")
}

func verdictsTopicSetting(s *settings, p *string) {
	s.str(p, "verdicts-topic", "RULEVALIDATOR_TOPIC_VERDICTS", schemas.TopicVerdicts, "topic of rule verdict events")
}

func summariesTopicSetting(s *settings, p *string) {
	s.str(p, "summaries-topic", "RULEVALIDATOR_TOPIC_SUMMARIES", schemas.TopicSummaries, "topic of summary events")
}

func deadLetterTopicSetting(s *settings, p *string) {
	s.str(p, "deadletter-topic", "RULEVALIDATOR_TOPIC_DEADLETTER", schemas.TopicDeadLetter, "topic of dead letters")
}

func callbacksTopicSetting(s *settings, p *string) {
	s.str(p, "callbacks-topic", "RULEVALIDATOR_TOPIC_CALLBACKS", schemas.TopicCallbacks, "topic of callbacks waiting for delivery (an outbox with its own consumer group); used when --callback-secret is set")
}

func replaysTopicSetting(s *settings, p *string) {
	s.str(p, "replays-topic", "RULEVALIDATOR_TOPIC_REPLAYS", schemas.TopicReplays, "compacted topic recording each dead letter replayed (keyed by its topic/partition/offset), so that none is replayed twice")
}

func rulesetsTopicSetting(s *settings, p *string) {
	s.str(p, "rulesets-topic", "RULEVALIDATOR_TOPIC_RULESETS", schemas.TopicRulesets, "compacted topic of published rulesets; empty: serve reads none")
}

// wireFormatSetting is how the events a command writes are framed.
func wireFormatSetting(s *settings, p *string) {
	s.str(p, "wire-format", "RULEVALIDATOR_WIRE_FORMAT", "plain", "how the records written are framed: plain (Avro, fingerprint header) or confluent (schema registry ids); both are read")
}

// schemaRegistrySetting is the registry behind the confluent wire format,
// for commands that write it or read it.
func schemaRegistrySetting(s *settings, p *[]string) {
	s.strList(p, "schema-registry", "RULEVALIDATOR_SCHEMA_REGISTRY", "", "schema registry URLs, comma-separated (needed by the confluent format)")
}

// llmSettings binds how a command reaches the model and judges with it.
func llmSettings(s *settings, f *llmConfig) {
	s.section("Model")
	s.str(&f.baseURL, "llm-base-url", "OPENAI_BASE_URL", defaultBaseURL, "OpenAI-compatible API base URL")
	s.deprecated("base-url") // validate's and eval's name, documented in docs/configuration.md
	s.secret(&f.apiKey, "llm-api-key", "OPENAI_API_KEY", "API key (empty for local servers)")
	s.str(&f.model, "model", "RULEVALIDATOR_MODEL", defaultModel, "model name")
	s.str(&f.profileChoice, "model-profile", "RULEVALIDATOR_MODEL_PROFILE", modelprofile.Auto, "defaults measured best for the model: auto (the profile of the model --model names, where it has one: "+
		strings.Join(modelprofile.Names(), ", ")+"; any other model keeps the global defaults), none (the global defaults) or a profile's name (its defaults, whatever --model says); a value given by flag, environment or --config always wins over a profile's")
	s.str(&f.format, "llm-format", "RULEVALIDATOR_LLM_FORMAT", string(engine.FormatJSONSchema), "preferred response format: json_schema, grammar (a GBNF grammar, llama.cpp servers), json_object or text; weaker ones are tried in that order when the server refuses")
	s.deprecated("format") // validate's and eval's name, documented in docs/configuration.md
	s.str(&f.instructions, "llm-instructions", "RULEVALIDATOR_LLM_INSTRUCTIONS", string(engine.InstructionsAuto), "how the rules reach the model: system (a system message), user (folded into the user message, before the data) or auto (probe each model once)")
	s.str(&f.evidence, "evidence-mode", "RULEVALIDATOR_EVIDENCE_MODE", string(engine.EvidenceCite), "how the model gives evidence: cite (the id of a passage shown in the material; the text is copied from it, verbatim by construction) or quote (verbatim quotes, anchored to the documents)")
	s.number(&f.temperature, "temperature", "RULEVALIDATOR_TEMPERATURE", "0", "sampling temperature sent with every model call (0 to 2); 0 judges greedily, so the same request gets the same verdicts")
	s.str(&f.confidence, "confidence", "RULEVALIDATOR_CONFIDENCE", string(engine.ConfidenceLogProbs), "where each verdict's confidence comes from: logprobs (the server's token log-probabilities for the verdict's value; absent where the server gives none), samples (the share of --confidence-samples answers to the same call that give the verdict's value; costs that many calls), verify (the probability the model gives, asked in a short call of its own with the rule and the passages the verdict cites, that they show the verdict's value; costs a call per verdict) or off")
	s.integer(&f.samples, "confidence-samples", "RULEVALIDATOR_CONFIDENCE_SAMPLES", fmt.Sprint(engine.DefaultConfidenceSamples), "with --confidence samples: how many answers are compared, the judged one included (2 to 20)")
	s.number(&f.sampleTemp, "confidence-temperature", "RULEVALIDATOR_CONFIDENCE_TEMPERATURE", fmt.Sprint(engine.DefaultSampleTemperature), "with --confidence samples: the temperature of the extra answers (above 0, at most 2)")
	s.number(&f.overruleBelow, "overrule-passes-below", "RULEVALIDATOR_OVERRULE_PASSES_BELOW", "0", "with --confidence verify: a boolean pass whose check gives it a confidence under this becomes a fail on insufficient data, marked overruled and routed to review (0 to below 1; 0: no verdict is changed)")
	s.integer(&f.verifyNearest, "verify-nearest-passages", "RULEVALIDATOR_VERIFY_NEAREST_PASSAGES", "0", fmt.Sprintf("with --confidence verify: how many document passages whose words are nearest the rule's the check shows beside those the verdict cites (0 to %d; 0: the cited passages alone)", engine.MaxNearestPassages))
	s.integer(&f.outputRetries, "output-retries", "RULEVALIDATOR_OUTPUT_RETRIES", strconv.Itoa(engine.DefaultOutputRetries), "corrective re-asks per request when an answer fails the checks (0: none); a verdict whose only problem is its rationale gets one more, for the rationale alone")
	s.duration(&f.timeout, "llm-timeout", "RULEVALIDATOR_LLM_TIMEOUT", openai.DefaultTimeout.String(), "timeout of one model call")
	s.integer(&f.maxTokens, "max-tokens", "RULEVALIDATOR_MAX_TOKENS", "0", "cap on each answer's tokens (0: the server's default); rules are split into calls whose answers fit")
	s.integer(&f.contextTokens, "llm-context-tokens", "RULEVALIDATOR_LLM_CONTEXT_TOKENS", "0", "the model's context window in tokens, prompt and answer together (0: ask the server, else 8192); larger requests are split into several calls")
	s.integer(&f.maxConcurrency, "llm-max-concurrency", "RULEVALIDATOR_LLM_MAX_CONCURRENCY", strconv.Itoa(openai.DefaultMaxConcurrency), "the most model calls this process has in flight to the model endpoint at once, over all requests; with --llm-adaptive-concurrency the limit moves below it")
	s.integer(&f.initialConcurrency, "llm-initial-concurrency", "RULEVALIDATOR_LLM_INITIAL_CONCURRENCY", strconv.Itoa(openai.DefaultInitialConcurrency), "with --llm-adaptive-concurrency: the limit on calls in flight at start, before the endpoint's answers move it")
	s.boolean(&f.adaptive, "llm-adaptive-concurrency", "RULEVALIDATOR_LLM_ADAPTIVE_CONCURRENCY", "true", "find the model endpoint's capacity without hitting it: the limit on calls in flight grows by one while calls succeed at it and halves on 429, 503, 504 and timeouts; a Retry-After or a spent x-ratelimit-remaining header pauses new calls until then; false: the limit is --llm-max-concurrency")
	s.integer(&f.callsPerReq, "llm-calls-per-request", "RULEVALIDATOR_LLM_CALLS_PER_REQUEST", fmt.Sprint(engine.DefaultCallConcurrency), "calls of one split request that run at once")
	s.integer(&f.rulesPerCall, "llm-rules-per-call", "RULEVALIDATOR_LLM_RULES_PER_CALL", "0", "the most rules one model call judges (0: as many as fit); calls share the instructions and the material as a prefix a server's prompt cache keeps")
	s.integer(&f.nearestPassages, "llm-nearest-passages", "RULEVALIDATOR_LLM_NEAREST_PASSAGES", "0", fmt.Sprintf("with one rule a call in cite mode: how many passages whose words are nearest the rule's are shown again after it (0 to %d; 0: none)", engine.MaxNearestPassages))
	s.number(&f.reviewBelow, "review-below-confidence", "RULEVALIDATOR_REVIEW_BELOW_CONFIDENCE", "0.8", "a verdict whose confidence is under it needs review (0 to 1; 0: none for its confidence); a ruleset's or rule's review_below_confidence overrides it")
	s.integer(&f.maxInputBytes, "max-input-bytes", "RULEVALIDATOR_MAX_INPUT_BYTES", strconv.Itoa(engine.DefaultMaxInputBytes), "cap on a request's total input text; a larger request is refused (serve dead-letters it as oversized)")
	// The one place a model profile is applied, for every command that judges.
	s.profiled(modelprofile.Settings())
	s.lateDefaults(f.applyProfile)
}

// documentMaxBytesSetting caps a document's file, read from disk by the CLI
// or from a request by the service.
func documentMaxBytesSetting(s *settings, p *int) {
	s.integer(p, "document-max-bytes", "RULEVALIDATOR_DOCUMENT_MAX_BYTES", fmt.Sprint(docread.DefaultMaxBytes), "cap on one document's file (PDF, DOCX, text) as it arrives; a larger one is refused (serve dead-letters it as unreadable_document)")
}

// documentSettings binds how documents given as files are read.
func documentSettings(s *settings, c *documentConfig) {
	s.section("Documents")
	documentMaxBytesSetting(s, &c.maxBytes)
	s.integer(&c.maxPages, "document-max-pages", "RULEVALIDATOR_DOCUMENT_MAX_PAGES", fmt.Sprint(docread.DefaultMaxPages), "cap on one document's pages; a document with more is refused (serve dead-letters it as unreadable_document)")
	s.integer(&c.pdfEngines, "pdf-engines", "RULEVALIDATOR_PDF_ENGINES", fmt.Sprint(docread.DefaultPDFEngines), "PDF engine instances (PDFium on WebAssembly) reading PDFs at once; more PDFs wait for one")
	s.str(&c.cacheDir, "pdf-cache-dir", "RULEVALIDATOR_PDF_CACHE_DIR", "", "directory keeping the PDF engine's compiled code between runs (it starts in a fraction of a second instead of several seconds); empty: rulevalidator/pdfium in the user's cache directory, or, where that cannot be written, compile at every start with a warning; none: compile at every start; a directory given that cannot be written stops the PDF engine")
}

// opsAddrSetting is where serve answers /metrics, /healthz and /readyz, and
// where healthcheck asks.
func opsAddrSetting(s *settings, p *string) {
	s.str(p, "ops-addr", "RULEVALIDATOR_OPS_ADDR", "127.0.0.1:9464", "operations listener: /metrics, /healthz, /readyz")
}

// judgeSettings are the settings of validate and eval.
func judgeSettings(llm *llmConfig, docs *documentConfig) *settings {
	s := &settings{}
	llmSettings(s, llm)
	documentSettings(s, docs)
	return s
}

// produceSettings are the settings of produce.
func produceSettings(k *kafkaConfig, topic *string, maxDocumentBytes *int) *settings {
	s := &settings{}
	kafkaSettings(s, &k.brokers, &k.conn)
	s.section("Topics")
	requestsTopicSetting(s, topic)
	s.section("Wire format")
	wireFormatSetting(s, &k.wireFormat)
	schemaRegistrySetting(s, &k.schemaRegistry)
	s.section("Documents")
	documentMaxBytesSetting(s, maxDocumentBytes)
	return s
}

// tailSettings are the settings of tail: it decodes both wire formats, and
// reads the topics it names by their short names under these settings.
func tailSettings(k *kafkaConfig, t *tailTopicNames) *settings {
	s := &settings{}
	kafkaSettings(s, &k.brokers, &k.conn)
	s.section("Topics")
	requestsTopicSetting(s, &t.requests)
	verdictsTopicSetting(s, &t.verdicts)
	summariesTopicSetting(s, &t.summaries)
	deadLetterTopicSetting(s, &t.deadLetter)
	s.section("Wire format")
	schemaRegistrySetting(s, &k.schemaRegistry)
	return s
}

// deadLetterSettings are the settings of deadletter list and replay: they decode both wire
// formats and send the originals as they were, framed as they were.
func deadLetterSettings(k *kafkaConfig, t *deadLetterTopics) *settings {
	s := &settings{}
	kafkaSettings(s, &k.brokers, &k.conn)
	s.section("Topics")
	requestsTopicSetting(s, &t.requests)
	deadLetterTopicSetting(s, &t.deadLetter)
	replaysTopicSetting(s, &t.replays)
	s.section("Wire format")
	schemaRegistrySetting(s, &k.schemaRegistry)
	return s
}

// rulesetsTopicSettings are the settings of rulesets publish and list.
func rulesetsTopicSettings(k *kafkaConfig, topic *string) *settings {
	s := &settings{}
	kafkaSettings(s, &k.brokers, &k.conn)
	s.section("Topics")
	rulesetsTopicSetting(s, topic)
	return s
}

// healthcheckSettings are the settings of healthcheck.
func healthcheckSettings(opsAddr *string) *settings {
	s := &settings{}
	s.section("HTTP")
	opsAddrSetting(s, opsAddr)
	return s
}

// commandSettings is every command's settings, bound to values nobody
// reads: what each command reads, with the same functions the commands
// call.
func commandSettings() []commandSettingsEntry {
	return []commandSettingsEntry{
		{"serve", serveSettings(&serveConfig{})},
		{"validate", judgeSettings(&llmConfig{}, &documentConfig{})},
		{"eval", judgeSettings(&llmConfig{}, &documentConfig{})},
		{"produce", produceSettings(&kafkaConfig{}, new(string), new(int))},
		{"tail", tailSettings(&kafkaConfig{}, &tailTopicNames{})},
		{"deadletter list", deadLetterSettings(&kafkaConfig{}, &deadLetterTopics{})},
		{"deadletter replay", deadLetterSettings(&kafkaConfig{}, &deadLetterTopics{})},
		{"rulesets publish", rulesetsTopicSettings(&kafkaConfig{}, new(string))},
		{"rulesets list", rulesetsTopicSettings(&kafkaConfig{}, new(string))},
		{"rulesets diff", rulesetsTopicSettings(&kafkaConfig{}, new(string))},
		{"cache purge", cachePurgeSettings(&s3Config{}, new(string))},
		{"reviews export", reviewsExportSettings(&s3Config{}, new(string), new(string))},
		{"healthcheck", healthcheckSettings(new(string))},
	}
}

type commandSettingsEntry struct {
	command string
	set     *settings
}

// isSetting says whether some command reads the setting name.
func isSetting(name string) bool {
	for _, c := range commandSettings() {
		for _, st := range c.set.list {
			if st.name == name {
				return true
			}
		}
	}
	return false
}

// referenceHeader starts the configuration reference (docs/configuration.md).
const referenceHeader = "| flag / config key | environment | default | commands | meaning |"

// writeReference writes every setting of every command once, as a Markdown
// table row with the commands that read it, for docs/configuration.md.
func writeReference(w io.Writer) {
	var order []*setting
	readers := map[string][]string{}
	for _, c := range commandSettings() {
		for i := range c.set.list {
			st := &c.set.list[i]
			if readers[st.name] == nil {
				order = append(order, st)
			}
			readers[st.name] = append(readers[st.name], c.command)
		}
	}
	fmt.Fprintln(w, referenceHeader)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, st := range order {
		env, def := st.env, st.def
		if env == "" {
			env = "-"
		}
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "| `--%s` | `%s` | `%s` | %s | %s |\n", st.name, env, def, strings.Join(readers[st.name], ", "), st.describe())
	}
}
