package opsassets

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/opsscript"
)

const helmChart = "ops/helm/rulevalidator"

// helmOnly are the label and annotation keys the chart adds to what
// ops/k8s sets: Helm's own labels, and the checksum that rolls the pods when
// the settings change.
var helmOnly = map[string]bool{
	"app.kubernetes.io/instance":   true,
	"app.kubernetes.io/managed-by": true,
	"app.kubernetes.io/version":    true,
	"helm.sh/chart":                true,
	"checksum/config":              true,
}

// requireHelm returns the helm that ops/helm.sh built, or one on PATH; with
// neither the test skips, or fails with RULEVALIDATOR_REQUIRE_INTEGRATION=1.
func requireHelm(t *testing.T) string {
	t.Helper()
	out, stderr, err := opsscript.Run(time.Minute, "helm.sh", "path")
	if err == nil {
		return strings.TrimSpace(out)
	}
	if path, lookErr := exec.LookPath("helm"); lookErr == nil {
		return path
	}
	opsscript.Unavailable(t, "Helm", "no helm on PATH, and ops/helm.sh path says: %s (it builds helm once, in a few minutes)",
		strings.TrimPrefix(strings.TrimSpace(stderr), "[helm] "))
	return ""
}

// helmTemplate renders the chart as release name in namespace rulevalidator,
// with extra arguments (--set ...); it returns the error helm gave, if any.
func helmTemplate(t *testing.T, helm, release string, args ...string) ([]k8sObject, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", release, helmChart, "--namespace", "rulevalidator"}, args...)...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return decodeManifests(t, "helm template "+strings.Join(args, " "), stdout.String()), nil
}

