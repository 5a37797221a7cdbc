package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestHAProxyConfig: deploy/haproxy/haproxy.cfg is valid for Debian's
// haproxy (`make deploy-test` installs it, as `make replicas-test` does)
// in every variant make replicas-test runs, and its health check asks the
// route the Deployment's readiness probe asks (CONTRACT.md oip.ready).
func TestHAProxyConfig(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin = "/usr/sbin/haproxy"
	}
	for _, v := range []struct{ balance, retries string }{{"hdr(X-Sluice-Model)", "3"}, {"hdr(X-Sluice-Model)", "0"}, {"roundrobin", "3"}} {
		cmd := exec.Command(bin, "-c", "-f", "haproxy/haproxy.cfg")
		cmd.Env = append(os.Environ(), "SLUICE_FRONT=127.0.0.1:1", "SLUICE_STATS=127.0.0.1:2", "SLUICE_S1=127.0.0.1:3",
			"SLUICE_S2=127.0.0.1:4", "SLUICE_S3=127.0.0.1:5", "SLUICE_BALANCE="+v.balance, "SLUICE_RETRIES="+v.retries,
			"SLUICE_HAPROXY_DIR=haproxy")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("haproxy -c with balance %s, retries %s: %v (make deploy-test installs haproxy)\n%s", v.balance, v.retries, err, out)
		}
	}
	b, err := os.ReadFile("haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*http-check send meth GET uri (\S+)`).FindSubmatch(b)
	o := build(t, "overlays/production")
	want := sluiceContainer(t, "Deployment", o.deployments[0].Spec.Template.Spec.Containers).ReadinessProbe.HTTPGet.Path
	if m == nil || string(m[1]) != want {
		t.Fatalf("the proxy's health check is %q, the readiness probe %q", m, want)
	}
}
