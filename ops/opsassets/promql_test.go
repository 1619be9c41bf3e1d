package opsassets

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"rulevalidator/engine"
	"rulevalidator/metrics"
	"rulevalidator/verdict"
)

// series is one metric name a PromQL expression may select: a counter or
// gauge, or one of a histogram's _bucket, _sum and _count.
type series struct {
	family  string
	kind    string // COUNTER, GAUGE, HISTOGRAM...
	labels  map[string]bool
	buckets []float64 // upper bounds, for _bucket
}

// targetLabels are attached by Prometheus (job, instance) or by the scrape
// configs (namespace, pod) to every scraped series.
var targetLabels = []string{"job", "instance", "namespace", "pod"}

// exportedSeries gathers what the metrics package exports, after touching
// every labelled metric once so that each family has a series to show.
func exportedSeries(t *testing.T) map[string]series {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.EngineHooks().LLMCall(context.Background(), "m", engine.PurposeJudge, time.Second, verdict.Usage{PromptTokens: 1, CompletionTokens: 1, CachedTokens: 1}, nil)
	ch := m.ConsumerHooks("rulevalidator.requests")
	ch.Fetched("rulevalidator.requests", 0, 1, 3)
	ch.Committed(0, 2)
	m.ObserveReportUpload(time.Millisecond, nil)
	h := m.InstrumentHTTP("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]series{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, l := range targetLabels {
			labels[l] = true
		}
		var buckets []float64
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = true
			}
			if hist := metric.GetHistogram(); hist != nil && buckets == nil {
				for _, b := range hist.GetBucket() {
					buckets = append(buckets, b.GetUpperBound())
				}
			}
		}
		name, kind := f.GetName(), f.GetType().String()
		if kind != "HISTOGRAM" {
			out[name] = series{family: name, kind: kind, labels: labels}
			continue
		}
		withLe := map[string]bool{"le": true}
		for l := range labels {
			withLe[l] = true
		}
		out[name+"_bucket"] = series{family: name, kind: kind, labels: withLe, buckets: buckets}
		out[name+"_sum"] = series{family: name, kind: kind, labels: labels}
		out[name+"_count"] = series{family: name, kind: kind, labels: labels}
	}
	// Prometheus's own series for each target.
	up := map[string]bool{}
	for _, l := range targetLabels {
		up[l] = true
	}
	out["up"] = series{family: "up", kind: "GAUGE", labels: up}
	return out
}

// selector is a metric name in an expression and the labels its matchers name.
type selector struct {
	name   string
	labels []string
}

