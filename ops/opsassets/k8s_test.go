package opsassets

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const k8sDir = "ops/k8s"

// k8sObject is one manifest document: its identity, where it came from, and
// the document itself for decoding into a kind's own struct.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	file string
	node yaml.Node
}

func (o k8sObject) String() string { return o.file + ": " + o.Kind + "/" + o.Metadata.Name }

// readManifests decodes every document of every YAML file under ops/k8s.
func readManifests(t *testing.T) []k8sObject {
	t.Helper()
	var objs []k8sObject
	err := filepath.WalkDir(filepath.Join(root, k8sDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		objs = append(objs, decodeManifests(t, rel, repoFile(t, rel))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeManifests decodes the objects of a multi-document YAML text, named
// file in messages; documents holding nothing (comments alone) are skipped.
func decodeManifests(t *testing.T, file, text string) []k8sObject {
	t.Helper()
	var objs []k8sObject
	dec := yaml.NewDecoder(strings.NewReader(text))
	for i := 0; ; i++ {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s, document %d: %v", file, i+1, err)
		}
		if len(node.Content) == 0 || node.Content[0].Kind == yaml.ScalarNode && node.Content[0].Tag == "!!null" {
			continue
		}
		obj := k8sObject{file: file, node: node}
		if err := node.Decode(&obj); err != nil {
			t.Fatalf("%s, document %d: %v", file, i+1, err)
		}
		if obj.Kind == "" || obj.APIVersion == "" || obj.Metadata.Name == "" {
			t.Fatalf("%s, document %d: apiVersion, kind and metadata.name are required", file, i+1)
		}
		objs = append(objs, obj)
	}
	return objs
}

// decodeKind decodes the one object of kind into v and returns it.
func decodeKind(t *testing.T, objs []k8sObject, kind string, v any) k8sObject {
	t.Helper()
	var found []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("found %d %s objects in %s (%v), want 1", len(found), kind, k8sDir, found)
	}
	if err := found[0].node.Decode(v); err != nil {
		t.Fatalf("%s: %v", found[0], err)
	}
	return found[0]
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type deployment struct {
	Spec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
					RunAsUser    *int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []struct {
					Name  string   `yaml:"name"`
					Image string   `yaml:"image"`
					Args  []string `yaml:"args"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					Env []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					EnvFrom []struct {
						ConfigMapRef *struct {
							Name string `yaml:"name"`
						} `yaml:"configMapRef"`
						SecretRef *struct {
							Name string `yaml:"name"`
						} `yaml:"secretRef"`
					} `yaml:"envFrom"`
					Resources struct {
						Requests map[string]string `yaml:"requests"`
						Limits   map[string]string `yaml:"limits"`
					} `yaml:"resources"`
					LivenessProbe   probe `yaml:"livenessProbe"`
					ReadinessProbe  probe `yaml:"readinessProbe"`
					StartupProbe    probe `yaml:"startupProbe"`
					SecurityContext struct {
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
						Capabilities             struct {
							Drop []string `yaml:"drop"`
						} `yaml:"capabilities"`
					} `yaml:"securityContext"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name     string `yaml:"name"`
					EmptyDir *struct {
						SizeLimit string `yaml:"sizeLimit"`
					} `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type hpa struct {
	Spec struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource *struct {
				Name string `yaml:"name"`
			} `yaml:"resource"`
			External *metricSource `yaml:"external"`
			Pods     *metricSource `yaml:"pods"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

type metricSource struct {
	Metric struct {
		Name     string `yaml:"name"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"metric"`
}

type pdb struct {
	Spec struct {
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type secret struct {
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
}

func TestManifestKindsAndNamespace(t *testing.T) {
	objs := readManifests(t)
	want := map[string]string{
		"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1", "Deployment": "apps/v1", "Service": "v1",
		"HorizontalPodAutoscaler": "autoscaling/v2", "PodDisruptionBudget": "policy/v1",
	}
	var ns k8sObject
	decodeKind(t, objs, "Namespace", &ns)
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Kind] = true
		api, known := want[o.Kind]
		switch {
		case !known:
			t.Errorf("%s: unexpected kind", o)
		case o.APIVersion != api:
			t.Errorf("%s: apiVersion %s, want %s", o, o.APIVersion, api)
		}
		if o.Kind != "Namespace" && o.Metadata.Namespace != ns.Metadata.Name {
			t.Errorf("%s: namespace %q, want %q", o, o.Metadata.Namespace, ns.Metadata.Name)
		}
	}
	for kind := range want {
		if !have[kind] {
			t.Errorf("no %s in %s", kind, k8sDir)
		}
	}
}

// TestDeployment checks the pod against the settings the ConfigMap gives it.
func TestDeployment(t *testing.T) {
	objs := readManifests(t)
	settings := readServeSettings(t)
	var d deployment
	decodeKind(t, objs, "Deployment", &d)
	var cm configMap
	cmObj := decodeKind(t, objs, "ConfigMap", &cm)
	var sec secret
	secObj := decodeKind(t, objs, "Secret", &sec)

	if d.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) || len(d.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("selector %v does not select the pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("container args %v, want [serve]", c.Args)
	}

	// Ports: the listeners the ConfigMap configures, under the names the probes use.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, env := range map[string]string{"http": "RULEVALIDATOR_HTTP_ADDR", "ops": "RULEVALIDATOR_OPS_ADDR"} {
		addr, ok := cm.Data[env]
		if !ok {
			t.Errorf("%s: no %s; the %s listener would keep its loopback default", cmObj, env, name)
			continue
		}
		if addr != ":"+portOf(t, addr) && !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("%s: %s=%q listens on one interface; a pod needs :PORT", cmObj, env, addr)
		}
		if strconv.Itoa(ports[name]) != portOf(t, addr) {
			t.Errorf("container port %q is %d, but %s=%s", name, ports[name], env, addr)
		}
	}
	if got := pod.Containers[0].Ports; len(got) != 2 {
		t.Errorf("container ports %v, want http and ops", got)
	}
	if ann := d.Spec.Template.Metadata.Annotations; ann["prometheus.io/port"] != strconv.Itoa(ports["ops"]) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("prometheus.io annotations %v do not point at the ops port %d, /metrics", ann, ports["ops"])
	}

	for _, p := range []struct {
		name  string
		probe probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"startup", c.StartupProbe, "/healthz"},
	} {
		if p.probe.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe path %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if port := p.probe.HTTPGet.Port; port != "ops" && port != ports["ops"] {
			t.Errorf("%s probe port %v, want the ops port", p.name, port)
		}
	}

	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" || c.Resources.Limits[r] == "" {
			t.Errorf("%s: request %q, limit %q; both are needed", r, c.Resources.Requests[r], c.Resources.Limits[r])
		}
	}
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext must set runAsNonRoot: true and a non-zero runAsUser")
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Error("container securityContext must set readOnlyRootFilesystem: true")
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("container securityContext must set allowPrivilegeEscalation: false")
	}
	if len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container capabilities drop %v, want [ALL]", csc.Capabilities.Drop)
	}

	drain := settings.defaults["RULEVALIDATOR_DRAIN_TIMEOUT"]
	if v, ok := cm.Data["RULEVALIDATOR_DRAIN_TIMEOUT"]; ok {
		drain = v
	}
	drainTimeout, err := time.ParseDuration(drain)
	if err != nil {
		t.Fatalf("drain timeout %q: %v", drain, err)
	}
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= drainTimeout+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v leaves no room after the drain timeout %v", grace, drainTimeout)
	}

	// Environment: envFrom names the ConfigMap and Secret; every variable is read by serve.
	var fromCM, fromSecret bool
	for _, ef := range c.EnvFrom {
		fromCM = fromCM || ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == cmObj.Metadata.Name
		fromSecret = fromSecret || ef.SecretRef != nil && ef.SecretRef.Name == secObj.Metadata.Name
	}
	if !fromCM || !fromSecret {
		t.Errorf("envFrom does not take both ConfigMap %s and Secret %s", cmObj.Metadata.Name, secObj.Metadata.Name)
	}
	for _, e := range c.Env {
		if !settings.env[e.Name] && !goRuntimeEnv[e.Name] {
			t.Errorf("container env %s is read neither by `rulevalidator serve` nor by the Go runtime", e.Name)
		}
	}
	for name := range cm.Data {
		if !settings.env[name] {
			t.Errorf("%s: %s is not a setting of `rulevalidator serve`", cmObj, name)
		}
		if settings.secret[name] {
			t.Errorf("%s: %s is a credential; it belongs in the Secret", cmObj, name)
		}
	}
	if len(sec.Data) > 0 {
		t.Errorf("%s: use stringData with placeholders, not data", secObj)
	}
	if !strings.HasPrefix(secObj.file, k8sDir+"/example/") {
		t.Errorf("%s: the example Secret must stay out of ops/k8s/ itself, or `kubectl apply -f ops/k8s/` applies placeholders", secObj)
	}
	for name, value := range sec.StringData {
		if !settings.env[name] {
			t.Errorf("%s: %s is not a setting of `rulevalidator serve`", secObj, name)
		}
		if !strings.Contains(value, "REPLACE-ME") {
			t.Errorf("%s: %s = %q does not read as a placeholder (REPLACE-ME)", secObj, name, value)
		}
	}
}

