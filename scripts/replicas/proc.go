package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/listenlog"
)

// The processes of one run: three sluice serve replicas on fixed loopback
// ports (a restarted replica comes back on its own port, where the proxy
// looks for it) and HAProxy with deploy/haproxy/haproxy.cfg.

// replica is one sluice serve process.
type replica struct {
	name, addr string
	*listenlog.Proc
}

// freePort returns a loopback port nobody listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startReplica runs bin serve on addr with the models of config and waits
// for its listening line (its startup models are loaded by then).
func startReplica(ctx context.Context, bin, name, addr, config string, extra []string) (*replica, error) {
	args := append([]string{"serve", "--parallel-jobs", "--fixture", "--listen", addr, "--config", config}, extra...)
	p, err := listenlog.Start(ctx, exec.Command(bin, args...))
	if err != nil {
		return nil, fmt.Errorf("replicas: %s: %w", name, err)
	}
	return &replica{name: name, addr: addr, Proc: p}, nil
}

// stop ends the process with SIGTERM, as an orchestrator would.
func (r *replica) stop() {
	_ = r.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.Done():
	case <-time.After(30 * time.Second):
		r.Kill()
	}
}

// proxy is one haproxy process.
type proxy struct {
	cmd   *exec.Cmd
	front string // the address clients use
	stats string // the stats page's address
	done  chan struct{}
	out   *strings.Builder
	mu    sync.Mutex
}

// startProxy runs haproxy in the foreground with cfg and the environment
// it reads (SLUICE_*), and waits until every server is UP.
func startProxy(ctx context.Context, cfg, balance string, retries int, servers []string) (*proxy, error) {
	front, err := freePort()
	if err != nil {
		return nil, err
	}
	stats, err := freePort()
	if err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin = "/usr/sbin/haproxy"
	}
	p := &proxy{front: front, stats: stats, done: make(chan struct{}), out: &strings.Builder{}}
	p.cmd = exec.Command(bin, "-db", "-f", cfg)
	p.cmd.Env = append(os.Environ(), "SLUICE_FRONT="+front, "SLUICE_STATS="+stats, "SLUICE_BALANCE="+balance,
		"SLUICE_RETRIES="+strconv.Itoa(retries), "SLUICE_S1="+servers[0], "SLUICE_S2="+servers[1], "SLUICE_S3="+servers[2])
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("replicas: start haproxy (make replicas-test installs it): %w", err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			if p.out.Len() < 1<<20 {
				p.out.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		_ = p.cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	for _, s := range []string{"s1", "s2", "s3"} {
		if err := p.await(ctx, s, "UP"); err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

// stop ends haproxy.
func (p *proxy) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// serverStats is one backend server's line of the stats CSV.
type serverStats struct {
	status          string // UP, DOWN, ...
	retries, redisp int64  // wretr, wredis
}

// readStats reads the stats CSV's backend servers.
func (p *proxy) readStats(ctx context.Context) (map[string]serverStats, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+p.stats+"/stats;csv", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return nil, errors.New("replicas: the stats page is not CSV")
	}
	col := map[string]int{}
	for i, h := range strings.Split(strings.TrimPrefix(lines[0], "# "), ",") {
		col[h] = i
	}
	out := map[string]serverStats{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) <= col["wredis"] || f[col["pxname"]] != "replicas" || f[col["svname"]] == "BACKEND" {
			continue
		}
		r, _ := strconv.ParseInt(f[col["wretr"]], 10, 64)
		d, _ := strconv.ParseInt(f[col["wredis"]], 10, 64)
		st := f[col["status"]]
		st, _, _ = strings.Cut(st, " ") // "DOWN 1/2" while going down
		out[f[col["svname"]]] = serverStats{status: st, retries: r, redisp: d}
	}
	return out, nil
}

// await polls the stats until server has status (UP or DOWN), bounded by
// ctx: the proxy's health checks decide, every 250 ms.
func (p *proxy) await(ctx context.Context, server, status string) error {
	for {
		st, err := p.readStats(ctx)
		if err == nil && st[server].status == status {
			return nil
		}
		select {
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			return fmt.Errorf("replicas: haproxy never showed %s %s (last %v, %v):\n%s", server, status, st, err, p.out.String())
		case <-p.done:
			return fmt.Errorf("replicas: haproxy exited:\n%s", p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
