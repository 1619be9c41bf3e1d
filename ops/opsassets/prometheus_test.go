package opsassets

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTests []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

// decodeYAML decodes the fields of v from a YAML file; others are ignored
// (promtool and the other tools check the files' full structure).
func decodeYAML(t *testing.T, rel string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(repoFile(t, rel)), v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// promConfigs are the Prometheus configurations: docker-compose (and, rendered
// by ops/prometheus.sh, local) and Kubernetes.
var promConfigs = []string{"ops/prometheus/prometheus.yml", "ops/prometheus/kubernetes.yml"}

func TestAlertRulesAreComplete(t *testing.T) {
	var rules ruleFile
	decodeYAML(t, "ops/prometheus/alerts.yml", &rules)
	exported := exportedSeries(t)
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				t.Errorf("group %s: rule %q is not an alert; alerts.yml holds alerts only", g.Name, r.Record)
				continue
			}
			if seen[name] {
				t.Errorf("%s is defined twice", name)
			}
			seen[name] = true
			if r.For == "" {
				t.Errorf("%s has no `for`: a single bad evaluation would page", name)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", name, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s has no %s annotation", name, a)
				}
			}
			for _, err := range checkExpr(exported, r.Expr) {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("alerts.yml defines no alert")
	}
}

// TestEveryAlertIsTestedFiringAndQuiet checks that alerts_test.yml shows each
// alert both firing and not firing, and tests no alert that does not exist.
func TestEveryAlertIsTestedFiringAndQuiet(t *testing.T) {
	var rules ruleFile
	decodeYAML(t, "ops/prometheus/alerts.yml", &rules)
	var tests ruleTestFile
	decodeYAML(t, "ops/prometheus/alerts_test.yml", &tests)
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("alerts_test.yml loads %v, want [alerts.yml]", tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	defined := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			defined[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alerts_test.yml never shows %s firing", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alerts_test.yml never shows %s not firing", r.Alert)
			}
		}
	}
	for name := range fires {
		if !defined[name] {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", name)
		}
	}
	for name := range quiet {
		if !defined[name] {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", name)
		}
	}
}

var seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$`)
var leLabel = regexp.MustCompile(`\ble="([^"]+)"`)

// TestAlertTestSeriesAreRealSeries checks that the unit tests feed series the
// service exports, and histogram buckets at the bounds it uses: a test on
// made-up buckets could pass while the real quantile differs.
func TestAlertTestSeriesAreRealSeries(t *testing.T) {
	var tests ruleTestFile
	decodeYAML(t, "ops/prometheus/alerts_test.yml", &tests)
	exported := exportedSeries(t)
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			m := seriesName.FindStringSubmatch(strings.TrimSpace(in.Series))
			if m == nil {
				t.Errorf("input series %q: expected name{labels}", in.Series)
				continue
			}
			if m[1] == "up" && strings.Contains(m[2], `job="node"`) {
				continue // another job's target, to show an alert ignoring it
			}
			for _, err := range checkExpr(exported, in.Series) {
				t.Errorf("input series: %v", err)
			}
			le := leLabel.FindStringSubmatch(m[2])
			if le == nil {
				continue
			}
			bound, err := strconv.ParseFloat(le[1], 64)
			if err != nil {
				t.Errorf("input series %s: le %q is not a number", in.Series, le[1])
				continue
			}
			info := exported[m[1]]
			if !slices.Contains(info.buckets, bound) && le[1] != "+Inf" {
				t.Errorf("input series %s: le=%q is not a bucket of %s (buckets %v)", in.Series, le[1], info.family, info.buckets)
			}
		}
	}
}

func TestPrometheusConfigsScrapeTheOpsPort(t *testing.T) {
	opsPort := portOf(t, readServeSettings(t).defaults["RULEVALIDATOR_OPS_ADDR"])
	jobs := alertJobs(t)
	for _, rel := range promConfigs {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			var cfg promConfig
			decodeYAML(t, rel, &cfg)
			if !slices.Equal(cfg.RuleFiles, []string{"alerts.yml"}) {
				t.Errorf("rule_files %v, want [alerts.yml]", cfg.RuleFiles)
			}
			var found bool
			for _, sc := range cfg.ScrapeConfigs {
				if !jobs[sc.JobName] {
					continue
				}
				found = true
				if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
					t.Errorf("job %s scrapes %s, but the service serves /metrics", sc.JobName, sc.MetricsPath)
				}
				for _, st := range sc.StaticConfigs {
					for _, target := range st.Targets {
						if portOf(t, target) != opsPort {
							t.Errorf("job %s scrapes %s, not the ops port %s", sc.JobName, target, opsPort)
						}
					}
				}
				for _, dns := range sc.DNSSDConfigs {
					if strconv.Itoa(dns.Port) != opsPort {
						t.Errorf("job %s scrapes port %d, not the ops port %s", sc.JobName, dns.Port, opsPort)
					}
				}
			}
			if !found {
				t.Errorf("no scrape config has the job the alerts select (%v)", sorted(jobs))
			}
		})
	}
}

var jobMatcher = regexp.MustCompile(`\bjob="([^"]+)"`)