// TestDeploymentGivesThePDFEngineAWritableCache: the root filesystem is
// read-only, the user's cache directory with it, so the PDF engine's
// compilation cache (RULEVALIDATOR_PDF_CACHE_DIR) is set to a directory on
// an emptyDir the container mounts writable, as is /tmp.
func TestDeploymentGivesThePDFEngineAWritableCache(t *testing.T) {
	const setting = "RULEVALIDATOR_PDF_CACHE_DIR"
	objs := readManifests(t)
	var d deployment
	decodeKind(t, objs, "Deployment", &d)
	var cm configMap
	decodeKind(t, objs, "ConfigMap", &cm)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	dir := cm.Data[setting]
	for _, e := range c.Env {
		if e.Name == setting {
			dir = e.Value
		}
	}
	if !path.IsAbs(dir) {
		t.Fatalf("%s = %q: the default, the user's cache directory, is on the read-only root filesystem; set an absolute directory on a writable volume", setting, dir)
	}
	emptyDirs := map[string]bool{}
	for _, v := range pod.Volumes {
		emptyDirs[v.Name] = v.EmptyDir != nil
	}
	// writable says whether dir is on an emptyDir mounted writable.
	writable := func(dir string) bool {
		for _, m := range c.VolumeMounts {
			under := dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/")
			if under && emptyDirs[m.Name] && !m.ReadOnly {
				return true
			}
		}
		return false
	}
	if !writable(dir) {
		t.Errorf("%s = %s is on no writable emptyDir mount (%+v); the PDF engine cannot keep its compiled code there", setting, dir, c.VolumeMounts)
	}
	if !writable("/tmp") {
		t.Error("/tmp is on no writable emptyDir mount; temporary files need one")
	}
}

