package deploy

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// builds are the kustomizations the test builds: every overlay, and KServe's.
var builds = []string{"overlays/dev", "overlays/production", "overlays/keda", "overlays/persistent", "kserve"}

// objects are one build's resources, decoded strictly by kind.
type objects struct {
	dir             string
	deployments     []appsv1.Deployment
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	pvcs            []corev1.PersistentVolumeClaim
	pdbs            []policyv1.PodDisruptionBudget
	hpas            []autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors []monitoringv1.ServiceMonitor
	scaledObjects   []scaledObject
	runtimes        []servingRuntime
	isvcs           []inferenceService
}

// decodeInto decodes one object strictly (unknown and duplicate fields
// fail) and appends it to list.
func decodeInto[T any](b []byte, list *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

// build runs Kustomize on dir in process and decodes what it emits.
func build(t *testing.T, dir string) *objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	o := &objects{dir: dir}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind := r.GetApiVersion() + " " + r.GetKind()
		switch kind {
		case "apps/v1 Deployment":
			err = decodeInto(b, &o.deployments)
		case "v1 Service":
			err = decodeInto(b, &o.services)
		case "v1 ConfigMap":
			err = decodeInto(b, &o.configMaps)
		case "v1 PersistentVolumeClaim":
			err = decodeInto(b, &o.pvcs)
		case "policy/v1 PodDisruptionBudget":
			err = decodeInto(b, &o.pdbs)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			err = decodeInto(b, &o.hpas)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = decodeInto(b, &o.serviceMonitors)
		case "keda.sh/v1alpha1 ScaledObject":
			err = decodeInto(b, &o.scaledObjects)
		case "serving.kserve.io/v1alpha1 ServingRuntime":
			err = decodeInto(b, &o.runtimes)
		case "serving.kserve.io/v1beta1 InferenceService":
			err = decodeInto(b, &o.isvcs)
		default:
			t.Fatalf("%s: %s %q: a kind this test does not decode", dir, kind, r.GetName())
		}
		if err != nil {
			t.Fatalf("%s: %s %q does not decode strictly: %v", dir, kind, r.GetName(), err)
		}
	}
	return o
}

// TestManifests builds every kustomization and checks what holds without
// a cluster: strict decoding (build), the references between objects
// (selectors, ports, names, volumes), the exit timing, and the autoscaling
// metric's path to prometheus-adapter. TestManifestsAgainstBinary checks
// the probes and the metrics against a running sluice.
func TestManifests(t *testing.T) {
	rules := adapter(t)
	for _, dir := range builds {
		t.Run(dir, func(t *testing.T) {
			o := build(t, dir)
			if len(o.deployments)+len(o.runtimes) == 0 {
				t.Fatal("no workload")
			}
			for _, d := range o.deployments {
				checkDeployment(t, o, &d)
			}
			for _, s := range o.services {
				checkService(t, o, &s)
			}
			for _, p := range o.pdbs {
				sel := selector(t, p.Spec.Selector)
				if !slices.ContainsFunc(o.deployments, func(d appsv1.Deployment) bool { return sel.Matches(labels.Set(d.Spec.Template.Labels)) }) {
					t.Errorf("PodDisruptionBudget %s selects no Deployment's pods", p.Name)
				}
			}
			for _, m := range o.serviceMonitors {
				checkServiceMonitor(t, o, &m)
			}
			for _, h := range o.hpas {
				checkHPA(t, o, &h, rules)
			}
			for _, s := range o.scaledObjects {
				ref := s.Spec.ScaleTargetRef
				if ref.Kind != "Deployment" || !slices.ContainsFunc(o.deployments, func(d appsv1.Deployment) bool { return d.Name == ref.Name }) {
					t.Errorf("ScaledObject %s targets %s %q, not a Deployment of the build", s.Name, ref.Kind, ref.Name)
				}
				if len(s.Spec.Triggers) == 0 {
					t.Errorf("ScaledObject %s has no trigger", s.Name)
				}
			}
			for _, rt := range o.runtimes {
				checkRuntime(t, o, &rt)
			}
		})
	}
}

