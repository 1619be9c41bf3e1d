package plan

import (
	"math"
	"sync"
	"unicode/utf8"
)

// Count estimates the tokens of s without a tokenizer, erring high: a word of
// up to six ASCII letters counts one token and longer words one more per six
// letters; every digit, line break and non-ASCII character counts one, a run
// of one punctuation mark one per four, and a space before a digit or a mark
// one. Tokenizers of current models (BPE and
// SentencePiece, vocabularies of 32k to 256k) give fewer for prose and about
// as many for numbers and symbols, the texts where a guess by bytes falls
// short. A text in a language written with accented Latin letters (German,
// French, Spanish...) counts its words one token per three letters: their
// vocabularies are mostly English, and Qwen's tokenizer splits a German
// sentence into 15% more tokens than the six-letter rate gives.
func Count(s string) int {
	var c tokenCount
	c.add(s)
	return c.total()
}

// tokenCount is Count's tally: measure's one pass over a document keeps one
// too, and reaches the same figure.
type tokenCount struct {
	tokens   int // at the English rate
	denser   int // added when the text is not English
	words    int // runs of ASCII letters
	accented int // non-ASCII Latin letters
}

// A text is counted at the denser rate when it has an accented letter for
// every accentedWordsPer words or fewer: one "café" in a page of English
// leaves it English.
const accentedWordsPer = 20

func (c *tokenCount) total() int {
	if c.accented > 0 && c.accented*accentedWordsPer >= c.words {
		return c.tokens + c.denser
	}
	return c.tokens
}

func (c *tokenCount) plus(o tokenCount) {
	c.tokens += o.tokens
	c.denser += o.denser
	c.words += o.words
	c.accented += o.accented
}

// word counts a run of ASCII letters.
func (c *tokenCount) word(letters int) {
	c.words++
	c.tokens += wordTokens(letters)
	c.denser += denseWordTokens(letters) - wordTokens(letters)
}

func (c *tokenCount) add(s string) {
	for i := 0; i < len(s); {
		switch byteClass[s[i]] {
		case classLetter:
			j := i + 1
			for j < len(s) && byteClass[s[j]] == classLetter {
				j++
			}
			c.word(j - i)
			i = j
		case classSpace:
			// A space before a digit or a mark is a token of its own: the
			// tokenizers that split numbers into digits keep it apart.
			if i+1 < len(s) && (byteClass[s[i+1]] == classOther || byteClass[s[i+1]] == classMark) {
				c.tokens++
			}
			i++
		case classMark:
			j := i + 1
			for j < len(s) && s[j] == s[i] {
				j++
			}
			c.tokens += markTokens(j - i)
			i = j
		case classOther: // digits, line and page breaks, controls
			c.tokens++
			i++
		default: // a non-ASCII character
			r, size := utf8.DecodeRuneInString(s[i:])
			if isAccentedLatin(r) {
				c.accented++
			}
			c.tokens++
			i += size
		}
	}
}

// isAccentedLatin reports whether r is a letter of the Latin-1 Supplement or
// Latin Extended-A and -B blocks: ä, é, ß, ł and their kin.
func isAccentedLatin(r rune) bool {
	return r >= 0xC0 && r <= 0x24F && r != 0xD7 && r != 0xF7
}

// markTokens is what a run of one punctuation mark counts: vocabularies hold
// runs such as "----" and "...." as one token.
func markTokens(run int) int { return 1 + (run-1)/4 }

func wordTokens(letters int) int {
	return 1 + (letters-1)/wordLetters
}

func denseWordTokens(letters int) int {
	return 1 + (letters-1)/denseWordLetters
}

// wordLetters is how many letters of a word one token is counted for beyond
// the first.
const wordLetters = 6

// denseWordLetters is wordLetters for a text that is not English.
const denseWordLetters = 3

const (
	classOther = iota
	classLetter
	classSpace
	classMark // ASCII punctuation
	classNonASCII
)

var byteClass = func() (t [256]uint8) {
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = classNonASCII
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = classLetter, classLetter
	}
	t[' '], t['\t'], t['\r'] = classSpace, classSpace, classSpace
	for _, c := range "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" {
		t[c] = classMark
	}
	return t
}()

