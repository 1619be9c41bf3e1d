package opsassets

import (
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       string            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	// The long form only: every dependency says what it waits for.
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Restart         string `yaml:"restart"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

func (s composeService) oneShot() bool { return s.Restart == "no" }

func readCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	decodeYAML(t, "docker-compose.yml", &c)
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml has no services")
	}
	return c
}

func service(t *testing.T, c composeFile, name string) composeService {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %s", name)
	}
	return s
}

// hostPort is one published port: "127.0.0.1:HOST:CONTAINER".
type hostPort struct{ ip, host, container string }

// publishedPorts reads a service's ports, which must all be bound to loopback.
func publishedPorts(t *testing.T, name string, s composeService) []hostPort {
	t.Helper()
	var out []hostPort
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		if len(parts) != 3 {
			t.Errorf("service %s: port %q, want IP:HOST:CONTAINER", name, p)
			continue
		}
		if parts[0] != "127.0.0.1" {
			t.Errorf("service %s: port %q is published beyond loopback, unlike the ops scripts", name, p)
		}
		out = append(out, hostPort{parts[0], parts[1], parts[2]})
	}
	return out
}

// publishes fails the test unless service name publishes host port host, from
// container port container when that is not empty.
func publishes(t *testing.T, c composeFile, name, host, container string) {
	t.Helper()
	for _, p := range publishedPorts(t, name, service(t, c, name)) {
		if p.host == host {
			if container != "" && p.container != container {
				t.Errorf("service %s publishes host port %s from container port %s, want %s", name, host, p.container, container)
			}
			return
		}
	}
	t.Errorf("service %s does not publish host port %s (ports %v)", name, host, service(t, c, name).Ports)
}

func TestComposeServicesAreHealthyOrOneShot(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		healthy := s.Healthcheck != nil && len(s.Healthcheck.Test) > 0
		if !healthy && !s.oneShot() {
			t.Errorf("service %s has no healthcheck and is not a one-shot (restart: \"no\"): `up --wait` cannot tell when it is ready", name)
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			case target.oneShot() && d.Condition != "service_completed_successfully":
				t.Errorf("service %s waits for one-shot %s with %q, want service_completed_successfully", name, dep, d.Condition)
			case !target.oneShot() && d.Condition != "service_healthy":
				t.Errorf("service %s waits for %s with %q, want service_healthy", name, dep, d.Condition)
			}
		}
	}
}

func TestComposeMatchesTheScripts(t *testing.T) {
	c := readCompose(t)
	settings := readServeSettings(t)
	rv := service(t, c, "rulevalidator")

	publishes(t, c, "kafka", scriptDefault(t, "ops/kafka.sh", "KAFKA_PORT"), "")
	publishes(t, c, "minio", scriptDefault(t, "ops/s3.sh", "S3_PORT"), portOf(t, rv.Environment["S3_ENDPOINT"]))
	llm, err := url.Parse(rv.Environment["OPENAI_BASE_URL"])
	if err != nil {
		t.Fatalf("OPENAI_BASE_URL: %v", err)
	}
	publishes(t, c, llm.Hostname(), scriptDefault(t, "ops/llm.sh", "LLM_PORT"), llm.Port())
	publishes(t, c, "prometheus", scriptDefault(t, "ops/prometheus.sh", "PROM_PORT"), "")
	opsPort := portOf(t, rv.Environment["RULEVALIDATOR_OPS_ADDR"])
	publishes(t, c, "rulevalidator", portOf(t, settings.defaults["RULEVALIDATOR_OPS_ADDR"]), opsPort)
	// The public API's port, as the Kubernetes manifests give it.
	var cm configMap
	decodeKind(t, readManifests(t), "ConfigMap", &cm)
	httpPort := portOf(t, cm.Data["RULEVALIDATOR_HTTP_ADDR"])
	publishes(t, c, "rulevalidator", httpPort, httpPort)

	// Endpoints name services of the stack.
	for env, host := range map[string]string{
		"S3_ENDPOINT":                 strings.Split(rv.Environment["S3_ENDPOINT"], ":")[0],
		"OPENAI_BASE_URL":             llm.Hostname(),
		"RULEVALIDATOR_KAFKA_BROKERS": strings.Split(rv.Environment["RULEVALIDATOR_KAFKA_BROKERS"], ":")[0],
	} {
		if _, ok := c.Services[host]; !ok {
			t.Errorf("rulevalidator's %s names %q, which is no service of the stack", env, host)
		}
	}
	if brokers, advertised := rv.Environment["RULEVALIDATOR_KAFKA_BROKERS"], service(t, c, "kafka").Environment["KAFKA_ADVERTISED_LISTENERS"]; !strings.Contains(advertised, "//"+brokers) {
		t.Errorf("rulevalidator connects to %s, which Kafka does not advertise (%s)", brokers, advertised)
	}

	// Credentials and bucket as ops/s3.sh has them.
	minio, buckets := service(t, c, "minio"), service(t, c, "createbuckets")
	for _, v := range []struct{ where, got, scriptVar string }{
		{"minio MINIO_ROOT_USER", minio.Environment["MINIO_ROOT_USER"], "S3_ACCESS_KEY"},
		{"minio MINIO_ROOT_PASSWORD", minio.Environment["MINIO_ROOT_PASSWORD"], "S3_SECRET_KEY"},
		{"rulevalidator S3_ACCESS_KEY", rv.Environment["S3_ACCESS_KEY"], "S3_ACCESS_KEY"},
		{"rulevalidator S3_SECRET_KEY", rv.Environment["S3_SECRET_KEY"], "S3_SECRET_KEY"},
		{"rulevalidator S3_BUCKET", rv.Environment["S3_BUCKET"], "S3_BUCKET"},
		{"createbuckets S3_BUCKET", buckets.Environment["S3_BUCKET"], "S3_BUCKET"},
	} {
		if want := scriptDefault(t, "ops/s3.sh", v.scriptVar); v.got != want {
			t.Errorf("%s is %q; ops/s3.sh's %s is %q", v.where, v.got, v.scriptVar, want)
		}
	}

	// Kafka as ops/kafka.sh runs it.
	version := scriptDefault(t, "ops/kafka.sh", "KAFKA_VERSION")
	for _, name := range []string{"kafka", "init-topics"} {
		if img := service(t, c, name).Image; img != "apache/kafka:"+version {
			t.Errorf("service %s runs %s; ops/kafka.sh runs Kafka %s", name, img, version)
		}
	}
}

var createTopic = regexp.MustCompile(`(?m)^\s*create (\S+) ([0-9]+)((?: \S+=\S+)*)\s*$`)

func TestComposeCreatesTheScriptsTopics(t *testing.T) {
	c := readCompose(t)
	script := strings.Join(service(t, c, "init-topics").Command, "\n")
	got := map[string]string{}
	for _, m := range createTopic.FindAllStringSubmatch(script, -1) {
		got[m[1]] = m[2] + strings.TrimRight(m[3], " ")
	}
	want := map[string]string{}
	for _, spec := range kafkaTopicSpecs(t) {
		want[spec.name] = strings.Join(append([]string{strconv.Itoa(spec.partitions)}, spec.configs...), " ")
	}
	if !maps.Equal(got, want) {
		t.Errorf("init-topics creates %v (name: partitions configs), ops/kafka.sh %v", got, want)
	}
}

func TestComposeRulevalidator(t *testing.T) {
	c := readCompose(t)
	settings := readServeSettings(t)
	commands := subcommands(t)
	entrypoint := dockerfileEntrypoint(t)

	for _, name := range []string{"rulevalidator", "init-rulesets"} {
		s := service(t, c, name)
		if s.Build != "." {
			t.Errorf("service %s builds %q, want the repository's Dockerfile (.)", name, s.Build)
		}
		if len(s.Command) == 0 || !commands[s.Command[0]] {
			t.Errorf("service %s runs `rulevalidator %s`, which cmd/rulevalidator does not define (it has %v)", name, strings.Join(s.Command, " "), sorted(commands))
		}
	}
	rv := service(t, c, "rulevalidator")
	for env := range rv.Environment {
		if !settings.env[env] {
			t.Errorf("rulevalidator's environment sets %s, which `rulevalidator serve` does not read", env)
		}
	}

	// The healthcheck runs the binary itself: the image has no shell or curl.
	test := rv.Healthcheck.Test
	if len(test) < 3 || test[0] != "CMD" || test[1] != entrypoint {
		t.Fatalf("rulevalidator's healthcheck %v, want [CMD %s SUBCOMMAND ...]", test, entrypoint)
	}
	if !commands[test[2]] {
		t.Errorf("rulevalidator's healthcheck runs `rulevalidator %s`, which cmd/rulevalidator does not define (it has %v)", test[2], sorted(commands))
	}
	opsPort := portOf(t, rv.Environment["RULEVALIDATOR_OPS_ADDR"])
	if probe := strings.Join(test, " "); !strings.Contains(probe, ":"+opsPort+"/readyz") {
		t.Errorf("rulevalidator's healthcheck %v does not probe /readyz on the ops port %s", test, opsPort)
	}

	drain, err := time.ParseDuration(settings.defaults["RULEVALIDATOR_DRAIN_TIMEOUT"])
	if err != nil {
		t.Fatal(err)
	}
	grace, err := time.ParseDuration(rv.StopGracePeriod)
	if err != nil || grace <= drain {
		t.Errorf("stop_grace_period %q, want longer than the drain timeout %v", rv.StopGracePeriod, drain)
	}

	// The rulesets it publishes are the repository's examples.
	rs := service(t, c, "init-rulesets")
	mounts := map[string]string{}
	for _, v := range rs.Volumes {
		parts := strings.Split(v, ":")
		mounts[parts[1]] = parts[0]
	}
	for i, arg := range rs.Command {
		if arg != "--file" || i+1 == len(rs.Command) {
			continue
		}
		file := rs.Command[i+1]
		var local string
		for inside, outside := range mounts {
			if rel, ok := strings.CutPrefix(file, inside+"/"); ok {
				local = filepath.Join(outside, rel)
			}
		}
		if _, err := os.Stat(filepath.Join(root, local)); local == "" || err != nil {
			t.Errorf("init-rulesets publishes %s, which is not a mounted repository file (mounts %v)", file, rs.Volumes)
		}
	}
}

func TestComposePrometheus(t *testing.T) {
	c := readCompose(t)
	p := service(t, c, "prometheus")
	if !slices.Contains(p.Volumes, "./ops/prometheus:/etc/prometheus:ro") {
		t.Errorf("prometheus mounts %v, want ./ops/prometheus:/etc/prometheus:ro", p.Volumes)
	}
	if !slices.Contains(p.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus runs %v, want --config.file=/etc/prometheus/prometheus.yml", p.Command)
	}
	var cfg promConfig
	decodeYAML(t, "ops/prometheus/prometheus.yml", &cfg)
	opsPort := portOf(t, service(t, c, "rulevalidator").Environment["RULEVALIDATOR_OPS_ADDR"])
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				if target != "rulevalidator:"+opsPort {
					t.Errorf("prometheus.yml scrapes %s, want the compose service rulevalidator:%s", target, opsPort)
				}
			}
		}
	}
}

// TestComposeNamesTheModelOnce checks that the model is named in one place.
func TestComposeNamesTheModelOnce(t *testing.T) {
	raw := repoFile(t, "docker-compose.yml")
	var top map[string]any
	if err := yaml.Unmarshal([]byte(raw), &top); err != nil {
		t.Fatal(err)
	}
	model, _ := top["x-model"].(string)
	if model == "" {
		t.Fatal("docker-compose.yml has no x-model")
	}
	if n := strings.Count(raw, model); n != 1 {
		t.Errorf("the model %s is named %d times in docker-compose.yml; refer to x-model instead", model, n)
	}
	c := readCompose(t)
	if got := service(t, c, "rulevalidator").Environment["RULEVALIDATOR_MODEL"]; got != model {
		t.Errorf("rulevalidator uses model %q, x-model is %q", got, model)
	}
	if got := service(t, c, "ollama-pull").Command; !slices.Equal(got, []string{"pull", model}) {
		t.Errorf("ollama-pull runs %v, want [pull %s]", got, model)
	}
}