// keywords are PromQL words that are not metric names.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true,
	// Aggregations, which may be followed by by (...) before their (.
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// selectors lists the metric selectors of a PromQL expression, Grafana
// variables ($__rate_interval, $model) allowed. It is a lexer, not a parser:
// enough to find names and matchers; promtool checks the syntax of the rules.
func selectors(expr string) ([]selector, error) {
	var out []selector
	rs := []rune(expr)
	i := 0
	skipSpace := func(j int) int {
		for j < len(rs) && unicode.IsSpace(rs[j]) {
			j++
		}
		return j
	}
	for i < len(rs) {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '"' || r == '\'' || r == '`':
			end, err := skipString(rs, i)
			if err != nil {
				return nil, err
			}
			i = end
		case r == '[':
			end := indexFrom(rs, i, ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i = end + 1
		case r == '{':
			// A selector without a name, such as {__name__="x"}.
			labels, names, end, err := matchers(rs, i)
			if err != nil {
				return nil, err
			}
			if len(names) == 0 {
				return nil, fmt.Errorf("selector at %d has no metric name", i)
			}
			for _, n := range names {
				out = append(out, selector{name: n, labels: labels})
			}
			i = end
		case r == '$':
			i++
			for i < len(rs) && isIdent(rs[i]) {
				i++
			}
		case unicode.IsDigit(r) || r == '.':
			for i < len(rs) && (isIdent(rs[i]) || rs[i] == '.' || rs[i] == '+' && (rs[i-1] == 'e' || rs[i-1] == 'E')) {
				i++
			}
		case isIdentStart(r):
			start := i
			for i < len(rs) && isIdent(rs[i]) {
				i++
			}
			word := string(rs[start:i])
			next := skipSpace(i)
			switch {
			case labelListKeywords[word]:
				if next < len(rs) && rs[next] == '(' {
					end := indexFrom(rs, next, ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed %s( at %d", word, next)
					}
					i = end + 1
				}
			case keywords[word]:
			case next < len(rs) && rs[next] == '(':
				// a function or an aggregation
			default:
				sel := selector{name: word}
				if next < len(rs) && rs[next] == '{' {
					labels, names, end, err := matchers(rs, next)
					if err != nil {
						return nil, err
					}
					if len(names) > 0 {
						return nil, fmt.Errorf("%s{...} names __name__ as well", word)
					}
					sel.labels, i = labels, end
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

// matchers reads {label op "value", ...} starting at rs[start] == '{'; it
// returns the labels other than __name__, the __name__ values, and the index
// after '}'.
func matchers(rs []rune, start int) (labels, names []string, end int, err error) {
	i := start + 1
	for {
		for i < len(rs) && (unicode.IsSpace(rs[i]) || rs[i] == ',') {
			i++
		}
		if i >= len(rs) {
			return nil, nil, 0, fmt.Errorf("unclosed { at %d", start)
		}
		if rs[i] == '}' {
			return labels, names, i + 1, nil
		}
		from := i
		for i < len(rs) && isIdent(rs[i]) {
			i++
		}
		label := string(rs[from:i])
		if label == "" {
			return nil, nil, 0, fmt.Errorf("expected a label name at %d, got %q", i, string(rs[i]))
		}
		for i < len(rs) && (unicode.IsSpace(rs[i]) || strings.ContainsRune("=!~", rs[i])) {
			i++
		}
		if i >= len(rs) || !strings.ContainsRune("\"'`", rs[i]) {
			return nil, nil, 0, fmt.Errorf("label %s: expected a quoted value at %d", label, i)
		}
		strEnd, err := skipString(rs, i)
		if err != nil {
			return nil, nil, 0, err
		}
		if label == "__name__" {
			names = append(names, string(rs[i+1:strEnd-1]))
		} else {
			labels = append(labels, label)
		}
		i = strEnd
	}
}

// skipString returns the index after the string literal starting at rs[i].
func skipString(rs []rune, i int) (int, error) {
	quote := rs[i]
	for j := i + 1; j < len(rs); j++ {
		switch {
		case rs[j] == '\\' && quote != '`':
			j++
		case rs[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d", i)
}

func indexFrom(rs []rune, from int, r rune) int {
	if i := slices.Index(rs[from:], r); i >= 0 {
		return from + i
	}
	return -1
}

func isIdentStart(r rune) bool { return r == '_' || r == ':' || unicode.IsLetter(r) }
func isIdent(r rune) bool      { return isIdentStart(r) || unicode.IsDigit(r) }

// checkExpr reports, as errors, the selectors of expr that name a metric the
// service does not export or a label that metric does not have.
func checkExpr(exported map[string]series, expr string) []error {
	sels, err := selectors(expr)
	if err != nil {
		return []error{fmt.Errorf("reading %q: %w", expr, err)}
	}
	if len(sels) == 0 {
		return []error{fmt.Errorf("%q selects no metric", expr)}
	}
	var errs []error
	for _, s := range sels {
		info, ok := exported[s.name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not exported by package metrics", s.name))
			continue
		}
		for _, l := range s.labels {
			if !info.labels[l] {
				errs = append(errs, fmt.Errorf("%s has no label %s (it has %v)", s.name, l, sorted(info.labels)))
			}
		}
	}
	return errs
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		expr string
		want []selector
	}{
		{`up{job="rulevalidator"} == 0`, []selector{{"up", []string{"job"}}}},
		{`absent(up{job="rulevalidator"})`, []selector{{"up", []string{"job"}}}},
		{
			`sum by (topic) (deriv(a_lag[15m])) > 0 and sum by (topic) (max by (topic, partition) (a_lag)) > 100`,
			[]selector{{"a_lag", nil}, {"a_lag", nil}},
		},
		{
			`histogram_quantile(0.95, sum by (model, le) (rate(x_bucket{model=~"$model", outcome!="a,b}"}[$__rate_interval])))`,
			[]selector{{"x_bucket", []string{"model", "outcome"}}},
		},
		{`sum(rate(a_total[5m])) / on() group_left() sum(rate(b_total[5m] offset 1h)) > 1e-3`, []selector{{"a_total", nil}, {"b_total", nil}}},
		{`sum(rate(a[5m])) by (le)`, []selector{{"a", nil}}},
		{`{__name__="c", k="v"}`, []selector{{"c", []string{"k"}}}},
		{`1 + 2`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := selectors(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorsRejectsBrokenExpressions(t *testing.T) {
	for _, expr := range []string{`a{b="c"`, `a{b=c}`, `a[5m`, `a{b="c}`} {
		if got, err := selectors(expr); err == nil {
			t.Errorf("selectors(%q) = %v, want an error", expr, got)
		}
	}
}

func TestCheckExprFindsUnknownMetricsAndLabels(t *testing.T) {
	exported := exportedSeries(t)
	tests := []struct {
		expr string
		want []string // substrings of the errors, in order
	}{
		{`rate(rulevalidator_dead_letters_total{reason="internal"}[5m])`, nil},
		{`rulevalidator_llm_request_duration_seconds_bucket{le="1"}`, nil},
		{`rate(rulevalidator_dead_letter_total[5m])`, []string{"rulevalidator_dead_letter_total is not exported"}},
		{`rulevalidator_dead_letters_total{model="x"}`, []string{"rulevalidator_dead_letters_total has no label model"}},
		{`rulevalidator_report_upload_duration_seconds{le="1"}`, []string{"not exported"}},
		{`vector(1)`, []string{"selects no metric"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			errs := checkExpr(exported, tt.expr)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %v, want %d errors", errs, len(tt.want))
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e, tt.want[i])
				}
			}
		})
	}
}