func TestServicesSelectThePodPorts(t *testing.T) {
	objs := readManifests(t)
	var d deployment
	decodeKind(t, objs, "Deployment", &d)
	podLabels := d.Spec.Template.Metadata.Labels
	ports := map[string]int{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	var headless string
	var services int
	for _, o := range objs {
		if o.Kind != "Service" {
			continue
		}
		services++
		var s k8sService
		if err := o.node.Decode(&s); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if len(s.Spec.Selector) == 0 || !subset(s.Spec.Selector, podLabels) {
			t.Errorf("%s: selector %v does not select the pods %v", o, s.Spec.Selector, podLabels)
		}
		for _, p := range s.Spec.Ports {
			target, isName := p.TargetPort.(string)
			if !isName {
				t.Errorf("%s: port %s targets %v; name the container port instead", o, p.Name, p.TargetPort)
				continue
			}
			if ports[target] == 0 {
				t.Errorf("%s: port %s targets %q, which the container does not declare", o, p.Name, target)
			}
			if p.Port != ports[target] {
				t.Errorf("%s: port %s is %d, the container's %s is %d; keep them alike", o, p.Name, p.Port, target, ports[target])
			}
		}
		if s.Spec.ClusterIP == "None" {
			headless = o.Metadata.Name + "." + o.Metadata.Namespace + ".svc.cluster.local"
		}
	}
	if services != 2 || headless == "" {
		t.Fatalf("want 2 Services, one of them headless for scraping; found %d (headless %q)", services, headless)
	}

	// ops/prometheus/kubernetes.yml resolves the headless Service.
	var cfg promConfig
	decodeYAML(t, "ops/prometheus/kubernetes.yml", &cfg)
	var names []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, dns := range sc.DNSSDConfigs {
			names = append(names, dns.Names...)
			if dns.Port != ports["ops"] {
				t.Errorf("kubernetes.yml scrapes port %d, the pods' ops port is %d", dns.Port, ports["ops"])
			}
		}
	}
	if len(names) != 1 || names[0] != headless {
		t.Errorf("kubernetes.yml resolves %v, want [%s]", names, headless)
	}
}

