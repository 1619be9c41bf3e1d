// Package opsassets holds no code, only the tests of rulevalidator's
// operations assets: the Prometheus configuration and alert rules
// (ops/prometheus), the Grafana dashboard (ops/grafana), the Kubernetes
// manifests (ops/k8s) and the Helm chart of the same objects
// (ops/helm/rulevalidator), docker-compose.yml, the Dockerfile,
// ops/prometheus.sh and ops/jaeger.sh.
//
// The tests keep those files in step with the code and with each other:
// every PromQL expression names only metrics the metrics package exports,
// every environment variable is one `rulevalidator serve` reads, and ports,
// topics and credentials agree with the no-Docker scripts in ops/. Where
// promtool and prometheus are installed (`bash ops/tools.sh install
// prometheus`), and helm (`bash ops/helm.sh install`), the tests also run
// them; otherwise those tests skip, saying why, unless
// RULEVALIDATOR_REQUIRE_INTEGRATION=1 makes them fail.
package opsassets