func mustTemplate(t *testing.T, helm string, args ...string) []k8sObject {
	t.Helper()
	objs, err := helmTemplate(t, helm, "rulevalidator", args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestHelmChartLints(t *testing.T) {
	helm := requireHelm(t)
	out := run(t, time.Minute, nil, helm, "lint", "--strict", helmChart)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint --strict %s:\n%s", helmChart, out)
	}
}

// TestHelmChartRendersTheManifests: with its default values the chart
// renders the objects of ops/k8s, field for field, but the Namespace (Helm's
// --namespace) and the example Secret, with Helm's labels beside theirs and
// no replica count while the HorizontalPodAutoscaler owns it.
func TestHelmChartRendersTheManifests(t *testing.T) {
	helm := requireHelm(t)
	rendered := map[string]any{}
	for _, o := range mustTemplate(t, helm) {
		key := o.Kind + "/" + o.Metadata.Name
		if _, dup := rendered[key]; dup {
			t.Errorf("the chart renders %s twice", key)
		}
		rendered[key] = withoutHelmKeys(generic(t, o))
	}
	plain := map[string]any{}
	var hpaMin int
	for _, o := range readManifests(t) {
		if o.Kind == "Namespace" || o.Kind == "Secret" {
			continue
		}
		plain[o.Kind+"/"+o.Metadata.Name] = generic(t, o)
		if o.Kind == "HorizontalPodAutoscaler" {
			var h hpa
			if err := o.node.Decode(&h); err != nil {
				t.Fatal(err)
			}
			hpaMin = h.Spec.MinReplicas
		}
	}
	for key, want := range plain {
		got, ok := rendered[key]
		if !ok {
			t.Errorf("the chart renders no %s (it renders %v)", key, sorted(rendered))
			continue
		}
		if strings.HasPrefix(key, "Deployment/") {
			spec := want.(map[string]any)["spec"].(map[string]any)
			if spec["replicas"] != hpaMin {
				t.Errorf("ops/k8s: the Deployment's replicas %v, the HPA's minReplicas %d; the chart starts at neither", spec["replicas"], hpaMin)
			}
			delete(spec, "replicas")
		}
		for _, d := range treeDiff(key, want, got) {
			t.Errorf("ops/k8s and the chart differ: %s", d)
		}
	}
	for key := range rendered {
		if _, ok := plain[key]; !ok {
			t.Errorf("the chart renders %s, which ops/k8s does not have", key)
		}
	}
}

// TestHelmChartValues: the values an operator sets reach every object that
// depends on them, and values that would make the objects disagree are refused.
func TestHelmChartValues(t *testing.T) {
	helm := requireHelm(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	byKey := func(objs []k8sObject) map[string]k8sObject {
		m := map[string]k8sObject{}
		for _, o := range objs {
			m[o.Kind+"/"+o.Metadata.Name] = o
		}
		return m
	}
	deploymentOf := func(t *testing.T, objs map[string]k8sObject, name string) (deployment, map[string]any) {
		t.Helper()
		o, ok := objs["Deployment/"+name]
		if !ok {
			t.Fatalf("no Deployment/%s in %v", name, sorted(objs))
		}
		var d deployment
		if err := o.node.Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d, generic(t, o)
	}
	configOf := func(t *testing.T, objs map[string]k8sObject, name string) map[string]string {
		t.Helper()
		o, ok := objs["ConfigMap/"+name]
		if !ok {
			t.Fatalf("no ConfigMap/%s in %v", name, sorted(objs))
		}
		var cm configMap
		if err := o.node.Decode(&cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	defaults := byKey(mustTemplate(t, helm))
	_, defaultPod := deploymentOf(t, defaults, "rulevalidator")

	t.Run("autoscaling and the budget off", func(t *testing.T) {
		objs := byKey(mustTemplate(t, helm, "--set", "autoscaling.enabled=false", "--set", "replicaCount=2",
			"--set", "podDisruptionBudget.enabled=false"))
		for _, key := range []string{"HorizontalPodAutoscaler/rulevalidator", "PodDisruptionBudget/rulevalidator"} {
			if _, ok := objs[key]; ok {
				t.Errorf("%s rendered although disabled", key)
			}
		}
		if d, _ := deploymentOf(t, objs, "rulevalidator"); d.Spec.Replicas != 2 {
			t.Errorf("replicas %d, want replicaCount 2", d.Spec.Replicas)
		}
	})

	t.Run("image by tag, then by digest", func(t *testing.T) {
		d, _ := deploymentOf(t, byKey(mustTemplate(t, helm, "--set", "image.tag=0.2.0")), "rulevalidator")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "registry.example.com/rulevalidator:0.2.0" {
			t.Errorf("image.tag=0.2.0: image %s", got)
		}
		if got := d.Spec.Template.Metadata.Labels["app.kubernetes.io/version"]; got != "0.2.0" {
			t.Errorf("image.tag=0.2.0: the pods' app.kubernetes.io/version is %q", got)
		}
		d, _ = deploymentOf(t, byKey(mustTemplate(t, helm, "--set", "image.tag=0.2.0", "--set", "image.digest="+digest)), "rulevalidator")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "registry.example.com/rulevalidator@"+digest {
			t.Errorf("image.digest: image %s, want the repository @ the digest", got)
		}
	})

	t.Run("the ops port moves everywhere", func(t *testing.T) {
		objs := byKey(mustTemplate(t, helm, "--set", "ports.ops=9500"))
		if got := configOf(t, objs, "rulevalidator")["RULEVALIDATOR_OPS_ADDR"]; got != ":9500" {
			t.Errorf("RULEVALIDATOR_OPS_ADDR %q, want :9500", got)
		}
		d, _ := deploymentOf(t, objs, "rulevalidator")
		ports := map[string]int{}
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = p.ContainerPort
		}
		if ports["ops"] != 9500 || d.Spec.Template.Metadata.Annotations["prometheus.io/port"] != "9500" {
			t.Errorf("container ports %v, scrape annotation %q; want ops on 9500", ports, d.Spec.Template.Metadata.Annotations["prometheus.io/port"])
		}
		for _, name := range []string{"rulevalidator", "rulevalidator-ops"} {
			o, ok := objs["Service/"+name]
			if !ok {
				t.Fatalf("no Service/%s in %v", name, sorted(objs))
			}
			var s k8sService
			if err := o.node.Decode(&s); err != nil {
				t.Fatal(err)
			}
			for _, p := range s.Spec.Ports {
				if p.Name == "ops" && p.Port != 9500 {
					t.Errorf("Service %s: ops port %d, want 9500", name, p.Port)
				}
			}
		}
	})

	t.Run("a setting changed rolls the pods", func(t *testing.T) {
		objs := byKey(mustTemplate(t, helm, "--set-string", "settings.RULEVALIDATOR_CONCURRENCY=16"))
		if got := configOf(t, objs, "rulevalidator")["RULEVALIDATOR_CONCURRENCY"]; got != "16" {
			t.Errorf("RULEVALIDATOR_CONCURRENCY %q, want 16", got)
		}
		d, _ := deploymentOf(t, objs, "rulevalidator")
		before := defaultPod["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)["checksum/config"]
		if after := d.Spec.Template.Metadata.Annotations["checksum/config"]; after == "" || after == before {
			t.Errorf("checksum/config %q after a change of settings, %q before; the pods would keep the old settings", after, before)
		}
	})

	t.Run("another release name", func(t *testing.T) {
		rendered, err := helmTemplate(t, helm, "prod")
		if err != nil {
			t.Fatal(err)
		}
		objs := byKey(rendered)
		d, _ := deploymentOf(t, objs, "prod-rulevalidator")
		if got := d.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name; got != "prod-rulevalidator" {
			t.Errorf("envFrom names ConfigMap %s, want prod-rulevalidator", got)
		}
		if _, ok := objs["Service/prod-rulevalidator-ops"]; !ok {
			t.Errorf("no headless Service prod-rulevalidator-ops in %v", sorted(objs))
		}
		if sel := d.Spec.Selector.MatchLabels; sel["app.kubernetes.io/instance"] != "prod" {
			t.Errorf("selector %v does not keep release prod's pods apart", sel)
		}
	})

	for _, refused := range []struct {
		name, set, says string
	}{
		{"a listener set as a setting", "settings.RULEVALIDATOR_OPS_ADDR=:1", "set ports.http and ports.ops instead"},
		{"no Secret named", "existingSecret=", "existingSecret"},
	} {
		t.Run("refused: "+refused.name, func(t *testing.T) {
			_, err := helmTemplate(t, helm, "rulevalidator", "--set", refused.set)
			if err == nil || !strings.Contains(err.Error(), refused.says) {
				t.Errorf("--set %s: %v; want a refusal saying %q", refused.set, err, refused.says)
			}
		})
	}
}

// TestHelmValuesMatchTheConfigMap holds the chart's settings to the
// ConfigMap of ops/k8s without helm: the same variables with the same
// values, the listeners from ports.
func TestHelmValuesMatchTheConfigMap(t *testing.T) {
	var values struct {
		Settings map[string]string `yaml:"settings"`
		Ports    struct {
			HTTP int `yaml:"http"`
			Ops  int `yaml:"ops"`
		} `yaml:"ports"`
	}
	decodeYAML(t, helmChart+"/values.yaml", &values)
	var cm configMap
	decodeKind(t, readManifests(t), "ConfigMap", &cm)
	want := map[string]string{}
	for k, v := range values.Settings {
		want[k] = v
	}
	want["RULEVALIDATOR_HTTP_ADDR"] = fmt.Sprintf(":%d", values.Ports.HTTP)
	want["RULEVALIDATOR_OPS_ADDR"] = fmt.Sprintf(":%d", values.Ports.Ops)
	asAny := func(m map[string]string) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, d := range treeDiff("data", asAny(cm.Data), asAny(want)) {
		t.Errorf("the ConfigMap of ops/k8s and the one %s/values.yaml gives differ: %s", helmChart, d)
	}
}

// generic is a manifest as plain values, for comparing whole objects.
func generic(t *testing.T, o k8sObject) map[string]any {
	t.Helper()
	var v map[string]any
	if err := o.node.Decode(&v); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
	return v
}

// withoutHelmKeys drops the helmOnly keys from every map in v.
func withoutHelmKeys(v any) map[string]any {
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if helmOnly[k] {
					delete(v, k)
					continue
				}
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(v)
	return v.(map[string]any)
}

// treeDiff lists where two decoded YAML trees differ, by path.
func treeDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v in ops/k8s, %v in the chart", path, want, got)}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var diffs []string
		for _, k := range sorted(keys) {
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inG:
				diffs = append(diffs, fmt.Sprintf("%s.%s: %v in ops/k8s, absent from the chart", path, k, wv))
			case !inW:
				diffs = append(diffs, fmt.Sprintf("%s.%s: absent from ops/k8s, %v in the chart", path, k, gv))
			default:
				diffs = append(diffs, treeDiff(path+"."+k, wv, gv)...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v in ops/k8s, %v in the chart", path, want, got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, treeDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: %#v in ops/k8s, %#v in the chart", path, want, got)}
		}
		return nil
	}
}