// alertJobs are the job names the alerts select.
func alertJobs(t *testing.T) map[string]bool {
	t.Helper()
	jobs := map[string]bool{}
	for _, m := range jobMatcher.FindAllStringSubmatch(repoFile(t, "ops/prometheus/alerts.yml"), -1) {
		jobs[m[1]] = true
	}
	if len(jobs) != 1 {
		t.Fatalf("alerts.yml selects jobs %v, want exactly one", sorted(jobs))
	}
	return jobs
}

func TestPromtool(t *testing.T) {
	promtool := requirePromtool(t)
	for _, rel := range promConfigs {
		t.Run("check config "+rel, func(t *testing.T) {
			run(t, time.Minute, nil, promtool, "check", "config", rel)
		})
	}
	t.Run("check rules", func(t *testing.T) {
		run(t, time.Minute, nil, promtool, "check", "rules", "ops/prometheus/alerts.yml")
	})
	t.Run("test rules", func(t *testing.T) {
		out := run(t, time.Minute, nil, promtool, "test", "rules", "ops/prometheus/alerts_test.yml")
		if !strings.Contains(out, "SUCCESS") {
			t.Errorf("promtool test rules did not report SUCCESS:\n%s", out)
		}
	})
	t.Run("rendered local config", func(t *testing.T) {
		runDir := t.TempDir()
		env := []string{"RULEVALIDATOR_CACHE=" + runDir, "RULEVALIDATOR_RUN=" + runDir, "RULEVALIDATOR_OPS_ADDR=:9999"}
		path := strings.TrimSpace(lastLine(run(t, time.Minute, env, "bash", "ops/prometheus.sh", "render")))
		rendered, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(rendered), "- 127.0.0.1:9999\n") {
			t.Errorf("the rendered config does not scrape 127.0.0.1:9999:\n%s", rendered)
		}
		run(t, time.Minute, nil, promtool, "check", "config", path)
	})
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// getJSON fetches url and decodes Prometheus's API envelope into data.
func getJSON(url string, data any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	env := struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}{}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: status %q", url, env.Status)
	}
	return json.Unmarshal(env.Data, data)
}

// TestPrometheusScript starts ops/prometheus.sh against a service that is not
// there, checks that Prometheus loaded every alert and scrapes the ops
// address, and that stop leaves no process behind.
func TestPrometheusScript(t *testing.T) {
	requireTool(t, "prometheus", "bash ops/tools.sh install prometheus")
	requireTool(t, "curl", "apt-get install curl")
	dir := t.TempDir()
	promPort, opsPort := freePort(t), freePort(t)
	env := []string{
		"RULEVALIDATOR_CACHE=" + dir, "RULEVALIDATOR_RUN=" + filepath.Join(dir, "run"),
		"PROM_PORT=" + strconv.Itoa(promPort), fmt.Sprintf("RULEVALIDATOR_OPS_ADDR=127.0.0.1:%d", opsPort),
	}
	pidFile := filepath.Join(dir, "run", "prometheus.pid")
	t.Cleanup(func() {
		// After a failure half way: t.Context is already cancelled here.
		if _, err := os.Stat(pidFile); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stop := exec.CommandContext(ctx, "bash", "ops/prometheus.sh", "stop")
		stop.Dir, stop.Env = root, append(os.Environ(), env...)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("ops/prometheus.sh stop: %v\n%s", err, out)
		}
	})
	run(t, time.Minute, env, "bash", "ops/prometheus.sh", "start")
	run(t, 10*time.Second, env, "bash", "ops/prometheus.sh", "status")
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)

	var rules struct {
		Groups []struct {
			Rules []struct {
				Name   string `json:"name"`
				Health string `json:"health"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := getJSON(base+"/api/v1/rules", &rules); err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			loaded = append(loaded, r.Name)
		}
	}
	var file ruleFile
	decodeYAML(t, "ops/prometheus/alerts.yml", &file)
	var want []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			want = append(want, r.Alert)
		}
	}
	if !slices.Equal(loaded, want) {
		t.Errorf("Prometheus loaded the alerts %v, want %v", loaded, want)
	}

	wantURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", opsPort)
	var scrapeURLs []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		var targets struct {
			Active []struct {
				ScrapeURL string            `json:"scrapeUrl"`
				Labels    map[string]string `json:"labels"`
			} `json:"activeTargets"`
		}
		if err := getJSON(base+"/api/v1/targets", &targets); err != nil {
			t.Fatal(err)
		}
		scrapeURLs = scrapeURLs[:0]
		for _, tg := range targets.Active {
			scrapeURLs = append(scrapeURLs, tg.Labels["job"]+" "+tg.ScrapeURL)
		}
		if len(scrapeURLs) > 0 {
			break
		}
	}
	if !slices.Equal(scrapeURLs, []string{"rulevalidator " + wantURL}) {
		t.Errorf("Prometheus scrapes %v, want [rulevalidator %s]", scrapeURLs, wantURL)
	}

	pidText, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("pid file %s: %v", pidFile, err)
	}
	run(t, time.Minute, env, "bash", "ops/prometheus.sh", "stop")
	if processRuns(pid) {
		t.Errorf("prometheus (pid %d) still runs after stop", pid)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("stop left the pid file %s behind (%v)", pidFile, err)
	}
	if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", promPort)); err == nil {
		conn.Close()
		t.Errorf("port %d still answers after stop", promPort)
	}
}
