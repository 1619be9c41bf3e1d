package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/engine/modelprofile"
	"rulevalidator/engine/openai"
)

// llmConfig is how a command reaches the model and judges with it: the
// settings of llmSettings, the same on serve, validate and eval.
type llmConfig struct {
	// tracer makes the client's and the engine's spans (not a setting:
	// serve sets it); nil makes none.
	tracer trace.TracerProvider

	baseURL       string
	apiKey        string
	model         string
	format        string
	instructions  string
	evidence      string
	temperature   float64
	confidence    string
	samples       int
	sampleTemp    float64
	outputRetries int
	timeout       time.Duration
	maxTokens     int
	maxInputBytes int
	contextTokens int
	callsPerReq   int
	rulesPerCall  int
	// nearestPassages: passages shown again after a lone rule.
	nearestPassages int
	reviewBelow     float64
	overruleBelow   float64
	verifyNearest   int
	// maxConcurrency, initialConcurrency and adaptive set the limit on the
	// calls in flight to the model endpoint.
	maxConcurrency     int
	initialConcurrency int
	adaptive           bool

	// profileChoice is --model-profile; profile is what it did, for the start-up log.
	profileChoice string
	profile       profileOutcome
}

// profileOutcome is what the model profile did to the defaults.
type profileOutcome struct {
	name string   // the profile applied; empty: none
	set  []string // the defaults it set, as setting=value
	kept []string // the settings it has a default for that the user gave
}

// applyProfile sets the defaults of the profile --model-profile selects for
// --model: a setting given by flag, environment or config file keeps its value,
// and so does one whose default the profile ties to another setting's value
// that the user changed.
func (f *llmConfig) applyProfile(r *resolved) error {
	f.profile = profileOutcome{}
	p, ok, err := modelprofile.Choose(f.profileChoice, f.model)
	if err != nil {
		return fmt.Errorf("--model-profile: %w", err)
	}
	if !ok {
		return nil
	}
	f.profile.name = p.Model
	for _, d := range p.Defaults {
		if d.When != nil && r.value(d.When.Setting) != d.When.Value {
			continue
		}
		applied, err := r.setDefault(d.Setting, d.Value)
		if err != nil {
			return fmt.Errorf("model profile %s: %w", p.Model, err)
		}
		if applied {
			f.profile.set = append(f.profile.set, d.Setting+"="+d.Value)
		} else {
			f.profile.kept = append(f.profile.kept, d.Setting)
		}
	}
	return nil
}

// logProfile says at start which model profile applied and what it set.
func (f *llmConfig) logProfile(logger *slog.Logger) {
	if f.profile.name == "" {
		reason := "no profile for this model: the global defaults"
		if strings.EqualFold(strings.TrimSpace(f.profileChoice), modelprofile.None) {
			reason = "--model-profile none: the global defaults"
		}
		logger.Info("model profile", "profile", modelprofile.None, "model", f.model, "reason", reason)
		return
	}
	logger.Info("model profile", "profile", f.profile.name, "model", f.model,
		"set", strings.Join(f.profile.set, " "), "given", strings.Join(f.profile.kept, " "))
}

// newEngine builds the model client and the engine from the settings.
func (f *llmConfig) newEngine(logger *slog.Logger, hooks engine.Hooks) (*engine.Engine, error) {
	return f.newEngineWith(logger, hooks, nil, nil)
}

// newEngineWith is newEngine with a verdict cache (nil: none) and an
// observer of the endpoint's concurrency limit (nil: none).
func (f *llmConfig) newEngineWith(logger *slog.Logger, hooks engine.Hooks, cache engine.VerdictCache, onConcurrency func(openai.Concurrency)) (*engine.Engine, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	clientCfg := f.clientConfig(logger)
	clientCfg.OnConcurrency = onConcurrency
	client, err := openai.New(clientCfg)
	if err != nil {
		return nil, err
	}
	cfg := f.engineConfig(logger, hooks)
	cfg.Cache = cache
	return engine.New(client, cfg)
}