// adapter reads prometheus-adapter's rules strictly.
func adapter(t *testing.T) *adapterRules {
	b, err := os.ReadFile("prometheus-adapter/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r adapterRules
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("prometheus-adapter/rules.yaml: %v", err)
	}
	return &r
}

func selector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %v: %v", s, err)
	}
	return sel
}

// checkDeployment: the selector selects the template, every probe names a
// container port, every mount a volume, every configMap or claim volume an
// object of the build, and the grace period outlasts preStop plus
// --shutdown-timeout.
func checkDeployment(t *testing.T, o *objects, d *appsv1.Deployment) {
	t.Helper()
	if !selector(t, d.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Deployment %s: its selector does not select its own pods", d.Name)
	}
	spec := &d.Spec.Template.Spec
	checkPod(t, o, "Deployment "+d.Name, spec.Containers, spec.Volumes, spec.TerminationGracePeriodSeconds)
}

// checkPod checks the containers of a workload (a Deployment's pods or a
// ServingRuntime's) against its volumes and grace period.
func checkPod(t *testing.T, o *objects, what string, containers []corev1.Container, volumes []corev1.Volume, grace *int64) {
	t.Helper()
	for _, v := range volumes {
		switch {
		case v.ConfigMap != nil:
			if !slices.ContainsFunc(o.configMaps, func(c corev1.ConfigMap) bool { return c.Name == v.ConfigMap.Name }) {
				t.Errorf("%s: volume %s names ConfigMap %q, which the build does not make", what, v.Name, v.ConfigMap.Name)
			}
		case v.PersistentVolumeClaim != nil:
			if !slices.ContainsFunc(o.pvcs, func(c corev1.PersistentVolumeClaim) bool { return c.Name == v.PersistentVolumeClaim.ClaimName }) {
				t.Errorf("%s: volume %s names claim %q, which the build does not make", what, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	c := sluiceContainer(t, what, containers)
	for _, m := range c.VolumeMounts {
		if !slices.ContainsFunc(volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
			t.Errorf("%s: mount %s names no volume", what, m.Name)
		}
	}
	probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
	if c.StartupProbe != nil {
		probes["startup"] = c.StartupProbe
	}
	for kind, p := range probes {
		switch {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("%s: no HTTP %s probe", what, kind)
		case !containerPort(c, p.HTTPGet.Port.String()):
			t.Errorf("%s: %s probe port %s is not a container port", what, kind, p.HTTPGet.Port.String())
		case p.HTTPGet.Path != map[string]string{"liveness": "/v2/health/live", "readiness": "/v2/health/ready", "startup": "/v2/health/ready"}[kind]:
			t.Errorf("%s: %s probe on %s (CONTRACT.md oip.live, oip.ready)", what, kind, p.HTTPGet.Path)
		}
	}
	stop := time.Duration(0)
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 5 {
		t.Errorf("%s: no preStop sleep of 5 s or more: endpoints would not drain before the listener closes", what)
	} else {
		stop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	shutdown := 30 * time.Second // sluice serve's default
	if v, ok := flagValue(c.Args, "shutdown-timeout"); ok {
		var err error
		if shutdown, err = time.ParseDuration(v); err != nil || shutdown <= 0 {
			t.Errorf("%s: --shutdown-timeout=%s must be a positive duration", what, v)
		}
	}
	if grace == nil {
		t.Errorf("%s: no terminationGracePeriodSeconds (the default 30 s is not above preStop %s + --shutdown-timeout %s)", what, stop, shutdown)
	} else if g := time.Duration(*grace) * time.Second; g <= stop+shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %s is not above preStop %s + --shutdown-timeout %s", what, g, stop, shutdown)
	}
	if v, ok := flagValue(c.Args, "config"); ok {
		if _, _, err := configOf(o, c, volumes, v); err != nil {
			t.Errorf("%s: --config: %v", what, err)
		}
	}
}

// sluiceContainer is the workload's one container running sluice serve.
func sluiceContainer(t *testing.T, what string, cs []corev1.Container) *corev1.Container {
	t.Helper()
	for i := range cs {
		if slices.Equal(cs[i].Command, []string{"sluice", "serve"}) {
			return &cs[i]
		}
	}
	t.Fatalf("%s: no container runs sluice serve", what)
	return nil
}

// containerPort reports whether port (a name or a number) is one of c's.
func containerPort(c *corev1.Container, port string) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == port || fmt.Sprint(p.ContainerPort) == port
	})
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// configOf finds the file a --config path names: the ConfigMap mounted
// above it and its key. It returns the key and the file's text.
func configOf(o *objects, c *corev1.Container, volumes []corev1.Volume, file string) (string, string, error) {
	for _, m := range c.VolumeMounts {
		key, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || strings.Contains(key, "/") {
			continue
		}
		i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || volumes[i].ConfigMap == nil {
			return "", "", fmt.Errorf("%s is under mount %s, which is not a ConfigMap", file, m.MountPath)
		}
		j := slices.IndexFunc(o.configMaps, func(cm corev1.ConfigMap) bool { return cm.Name == volumes[i].ConfigMap.Name })
		if j < 0 {
			return "", "", fmt.Errorf("ConfigMap %q is not in the build", volumes[i].ConfigMap.Name)
		}
		text, ok := o.configMaps[j].Data[key]
		if !ok {
			return "", "", fmt.Errorf("ConfigMap %q has no key %q", o.configMaps[j].Name, key)
		}
		return key, text, nil
	}
	return "", "", fmt.Errorf("%s is in no mounted volume", file)
}

// checkService: it selects a Deployment's pods and targets their port.
func checkService(t *testing.T, o *objects, s *corev1.Service) {
	t.Helper()
	sel := labels.SelectorFromSet(s.Spec.Selector)
	i := slices.IndexFunc(o.deployments, func(d appsv1.Deployment) bool { return sel.Matches(labels.Set(d.Spec.Template.Labels)) })
	if len(s.Spec.Selector) == 0 || i < 0 {
		t.Errorf("Service %s selects no Deployment's pods", s.Name)
		return
	}
	c := sluiceContainer(t, "Deployment "+o.deployments[i].Name, o.deployments[i].Spec.Template.Spec.Containers)
	for _, p := range s.Spec.Ports {
		if !containerPort(c, p.TargetPort.String()) {
			t.Errorf("Service %s: port %s targets %s, not a port of the pods", s.Name, p.Name, p.TargetPort.String())
		}
	}
}

// checkServiceMonitor: it selects a Service by its labels, scrapes one of
// its ports on /metrics, with the API key the pods are given.
func checkServiceMonitor(t *testing.T, o *objects, m *monitoringv1.ServiceMonitor) {
	t.Helper()
	sel := selector(t, &m.Spec.Selector)
	i := slices.IndexFunc(o.services, func(s corev1.Service) bool { return sel.Matches(labels.Set(s.Labels)) })
	if i < 0 {
		t.Errorf("ServiceMonitor %s selects no Service", m.Name)
		return
	}
	for _, e := range m.Spec.Endpoints {
		if !slices.ContainsFunc(o.services[i].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
			t.Errorf("ServiceMonitor %s scrapes port %q, not a port of Service %s", m.Name, e.Port, o.services[i].Name)
		}
		if e.Path != "/metrics" {
			t.Errorf("ServiceMonitor %s scrapes %s, not /metrics", m.Name, e.Path)
		}
		a := e.Authorization
		if a == nil || a.Credentials == nil {
			t.Errorf("ServiceMonitor %s: no credentials (/metrics takes the API key)", m.Name)
			continue
		}
		key := apiKeyRef(o)
		if key == nil || key.Name != a.Credentials.Name || key.Key != a.Credentials.Key {
			t.Errorf("ServiceMonitor %s scrapes with secret %s/%s, not the pods' SLUICE_API_KEY %v", m.Name, a.Credentials.Name, a.Credentials.Key, key)
		}
	}
}

// apiKeyRef is the secret the Deployment's SLUICE_API_KEY comes from.
func apiKeyRef(o *objects) *corev1.SecretKeySelector {
	for _, d := range o.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "SLUICE_API_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					return e.ValueFrom.SecretKeyRef
				}
			}
		}
	}
	return nil
}

