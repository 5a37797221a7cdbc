package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree writes a fake /proc and /sys/fs/cgroup under a temporary root.
func tree(t *testing.T, files map[string]string) System {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return System{Root: root}
}

const statm = "1000 512 100 1 0 200 0\n" // 512 resident pages

func TestLimitSources(t *testing.T) {
	page := int64(os.Getpagesize())
	cases := []struct {
		name   string
		files  map[string]string
		budget int64
		want   int64
		src    Source
	}{
		{"cgroup v2", map[string]string{
			"/proc/self/cgroup":                 "0::/app\n",
			"/sys/fs/cgroup/app/memory.max":     "268435456\n",
			"/proc/meminfo":                     "MemTotal:       24683792 kB\n",
			"/proc/self/statm":                  statm,
			"/sys/fs/cgroup/memory/unrelated.x": "",
		}, 0, 256 << 20, CgroupV2},
		{"cgroup v2 max falls to physical memory", map[string]string{
			"/proc/self/cgroup":             "0::/app\n",
			"/sys/fs/cgroup/app/memory.max": "max\n",
			"/proc/meminfo":                 "MemFree: 1 kB\nMemTotal:       1024 kB\n",
			"/proc/self/statm":              statm,
		}, 0, 1 << 20, Physical},
		{"cgroup v1", map[string]string{
			"/proc/self/cgroup": "9:name=systemd:/\n4:cpu,memory:/job\n",
			"/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "536870912\n",
			"/proc/meminfo":    "MemTotal:       24683792 kB\n",
			"/proc/self/statm": statm,
		}, 0, 512 << 20, CgroupV1},
		{"cgroup v1 unlimited", map[string]string{
			"/proc/self/cgroup":                           "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"/proc/meminfo":                               "MemTotal:       2048 kB\n",
			"/proc/self/statm":                            statm,
		}, 0, 2 << 20, Physical},
		{"nothing readable: the budget", map[string]string{"/proc/self/statm": statm}, 64 << 20, 64 << 20, Budget},
		{"nothing at all", map[string]string{}, 0, 0, None},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			SetBudget(c.budget)
			defer SetBudget(0)
			s := tree(t, c.files)
			n, src := s.Limit()
			if n != c.want || src != c.src {
				t.Fatalf("Limit() = %d %q, want %d %q", n, src, c.want, c.src)
			}
			f := s.Read()
			if _, ok := c.files["/proc/self/statm"]; ok && f.Resident != 512*page {
				t.Errorf("resident %d, want %d", f.Resident, 512*page)
			}
			if c.want > 0 && f.Available != max(0, c.want-f.Resident) {
				t.Errorf("available %d, want %d", f.Available, c.want-f.Resident)
			}
			if c.want == 0 && (f.Available != -1 || s.Fits(1<<50, "x") != nil) {
				t.Errorf("no limit: available %d, fits %v", f.Available, s.Fits(1<<50, "x"))
			}
		})
	}
}

func TestFitsNamesBothFigures(t *testing.T) {
	s := tree(t, map[string]string{
		"/proc/self/cgroup":             "0::/\n",
		"/sys/fs/cgroup/memory.max":     "104857600\n", // 100 MB
		"/proc/self/statm":              "0 0 0 0 0 0 0\n",
		"/sys/fs/cgroup/unrelated/file": "",
	})
	if err := s.Fits(99<<20, "model m.bin"); err != nil {
		t.Fatalf("99 MB under 100 MB: %v", err)
	}
	err := s.Fits(8<<30, "model m.bin")
	if err == nil {
		t.Fatal("8 GB under a 100 MB limit fits")
	}
	for _, want := range []string{"model m.bin", "8192 MB", "100 MB", string(CgroupV2)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	restore := SetOverride(16 << 30)
	if err := s.Fits(8<<30, "m"); err != nil {
		t.Errorf("override 16 GB: %v", err)
	}
	restore()
	if n, src := s.Limit(); src != CgroupV2 || n != 100<<20 {
		t.Errorf("after restore: %d %s", n, src)
	}
}

// The real process reads something: this machine has physical memory.
func TestRealProcess(t *testing.T) {
	f := System{}.Read()
	if f.Limit <= 0 || f.Resident <= 0 || f.Available < 0 || f.Available > f.Limit {
		t.Fatalf("real figures %+v", f)
	}
}
