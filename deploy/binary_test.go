package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/listenlog"
)

// Fake values of the pod's environment for the container's $(VAR)
// arguments, and the API key its secret would hold.
var podEnv = map[string]string{"POD_IP": "10.1.2.3", "POD_NAMESPACE": "sluice"}

const testKey = "manifest-test-key"

// workload is one container that runs sluice serve, with what it needs.
type workload struct {
	what    string
	c       *corev1.Container
	config  string   // the startup config's text (its ConfigMap key)
	metrics []string // metric names the build's autoscalers read
	hosts   []string // Host headers its clients send: the pod IP, the Service's names
}

// TestManifestsAgainstBinary starts the built sluice with each distinct
// workload's own arguments (the listen address, the models root, the
// state dir and the config path moved to the test's; $(VAR)s expanded as
// the kubelet would) and checks what only a running binary shows: the
// probe paths are routes that answer 200 once the startup models are
// loaded, with the pod's IP as Host; the Host names of the Service pass
// the allow-list; /metrics exports every metric the HPA (through
// prometheus-adapter) and KEDA read; SIGTERM exits cleanly within the
// grace period.
func TestManifestsAgainstBinary(t *testing.T) {
	bin := sluiceBinary(t)
	models, err := filepath.Abs("../models")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(models, "flite-slt")); err != nil {
		t.Fatalf("the default models root %s is missing (run make models): %v", models, err)
	}
	rules := adapter(t)
	seen := map[string]bool{}
	for _, dir := range builds {
		o := build(t, dir)
		for _, w := range workloads(t, o, rules) {
			key := strings.Join(w.c.Args, " ") + "\x00" + w.config + "\x00" + strings.Join(w.metrics, ",")
			if seen[key] {
				continue
			}
			seen[key] = true
			t.Run(dir+"/"+w.what, func(t *testing.T) { runWorkload(t, bin, models, w) })
		}
	}
}