// check reports every value the client or the engine would refuse, named as
// the setting.
func (f *llmConfig) check() error {
	var errs []error
	switch engine.EvidenceMode(f.evidence) {
	case engine.EvidenceCite, engine.EvidenceQuote:
	default:
		errs = append(errs, fmt.Errorf("--evidence-mode: %q is not cite or quote", f.evidence))
	}
	switch engine.Instructions(f.instructions) {
	case engine.InstructionsSystem, engine.InstructionsUser, engine.InstructionsAuto:
	default:
		errs = append(errs, fmt.Errorf("--llm-instructions: %q is not system, user or auto", f.instructions))
	}
	if err := engine.ValidateFormat(engine.ResponseFormat(f.format)); err != nil {
		errs = append(errs, fmt.Errorf("--llm-format: %w", err))
	}
	if f.temperature < 0 || f.temperature > 2 {
		errs = append(errs, fmt.Errorf("--temperature: %v must be between 0 and 2", f.temperature))
	}
	switch engine.ConfidenceSource(f.confidence) {
	case engine.ConfidenceLogProbs, engine.ConfidenceSamples, engine.ConfidenceVerify, engine.ConfidenceOff:
	default:
		errs = append(errs, fmt.Errorf("--confidence: %q is not logprobs, samples, verify or off", f.confidence))
	}
	if f.samples < 2 || f.samples > engine.MaxConfidenceSamples {
		errs = append(errs, fmt.Errorf("--confidence-samples: %d must be from 2 to %d", f.samples, engine.MaxConfidenceSamples))
	}
	if f.sampleTemp <= 0 || f.sampleTemp > 2 {
		errs = append(errs, fmt.Errorf("--confidence-temperature: %v must be above 0 and at most 2", f.sampleTemp))
	}
	if f.outputRetries < 0 {
		errs = append(errs, fmt.Errorf("--output-retries: %d must not be negative (0: none)", f.outputRetries))
	}
	if f.timeout < 0 {
		errs = append(errs, fmt.Errorf("--llm-timeout: %s must not be negative", f.timeout))
	}
	if f.maxTokens < 0 {
		errs = append(errs, fmt.Errorf("--max-tokens: %d must not be negative", f.maxTokens))
	}
	if f.contextTokens < 0 {
		errs = append(errs, fmt.Errorf("--llm-context-tokens: %d must not be negative", f.contextTokens))
	}
	if f.callsPerReq < 1 {
		errs = append(errs, fmt.Errorf("--llm-calls-per-request: %d must be at least 1", f.callsPerReq))
	}
	if f.rulesPerCall < 0 {
		errs = append(errs, fmt.Errorf("--llm-rules-per-call: %d must not be negative (0: as many as fit)", f.rulesPerCall))
	}
	if f.nearestPassages < 0 || f.nearestPassages > engine.MaxNearestPassages {
		errs = append(errs, fmt.Errorf("--llm-nearest-passages: %d must be from 0 to %d (0: none)", f.nearestPassages, engine.MaxNearestPassages))
	}
	if f.reviewBelow < 0 || f.reviewBelow > 1 {
		errs = append(errs, fmt.Errorf("--review-below-confidence: %v must be from 0 to 1", f.reviewBelow))
	}
	if f.overruleBelow < 0 || f.overruleBelow >= 1 {
		errs = append(errs, fmt.Errorf("--overrule-passes-below: %v must be from 0 to below 1 (0: none)", f.overruleBelow))
	} else if f.overruleBelow > 0 && engine.ConfidenceSource(f.confidence) != engine.ConfidenceVerify {
		errs = append(errs, fmt.Errorf("--overrule-passes-below: %v needs --confidence verify (it is %q): it reads the verify check's confidence", f.overruleBelow, f.confidence))
	}
	if f.verifyNearest < 0 || f.verifyNearest > engine.MaxNearestPassages {
		errs = append(errs, fmt.Errorf("--verify-nearest-passages: %d must be from 0 to %d (0: the cited passages alone)", f.verifyNearest, engine.MaxNearestPassages))
	} else if f.verifyNearest > 0 && engine.ConfidenceSource(f.confidence) != engine.ConfidenceVerify {
		errs = append(errs, fmt.Errorf("--verify-nearest-passages: %d needs --confidence verify (it is %q): it is what the verify check shows", f.verifyNearest, f.confidence))
	}
	if f.maxConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--llm-max-concurrency: %d must be at least 1", f.maxConcurrency))
	}
	if f.initialConcurrency < 1 || f.initialConcurrency > f.maxConcurrency {
		errs = append(errs, fmt.Errorf("--llm-initial-concurrency: %d must be from 1 to --llm-max-concurrency (%d)", f.initialConcurrency, f.maxConcurrency))
	}
	if f.maxInputBytes < 1 {
		errs = append(errs, fmt.Errorf("--max-input-bytes: %d must be positive", f.maxInputBytes))
	}
	return errors.Join(errs...)
}

// clientConfig is the model client configuration the settings describe.
func (f *llmConfig) clientConfig(logger *slog.Logger) openai.Config {
	return openai.Config{
		BaseURL: f.baseURL,
		APIKey:  f.apiKey,
		Model:   f.model,
		Timeout: f.timeout,
		Format:  engine.ResponseFormat(f.format),
		Logger:  logger,

		TracerProvider: f.tracer,

		MaxConcurrency:     f.maxConcurrency,
		InitialConcurrency: f.initialConcurrency,
		FixedConcurrency:   !f.adaptive,
	}
}

// engineConfig is the engine configuration the settings describe.
func (f *llmConfig) engineConfig(logger *slog.Logger, hooks engine.Hooks) engine.Config {
	retries := f.outputRetries
	if retries == 0 {
		retries = -1 // the setting's 0 means none; the engine's zero means its default
	}
	return engine.Config{
		Model:                 f.model,
		Format:                engine.ResponseFormat(f.format),
		Instructions:          engine.Instructions(f.instructions),
		Evidence:              engine.EvidenceMode(f.evidence),
		Temperature:           float32(f.temperature),
		Confidence:            engine.ConfidenceSource(f.confidence),
		ConfidenceSamples:     f.samples,
		SampleTemperature:     float32(f.sampleTemp),
		Logger:                logger,
		OutputRetries:         retries,
		MaxTokens:             f.maxTokens,
		MaxInputBytes:         f.maxInputBytes,
		ContextTokens:         f.contextTokens,
		CallConcurrency:       f.callsPerReq,
		RulesPerCall:          f.rulesPerCall,
		NearestPassages:       f.nearestPassages,
		Hooks:                 hooks,
		ReviewBelowConfidence: f.reviewBelow,
		OverrulePassesBelow:   f.overruleBelow,
		VerifyNearestPassages: f.verifyNearest,
		TracerProvider:        f.tracer,
	}
}