func TestAutoscalingAndDisruptions(t *testing.T) {
	objs := readManifests(t)
	var d deployment
	dObj := decodeKind(t, objs, "Deployment", &d)
	var h hpa
	hObj := decodeKind(t, objs, "HorizontalPodAutoscaler", &h)
	var b pdb
	bObj := decodeKind(t, objs, "PodDisruptionBudget", &b)

	ref := h.Spec.ScaleTargetRef
	if ref.APIVersion != dObj.APIVersion || ref.Kind != dObj.Kind || ref.Name != dObj.Metadata.Name {
		t.Errorf("%s scales %s %s/%s, not the Deployment %s", hObj, ref.APIVersion, ref.Kind, ref.Name, dObj.Metadata.Name)
	}
	partitions := requestPartitions(t)
	if h.Spec.MaxReplicas > partitions {
		t.Errorf("%s: maxReplicas %d exceeds the requests topic's %d partitions; the extra replicas would sit idle", hObj, h.Spec.MaxReplicas, partitions)
	}
	if h.Spec.MinReplicas < 1 || h.Spec.MinReplicas > d.Spec.Replicas || d.Spec.Replicas > h.Spec.MaxReplicas {
		t.Errorf("%s: want minReplicas (%d) <= the Deployment's replicas (%d) <= maxReplicas (%d)", hObj, h.Spec.MinReplicas, d.Spec.Replicas, h.Spec.MaxReplicas)
	}
	exported := exportedSeries(t)
	var cpu, lag bool
	for _, m := range h.Spec.Metrics {
		switch {
		case m.Type == "Resource" && m.Resource != nil && m.Resource.Name == "cpu":
			cpu = true
		case m.Type == "External" && m.External != nil, m.Type == "Pods" && m.Pods != nil:
			src := m.External
			if src == nil {
				src = m.Pods
			}
			info, ok := exported[src.Metric.Name]
			if !ok {
				t.Errorf("%s: metric %s is not exported by package metrics", hObj, src.Metric.Name)
				continue
			}
			for l := range src.Metric.Selector.MatchLabels {
				if !info.labels[l] {
					t.Errorf("%s: metric %s has no label %s", hObj, src.Metric.Name, l)
				}
			}
			lag = lag || src.Metric.Name == "rulevalidator_consumer_lag_messages"
		}
	}
	if !cpu || !lag {
		t.Errorf("%s: scales on cpu %v, on consumer lag %v; want both", hObj, cpu, lag)
	}

	if !subset(b.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) || len(b.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("%s: selector %v does not select the pods", bObj, b.Spec.Selector.MatchLabels)
	}
	if (b.Spec.MaxUnavailable == nil) == (b.Spec.MinAvailable == nil) {
		t.Errorf("%s: set exactly one of maxUnavailable and minAvailable", bObj)
	}
	if n, ok := b.Spec.MaxUnavailable.(int); ok && (n < 1 || n >= h.Spec.MinReplicas) {
		t.Errorf("%s: maxUnavailable %d, want at least 1 and fewer than minReplicas %d", bObj, n, h.Spec.MinReplicas)
	}
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
