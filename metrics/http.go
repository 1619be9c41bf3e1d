package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// InstrumentHTTP counts and times the requests h serves under route, which
// must be the route's pattern (such as "GET /v1/rulesets/{id}"), never the
// request's path: a path can carry tenant or request ids, a pattern cannot.
func (m *Metrics) InstrumentHTTP(route string, h http.Handler) http.Handler {
	// A label value must be UTF-8; currying cannot fail otherwise.
	labels := prometheus.Labels{"route": strings.ToValidUTF8(route, "\uFFFD")}
	requests := m.httpRequests.MustCurryWith(labels)
	duration := m.httpDuration.MustCurryWith(labels)
	duration.WithLabelValues() // the route's series exists before its first request
	// The request's span is started outside h (api's traced): its trace
	// is the exemplar of the request's time.
	return promhttp.InstrumentHandlerCounter(requests, promhttp.InstrumentHandlerDuration(duration, h,
		promhttp.WithExemplarFromContext(exemplar)))
}

// Handler serves g's metrics in the Prometheus text format, or OpenMetrics
// when the scraper asks for it (Accept: application/openmetrics-text): only
// OpenMetrics carries the histograms' exemplars.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		// A collector that fails answers 500, naming the error, rather than a
		// partial page whose missing series would go unnoticed.
		ErrorHandling:     promhttp.HTTPErrorOnError,
		EnableOpenMetrics: true,
		// Concurrent scrapes beyond this are refused with 503 instead of
		// piling up gathers.
		MaxRequestsInFlight: 4,
	})
}