// checkHPA: it scales a Deployment of the build on pods metrics that
// prometheus-adapter's rules serve.
func checkHPA(t *testing.T, o *objects, h *autoscalingv2.HorizontalPodAutoscaler, rules *adapterRules) {
	t.Helper()
	ref := h.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || !slices.ContainsFunc(o.deployments, func(d appsv1.Deployment) bool { return d.Name == ref.Name }) {
		t.Errorf("HPA %s targets %s %q, not a Deployment of the build", h.Name, ref.Kind, ref.Name)
	}
	for _, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods == nil {
			t.Errorf("HPA %s: metric of type %s (the signal is a pods metric)", h.Name, m.Type)
			continue
		}
		name := m.Pods.Metric.Name
		if !slices.ContainsFunc(rules.Rules, func(r adapterRule) bool {
			return r.Name.As == name && r.Resources.Overrides["pod"].Resource == "pod"
		}) {
			t.Errorf("HPA %s: pods metric %q is served by no prometheus-adapter rule (per pod)", h.Name, name)
		}
	}
}

// checkRuntime: KServe's runtime serves the v2 protocol, and every
// InferenceService of the build names it with a format it supports.
func checkRuntime(t *testing.T, o *objects, rt *servingRuntime) {
	t.Helper()
	if !slices.Contains(rt.Spec.ProtocolVersions, "v2") {
		t.Errorf("ServingRuntime %s: protocolVersions %v lack v2", rt.Name, rt.Spec.ProtocolVersions)
	}
	var grace *int64
	for _, is := range o.isvcs {
		m := is.Spec.Predictor.Model
		if m.Runtime != rt.Name || m.ProtocolVersion != "v2" {
			t.Errorf("InferenceService %s: runtime %q protocol %q, want %s over v2", is.Name, m.Runtime, m.ProtocolVersion, rt.Name)
		}
		if !slices.ContainsFunc(rt.Spec.SupportedModelFormats, func(f modelFormat) bool { return f.Name == m.ModelFormat.Name && f.Version == m.ModelFormat.Version }) {
			t.Errorf("InferenceService %s: model format %v not supported by %s", is.Name, m.ModelFormat, rt.Name)
		}
		grace = is.Spec.Predictor.TerminationGracePeriodSeconds
		_, text, err := configOf(o, sluiceContainer(t, "ServingRuntime "+rt.Name, rt.Spec.Containers), rt.Spec.Volumes, mustFlag(t, rt.Spec.Containers, "config"))
		if err == nil && !regexp.MustCompile(`(?m)^\s*- id: `+regexp.QuoteMeta(is.Name)+`\s*$`).MatchString(text) {
			t.Errorf("InferenceService %s: the runtime's startup config registers no model of that name (KServe routes /v2/models/%s)", is.Name, is.Name)
		}
	}
	checkPod(t, o, "ServingRuntime "+rt.Name, rt.Spec.Containers, rt.Spec.Volumes, grace)
}

func mustFlag(t *testing.T, cs []corev1.Container, name string) string {
	t.Helper()
	v, ok := flagValue(sluiceContainer(t, "runtime", cs).Args, name)
	if !ok {
		t.Fatalf("no --%s", name)
	}
	return path.Clean(v)
}
