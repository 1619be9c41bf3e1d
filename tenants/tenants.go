// Package tenants is what the service allows each tenant, from the tenants file: its share of
// the requests consumer's handling slots (Weight, dividing its recent use of them when the
// consumer picks whom to serve), a cap on its requests judged at once (MaxInFlight), and the
// rate of submissions the API admits (RequestsPerMinute, a token bucket per tenant:
// RateLimiter). File reads the file and reloads it while the service runs, serving a snapshot
// that readers take without a lock.
//
// The file is YAML (or JSON), every key checked:
//
//	default: {weight: 1}
//	tenants:
//	  acme:  {weight: 3, max_in_flight: 8, requests_per_minute: 600}
//	  trial: {weight: 1, max_in_flight: 1, requests_per_minute: 10}
//
// default applies to every tenant the file does not name, and fills in each key a tenant's
// entry leaves out; a key given as null in a tenant's entry lifts the default's limit for that
// tenant. Without default, a tenant weighs 1 and has neither cap nor rate limit. The keys:
//
//   - weight: the tenant's share of the time requests are judged while tenants wait, a whole
//     number from 1 to 1000 (default 1).
//   - max_in_flight: the most of the tenant's requests judged at once by one replica, from 1;
//     null or left out: no cap.
//   - requests_per_minute: the submissions one replica's API admits from the tenant each
//     minute, from 1, in bursts of up to a tenth of it (at least 1: see Burst); null or left
//     out: no limit.
//   - tokens_per_hour, tokens_per_day: the tenant's token budgets (tokens in and out, summed
//     over every replica by package usage) in the hour and the day (UTC) under way, from 1;
//     null or left out: no budget.
//   - on_exceed: what happens to a request of a tenant past a budget: reject (the default)
//     fails it with reason quota_exceeded, to be replayed later; delay holds the tenant's
//     requests until the window allows (its status says delayed, and until when), up to a
//     share of each replica's read-ahead, past which they are failed as with reject.
package tenants

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"rulevalidator/auth"
	"rulevalidator/internal/jsonyaml"
)

// Bounds of the values a tenants file may give.
const (
	MaxWeight = 1000
	// MaxLimit bounds max_in_flight and requests_per_minute, against typos more than
	// anything.
	MaxLimit = 1_000_000
	// MaxTokens bounds tokens_per_hour and tokens_per_day.
	MaxTokens = 1_000_000_000_000
)

// Limits are what applies to one tenant.
type Limits struct {
	// Weight is the tenant's share of the requests consumer's handling slots, at least 1.
	Weight int
	// MaxInFlight is the most of the tenant's requests judged at once by one replica; 0: no
	// cap.
	MaxInFlight int
	// RequestsPerMinute is the rate of submissions one replica's API admits from the tenant;
	// 0: no limit.
	RequestsPerMinute int
	// TokensPerHour and TokensPerDay are the tenant's token budgets across replicas in the
	// hour and the day (UTC) under way; 0: none.
	TokensPerHour int64
	TokensPerDay  int64
	// OnExceed is what happens past a budget: OnExceedReject, also when empty, or
	// OnExceedDelay.
	OnExceed OnExceed
}

// HasBudget reports whether a token budget applies.
func (l Limits) HasBudget() bool { return l.TokensPerHour > 0 || l.TokensPerDay > 0 }

// OnExceed is what happens to a request of a tenant past its token budget.
type OnExceed string

const (
	// OnExceedReject fails the request (reason quota_exceeded), the model not asked.
	OnExceedReject OnExceed = "reject"
	// OnExceedDelay holds the tenant's requests until the window allows.
	OnExceedDelay OnExceed = "delay"
)

// Config is a tenants file as read: the default and each tenant named, its entry completed
// from the default. It is not changed once made; a reload makes a new one.
type Config struct {
	Default Limits
	Tenants map[string]Limits
}

// DefaultConfig is the configuration of a file that sets nothing ({}): every tenant weighs
// 1, uncapped and unlimited.
func DefaultConfig() *Config {
	return &Config{Default: Limits{Weight: 1}, Tenants: map[string]Limits{}}
}

// For is tenant's limits: its entry, or the default.
func (c *Config) For(tenant string) Limits {
	if l, ok := c.Tenants[tenant]; ok {
		return l
	}
	return c.Default
}

// Keys of the file.
const (
	keyDefault           = "default"
	keyTenants           = "tenants"
	keyWeight            = "weight"
	keyMaxInFlight       = "max_in_flight"
	keyRequestsPerMinute = "requests_per_minute"
	keyTokensPerHour     = "tokens_per_hour"
	keyTokensPerDay      = "tokens_per_day"
	keyOnExceed          = "on_exceed"
)

var (
	topKeys    = []string{keyDefault, keyTenants}
	limitsKeys = []string{keyWeight, keyMaxInFlight, keyRequestsPerMinute, keyTokensPerHour, keyTokensPerDay, keyOnExceed}
)

// ParseError lists every problem found in a tenants file, each naming the key where it lies
// (tenants.acme.weight), or the line and column of a syntax error.
type ParseError struct {
	Problems []string
}

func (e *ParseError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems: %s", len(e.Problems), strings.Join(e.Problems, "; "))
}