// sluiceBinary builds ./cmd/sluice of the enclosing module
// ($SLUICE_BIN: a prebuilt one).
func sluiceBinary(t *testing.T) string {
	if b := os.Getenv("SLUICE_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = ".." // as the conformance suite builds it: one build cache entry
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

// workloads lists the build's sluice containers and the metrics its
// autoscalers name.
func workloads(t *testing.T, o *objects, rules *adapterRules) []workload {
	var metrics []string
	for _, h := range o.hpas {
		for _, m := range h.Spec.Metrics {
			if m.Pods == nil {
				continue
			}
			for _, r := range rules.Rules {
				if r.Name.As == m.Pods.Metric.Name {
					metrics = append(metrics, regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(r.SeriesQuery))
				}
			}
		}
	}
	for _, s := range o.scaledObjects {
		for _, tr := range s.Spec.Triggers {
			metrics = append(metrics, regexp.MustCompile(`sluice_[a-z_]+`).FindAllString(tr.Metadata["query"], -1)...)
		}
	}
	var out []workload
	for _, d := range o.deployments {
		spec := &d.Spec.Template.Spec
		c := sluiceContainer(t, d.Name, spec.Containers)
		hosts := []string{podEnv["POD_IP"] + ":8080"}
		for _, s := range o.services {
			ns := podEnv["POD_NAMESPACE"]
			hosts = append(hosts, s.Name, s.Name+"."+ns+".svc.cluster.local:8080")
		}
		out = append(out, workload{what: "Deployment", c: c, config: configText(t, o, c, spec.Volumes),
			metrics: metrics, hosts: hosts})
	}
	for _, rt := range o.runtimes {
		c := sluiceContainer(t, rt.Name, rt.Spec.Containers)
		w := workload{what: "ServingRuntime", c: c, config: configText(t, o, c, rt.Spec.Volumes), metrics: metrics,
			hosts: []string{podEnv["POD_IP"] + ":8080", "sluice-tts-predictor.sluice.svc.cluster.local"}}
		out = append(out, w)
	}
	return out
}

func configText(t *testing.T, o *objects, c *corev1.Container, volumes []corev1.Volume) string {
	v, ok := flagValue(c.Args, "config")
	if !ok {
		return ""
	}
	_, text, err := configOf(o, c, volumes, v)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// runWorkload starts bin as the container would and checks it.
func runWorkload(t *testing.T, bin, models string, w workload) {
	dir := t.TempDir()
	// The engines' native libraries: the npm prefix of `make deps` (the
	// image's own layout is its business), or the caller's settings.
	npm, err := filepath.Abs("../.deps/npm")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SLUICE_NPM_PREFIX=" + npm}
	for _, k := range []string{"SLUICE_NPM_PREFIX", "SLUICE_ONNXRUNTIME_LIB"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, e := range w.c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env = append(env, e.Name+"="+testKey)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+podEnv[e.Name])
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	var args []string
	for _, a := range w.c.Args {
		a = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(m string) string { return podEnv[m[2:len(m)-1]] })
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--listen":
			a = "--listen=127.0.0.1:0"
		case "--models-root":
			a = "--models-root=" + models
		case "--state-dir":
			a = "--state-dir=" + filepath.Join(dir, "state")
		case "--config":
			file := filepath.Join(dir, "models.yaml")
			if err := os.WriteFile(file, []byte(w.config), 0o644); err != nil {
				t.Fatal(err)
			}
			a = "--config=" + file
		}
		args = append(args, a)
	}
	if !slices.Equal(w.c.Command, []string{"sluice", "serve"}) {
		t.Fatalf("command %v", w.c.Command)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, args...)...)
	cmd.Env = env
	p, err := listenlog.Start(ctx, cmd)
	if err != nil {
		t.Fatalf("sluice (args %q): %v", args, err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		p.Kill()
		t.Fatalf("%s\nserver log:\n%s", fmt.Sprintf(format, args...), p.Log())
	}
	addr := p.Addr
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path, host string, key bool) (int, string) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if key {
			req.Header.Set("Authorization", "Bearer "+testKey)
		}
		res, err := client.Do(req)
		if err != nil {
			fail("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 8<<20))
		return res.StatusCode, string(b)
	}
	for _, p := range []*corev1.Probe{w.c.StartupProbe, w.c.ReadinessProbe, w.c.LivenessProbe} {
		if p == nil {
			continue
		}
		// The listener opens after the startup models are loaded, so
		// the probes answer at once (a kubelet's Host is the pod IP).
		if code, body := get(p.HTTPGet.Path, w.hosts[0], false); code != 200 {
			fail("probe %s: %d %s", p.HTTPGet.Path, code, body)
		}
	}
	for _, h := range w.hosts {
		if code, body := get("/v2", h, true); code != 200 {
			fail("GET /v2 with Host %s: %d %s (--allowed-hosts)", h, code, body)
		}
	}
	for _, id := range regexp.MustCompile(`(?m)^\s*- id: (\S+)\s*$`).FindAllStringSubmatch(w.config, -1) {
		if code, body := get("/v2/models/"+id[1]+"/ready", w.hosts[len(w.hosts)-1], true); code != 200 {
			fail("model %s of the startup config: %d %s", id[1], code, body)
		}
	}
	code, text := get("/metrics", w.hosts[0], true)
	if code != 200 {
		fail("/metrics by the pod's IP: %d %s", code, text)
	}
	for _, m := range w.metrics {
		if !strings.Contains(text, "\n# TYPE "+m+" gauge\n") {
			fail("/metrics exports no gauge %s, which the autoscaler reads", m)
		}
	}
	// The exit's timing against the grace period is TestManifests'
	// static check (preStop + --shutdown-timeout < grace); here it must
	// be clean.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := p.Err(); err != nil {
		fail("exit after SIGTERM: %v", err)
	}
}