// Estimator turns Count's estimates into per-model ones: it learns, from the
// usage the server reports, how a model's tokenizer compares with Count and
// how long its answers run per rule. It is safe for concurrent use; the zero
// value is not usable, call NewEstimator.
type Estimator struct {
	mu     sync.Mutex
	models map[string]*modelStats
}

type modelStats struct {
	promptRatio  float64 // reported prompt tokens per estimated prompt token
	promptSeen   int
	answerTokens float64 // reported completion tokens per rule answered
	answerSeen   int
	// promptsOffered counts the prompts WantsPrompt was asked about.
	promptsOffered int
}

// Once a model's prompt ratio has settled, one prompt in settledSampleEvery
// is counted to keep it current: counting is a pass over the whole prompt,
// a long document's on every call.
const (
	settledAfter       = 16
	settledSampleEvery = 8
)

// WantsPrompt reports whether a prompt the server reported for model is
// worth counting and observing: every one until the ratio has settled,
// then a sample.
func (e *Estimator) WantsPrompt(model string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats(model)
	st.promptsOffered++
	return st.promptSeen < settledAfter || st.promptsOffered%settledSampleEvery == 0
}

// Bounds on what is learned: one odd reply must not make the plan reckless.
const (
	minPromptRatio = 0.5
	maxPromptRatio = 3
	// promptMargin is added on top of a learned ratio: the next prompt's text
	// differs from the ones learned from.
	promptMargin = 1.1
	// learnWeight is the weight of each new observation in the running means.
	learnWeight = 0.3
	// DefaultAnswerTokensPerRule is assumed until a model's answers have been
	// seen: a verdict with a rationale of two or three sentences and two
	// short quotes.
	DefaultAnswerTokensPerRule = 200
	minAnswerTokensPerRule     = 60
	maxAnswerTokensPerRule     = 1200
)

// NewEstimator returns an Estimator that has learned nothing yet.
func NewEstimator() *Estimator {
	return &Estimator{models: map[string]*modelStats{}}
}

func (e *Estimator) stats(model string) *modelStats {
	st, ok := e.models[model]
	if !ok {
		st = &modelStats{promptRatio: 1, answerTokens: DefaultAnswerTokensPerRule}
		e.models[model] = st
	}
	return st
}

// PromptRatio is the factor Count's estimates are multiplied by for model:
// 1 until the model's usage has been observed, then the learned ratio with a
// safety margin.
func (e *Estimator) PromptRatio(model string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.models[model]
	if !ok || st.promptSeen == 0 {
		return 1
	}
	return st.promptRatio * promptMargin
}

// Tokens estimates the tokens of text for model.
func (e *Estimator) Tokens(model, text string) int {
	return Scale(Count(text), e.PromptRatio(model))
}

// Scale applies a ratio to a count, rounding up.
func Scale(count int, ratio float64) int {
	return int(math.Ceil(float64(count) * ratio))
}

// AnswerTokensPerRule is how many answer tokens model is expected to spend
// per rule.
func (e *Estimator) AnswerTokensPerRule(model string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.models[model]
	if !ok || st.answerSeen == 0 {
		return DefaultAnswerTokensPerRule
	}
	// Expect answers a quarter longer than the mean: rationales vary.
	return int(math.Ceil(st.answerTokens * 1.25))
}

// ObservePrompt records that a prompt Count estimated at counted tokens was
// reported by the server as reported tokens. Non-positive figures (servers
// that report no usage) are ignored.
func (e *Estimator) ObservePrompt(model string, counted, reported int) {
	if counted <= 0 || reported <= 0 {
		return
	}
	ratio := clamp(float64(reported)/float64(counted), minPromptRatio, maxPromptRatio)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats(model)
	if st.promptSeen == 0 {
		st.promptRatio = ratio
	} else {
		st.promptRatio += learnWeight * (ratio - st.promptRatio)
	}
	st.promptSeen++
}

// ObserveAnswer records that an answer for rules rules took completion
// tokens.
func (e *Estimator) ObserveAnswer(model string, rules, completion int) {
	if rules <= 0 || completion <= 0 {
		return
	}
	per := clamp(float64(completion)/float64(rules), minAnswerTokensPerRule, maxAnswerTokensPerRule)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats(model)
	if st.answerSeen == 0 {
		st.answerTokens = per
	} else {
		st.answerTokens += learnWeight * (per - st.answerTokens)
	}
	st.answerSeen++
}

func clamp(x, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, x))
}