// Parse reads a tenants file's content. Every problem is reported, in one *ParseError.
func Parse(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		// Refused, rather than read as no limits: a file caught while it is written may
		// be empty for a moment.
		return nil, &ParseError{Problems: []string{"the file is empty; write {} to give every tenant the defaults"}}
	}
	doc, err := jsonyaml.Decode(data)
	if err != nil {
		return nil, &ParseError{Problems: []string{err.Error()}}
	}
	p := &parser{}
	cfg := p.config(doc)
	if len(p.problems) > 0 {
		return nil, &ParseError{Problems: p.problems}
	}
	return cfg, nil
}

type parser struct {
	problems []string
}

func (p *parser) add(field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	p.problems = append(p.problems, msg)
}

// config reads the whole document.
func (p *parser) config(doc any) *Config {
	top, ok := doc.(map[string]any)
	if !ok {
		p.add("", "the file must be a mapping with the keys %s (got %s)", strings.Join(topKeys, " and "), jsonyaml.TypeName(doc))
		return nil
	}
	for _, key := range jsonyaml.SortedKeys(top) {
		if !slices.Contains(topKeys, key) {
			p.add("", "unknown key %q (known: %s)", key, strings.Join(topKeys, ", "))
		}
	}
	cfg := DefaultConfig()
	if v, ok := top[keyDefault]; ok {
		cfg.Default = p.limits(keyDefault, v, cfg.Default)
	}
	if v, ok := top[keyTenants]; ok && v != nil {
		entries, ok := v.(map[string]any)
		if !ok {
			p.add(keyTenants, "must be a mapping of tenant ids to their limits (got %s)", jsonyaml.TypeName(v))
			return cfg
		}
		for _, tenant := range jsonyaml.SortedKeys(entries) {
			field := keyTenants + "." + tenant
			if err := checkTenant(tenant); err != nil {
				p.add(field, "the tenant id %s", err)
				continue
			}
			cfg.Tenants[tenant] = p.limits(field, entries[tenant], cfg.Default)
		}
	}
	return cfg
}

// limits reads one entry at field, the keys it leaves out taken from base.
func (p *parser) limits(field string, v any, base Limits) Limits {
	if v == nil { // "acme:" alone, or "acme: {}"
		return base
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.add(field, "must be a mapping of %s (got %s)", strings.Join(limitsKeys, ", "), jsonyaml.TypeName(v))
		return base
	}
	l := base
	for _, key := range jsonyaml.SortedKeys(obj) {
		at, val := field+"."+key, obj[key]
		switch key {
		case keyWeight:
			if val == nil {
				p.add(at, "must be a whole number from 1 to %d (got null); leave it out for the default", MaxWeight)
				continue
			}
			if n, ok := p.number(at, val, MaxWeight); ok {
				l.Weight = n
			}
		case keyMaxInFlight:
			l.MaxInFlight = p.limit(at, val, l.MaxInFlight)
		case keyRequestsPerMinute:
			l.RequestsPerMinute = p.limit(at, val, l.RequestsPerMinute)
		case keyTokensPerHour:
			l.TokensPerHour = p.tokens(at, val, l.TokensPerHour)
		case keyTokensPerDay:
			l.TokensPerDay = p.tokens(at, val, l.TokensPerDay)
		case keyOnExceed:
			switch val {
			case nil:
				l.OnExceed = ""
			case string(OnExceedReject):
				l.OnExceed = OnExceedReject
			case string(OnExceedDelay):
				l.OnExceed = OnExceedDelay
			default:
				p.add(at, "must be reject or delay (got %v)", val)
			}
		default:
			p.add(field, "unknown key %q (known: %s)", key, strings.Join(limitsKeys, ", "))
		}
	}
	return l
}

// limit reads a cap or a rate: a number from 1, or null for none.
func (p *parser) limit(field string, v any, old int) int {
	if v == nil {
		return 0
	}
	n, ok := p.number(field, v, MaxLimit)
	if !ok {
		return old
	}
	return n
}

// tokens reads a token budget: a number from 1 to MaxTokens, or null for none.
func (p *parser) tokens(field string, v any, old int64) int64 {
	if v == nil {
		return 0
	}
	n, ok := p.number(field, v, MaxTokens)
	if !ok {
		return old
	}
	return int64(n)
}

// number reads a whole number from 1 to most.
func (p *parser) number(field string, v any, most int) (int, bool) {
	f, isNumber := asFloat(v)
	if isNumber && f == math.Trunc(f) && f >= 1 && f <= float64(most) {
		return int(f), true
	}
	got, hint := jsonyaml.TypeName(v), ""
	if isNumber {
		got = fmt.Sprint(v)
	}
	if isNumber && f == 0 && field != "" && !strings.HasSuffix(field, "."+keyWeight) {
		hint = "; for no limit, leave the key out or give null"
	}
	p.add(field, "must be a whole number from 1 to %d (got %s)%s", most, got, hint)
	return 0, false
}

// asFloat is v as a number, if it is one.
func asFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// checkTenant refuses what the token verifier refuses in a tenant claim
// (auth.CheckTenant): such an entry could never apply.
func checkTenant(t string) error { return auth.CheckTenant(t) }
