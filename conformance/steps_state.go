package conformance

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Steps that act on the case's own server and its files (CONTRACT.md
// "Restarts and the persistent registry"): stop it and start it again,
// start a second server on the same state dir, and read or damage the
// files in the case's folder, which holds the state dir as state/ (and
// the trace, with server key trace, as trace.ndjson).

// mainServer is the name of the server the runner starts for the case.
const mainServer = "main"

// StopStep stops a server of the case (default: the one steps talk to):
// an orderly shutdown (SIGTERM; in process the shutdown a signal begins),
// or with Kill a SIGKILL, which needs a binary. Until a start or use
// step, a stopped current server leaves the case with none to talk to.
type StopStep struct {
	Server string `yaml:"server"`
	Kill   bool   `yaml:"kill"`
}

// StartStep starts a server with the case's flags on its state dir: As
// names it (default main, the runner's, which must have stopped); another
// name is a second server beside the running one. A started server is the
// one later steps talk to. With Fails the start must fail with an error
// holding each text ($DIR and model symbols mapped: in process the start's
// error, for a binary its exit and log), and leave every file in the case's
// folder as it was (a lock file may appear where none was).
type StartStep struct {
	As    string   `yaml:"as"`
	Fails []string `yaml:"fails"`
}

// FileStep acts on, or checks, one path in the case's folder (relative:
// state/registry.json, state/lock, trace.ndjson.1; no "..").
//
// Actions (at most one): Write replaces the file's bytes (creating it),
// Append adds to them, Truncate cuts that many bytes off the end, Flip
// flips the lowest bit of the byte at that offset (negative: from the end),
// Replace ([OLD, NEW]) rewrites the first OLD, Copy makes it a copy of
// another path, Remove removes it, Symlink makes it a symbolic link to
// another path, Fifo a named pipe, Dir a directory. Texts map $DIR (the
// case's folder) and model symbols ($M).
//
// Checks: Exists, Kind (file, symlink, fifo, dir), Contains and Absent
// (texts the file holds or lacks; on a directory, any or each regular file
// in it), SameAs (the same bytes as another path), Entries (how many
// entries a directory holds: 0, no spooled upload left behind).
type FileStep struct {
	Path     string   `yaml:"path"`
	Write    *string  `yaml:"write"`
	Append   string   `yaml:"append"`
	Truncate int      `yaml:"truncate"`
	Flip     *int     `yaml:"flip"`
	Replace  []string `yaml:"replace"`
	Copy     string   `yaml:"copy"`
	Remove   bool     `yaml:"remove"`
	Symlink  string   `yaml:"symlink"`
	Fifo     bool     `yaml:"fifo"`
	Dir      bool     `yaml:"dir"`
	Exists   *bool    `yaml:"exists"`
	Kind     string   `yaml:"kind"`
	Contains []string `yaml:"contains"`
	Absent   []string `yaml:"absent"`
	SameAs   string   `yaml:"same_as"`
	Entries  *int     `yaml:"entries"`
}

// actions counts the actions a file step names.
func (a *FileStep) actions() int {
	n := 0
	for _, on := range []bool{a.Write != nil, a.Append != "", a.Truncate != 0, a.Flip != nil, a.Replace != nil,
		a.Copy != "", a.Remove, a.Symlink != "", a.Fifo, a.Dir} {
		if on {
			n++
		}
	}
	return n
}

// validate checks a file step's shape (the loader calls it).
func (a *FileStep) validate() error {
	for _, p := range []string{a.Path, a.Copy, a.Symlink, a.SameAs} {
		if p != "" && !filepath.IsLocal(p) {
			return fmt.Errorf("file: path %q must be relative to the case's folder, with no .. in it", p)
		}
	}
	switch {
	case a.Path == "":
		return errors.New("file needs a path")
	case a.actions() > 1:
		return errors.New("file: one action per step")
	case a.Replace != nil && len(a.Replace) != 2:
		return errors.New("file: replace is [OLD, NEW]")
	case a.Kind != "" && !slices.Contains([]string{"file", "symlink", "fifo", "dir"}, a.Kind):
		return fmt.Errorf("file: kind %q: want file, symlink, fifo or dir", a.Kind)
	case a.Truncate < 0:
		return errors.New("file: truncate takes a positive byte count")
	}
	return nil
}

// casePath is the absolute path of p in the case's folder.
func (r *caseRun) casePath(p string) (string, error) {
	if r.caseDir == "" {
		return "", errors.New("the case has no folder (server: {state_dir: true})")
	}
	return filepath.Join(r.caseDir, p), nil
}

// fileStep runs a file step: its action, then its checks.
func (r *caseRun) fileStep(a *FileStep) error {
	path, err := r.casePath(a.Path)
	if err != nil {
		return err
	}
	other := func(p string) string { q, _ := r.casePath(p); return q }
	text := func(s string) ([]byte, error) {
		t, err := r.expand(s)
		return []byte(t), err
	}
	edit := func(f func(b []byte) ([]byte, error)) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if b, err = f(b); err != nil {
			return err
		}
		return os.WriteFile(path, b, 0o600)
	}
	switch {
	case a.Write != nil:
		b, err := text(*a.Write)
		if err == nil {
			err = os.WriteFile(path, b, 0o600)
		}
		if err != nil {
			return err
		}
	case a.Append != "":
		b, err := text(a.Append)
		if err != nil {
			return err
		}
		err = edit(func(old []byte) ([]byte, error) { return append(old, b...), nil })
		if err != nil {
			return err
		}
	case a.Truncate > 0:
		if err := edit(func(b []byte) ([]byte, error) {
			if a.Truncate > len(b) {
				return nil, fmt.Errorf("truncate %d: the file has %d bytes", a.Truncate, len(b))
			}
			return b[:len(b)-a.Truncate], nil
		}); err != nil {
			return err
		}
	case a.Flip != nil:
		if err := edit(func(b []byte) ([]byte, error) {
			k := *a.Flip
			if k < 0 {
				k += len(b)
			}
			if k < 0 || k >= len(b) {
				return nil, fmt.Errorf("flip %d: the file has %d bytes", *a.Flip, len(b))
			}
			b[k] ^= 1
			return b, nil
		}); err != nil {
			return err
		}
	case a.Replace != nil:
		old, err := text(a.Replace[0])
		if err != nil {
			return err
		}
		repl, err := text(a.Replace[1])
		if err != nil {
			return err
		}
		if err := edit(func(b []byte) ([]byte, error) {
			if !bytes.Contains(b, old) {
				return nil, fmt.Errorf("replace: %q not in the file", old)
			}
			return bytes.Replace(b, old, repl, 1), nil
		}); err != nil {
			return err
		}
	case a.Copy != "":
		b, err := os.ReadFile(other(a.Copy))
		if err == nil {
			err = os.WriteFile(path, b, 0o600)
		}
		if err != nil {
			return err
		}
	case a.Remove:
		if err := os.Remove(path); err != nil {
			return err
		}
	case a.Symlink != "":
		if err := os.Symlink(other(a.Symlink), path); err != nil {
			return err
		}
	case a.Fifo:
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			return fmt.Errorf("mkfifo %s: %w", path, err)
		}
	case a.Dir:
		if err := os.Mkdir(path, 0o700); err != nil {
			return err
		}
	}
	return r.fileChecks(a, path)
}

// fileChecks checks what a file step expects of path.
func (r *caseRun) fileChecks(a *FileStep, path string) error {
	fi, err := os.Lstat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if a.Exists != nil && exists != *a.Exists {
		return fmt.Errorf("%s: exists=%v, want %v", a.Path, exists, *a.Exists)
	}
	if a.Kind != "" {
		if !exists {
			return fmt.Errorf("%s: missing, want a %s", a.Path, a.Kind)
		}
		if k := fileKind(fi.Mode()); k != a.Kind {
			return fmt.Errorf("%s is a %s, want a %s", a.Path, k, a.Kind)
		}
	}
	if a.SameAs != "" {
		want, err := os.ReadFile(filepath.Join(r.caseDir, a.SameAs))
		if err != nil {
			return err
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s differs from %s", a.Path, a.SameAs)
		}
	}
	if a.Entries != nil {
		es, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		if len(es) != *a.Entries {
			var names []string
			for _, e := range es {
				names = append(names, e.Name())
			}
			return fmt.Errorf("%s holds %d entries %v, want %d", a.Path, len(es), names, *a.Entries)
		}
	}
	if len(a.Contains) == 0 && len(a.Absent) == 0 {
		return nil
	}
	var files [][]byte
	if exists && fi.IsDir() {
		es, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Type().IsRegular() {
				b, err := os.ReadFile(filepath.Join(path, e.Name()))
				if err != nil {
					return err
				}
				files = append(files, b)
			}
		}
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, b)
	}
	for _, s := range a.Contains {
		t, err := r.expand(s)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(files, func(b []byte) bool { return bytes.Contains(b, []byte(t)) }) {
			return fmt.Errorf("%s does not contain %q (%d bytes)", a.Path, t, len(bytes.Join(files, nil)))
		}
	}
	for _, s := range a.Absent {
		t, err := r.expand(s)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(files, func(b []byte) bool { return bytes.Contains(b, []byte(t)) }) {
			return fmt.Errorf("%s contains %q, want it absent", a.Path, t)
		}
	}
	return nil
}

// fileKind names a file mode's type as file steps do.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// folderState describes every entry under dir: its kind and, for a
// regular file, a hash of its bytes; for a link, its target. A named pipe
// is never opened.
func folderState(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fileKind(d.Type())
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc = fmt.Sprintf("file %x", sha256.Sum256(b))
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc = "symlink to " + t
		}
		out[rel] = desc
		return nil
	})
	return out, err
}

// stopServer stops a server of the case.
func (r *caseRun) stopServer(a *StopStep) error {
	name := a.Server
	if name == "" {
		name = r.cur
	}
	inst := r.servers[name]
	if inst == nil {
		return fmt.Errorf("no server %q runs", name)
	}
	if a.Kill {
		k, ok := inst.(interface{ Kill() error })
		if !ok {
			return errors.New("kill needs a binary server")
		}
		if err := k.Kill(); err != nil {
			return err
		}
	} else if err := inst.Shutdown("TERM"); err != nil {
		return err
	}
	err := inst.Close()
	r.lastLogs = inst.Logs()
	delete(r.servers, name)
	if name == r.cur {
		r.inst, r.base, r.cur = nil, "", ""
		r.tr.CloseIdleConnections()
	}
	if !a.Kill && err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}

// startServer starts a server with the case's flags on its state dir.
func (r *caseRun) startServer(a *StartStep) error {
	name := a.As
	if name == "" {
		name = mainServer
	}
	if r.servers[name] != nil {
		return fmt.Errorf("server %s still runs (stop it first)", name)
	}
	var before map[string]string
	if len(a.Fails) > 0 {
		var err error
		if before, err = folderState(r.caseDir); err != nil {
			return err
		}
	}
	inst, err := r.startBounded()
	if len(a.Fails) == 0 {
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		r.servers[name], r.inst, r.base, r.cur = inst, inst, inst.URL(), name
		return nil
	}
	if err == nil {
		r.lastLogs = inst.Logs()
		_ = inst.Close()
		return fmt.Errorf("start %s succeeded, want it to fail with %q", name, a.Fails)
	}
	for _, s := range a.Fails {
		t, xerr := r.expand(s)
		if xerr != nil {
			return xerr
		}
		if !strings.Contains(err.Error(), t) {
			return fmt.Errorf("start %s failed with %v, want an error holding %q", name, err, t)
		}
	}
	after, err := folderState(r.caseDir)
	if err != nil {
		return err
	}
	for p, d := range after {
		if before[p] != d && !(before[p] == "" && filepath.Base(p) == "lock") {
			return fmt.Errorf("the failed start changed %s: %q, was %q", p, d, before[p])
		}
	}
	for p, d := range before {
		if _, ok := after[p]; !ok {
			return fmt.Errorf("the failed start removed %s (%s)", p, d)
		}
	}
	return nil
}

// startBounded starts a server, bounded by the step timeout: a start that
// blocks (on a named pipe planted in the state dir, say) is an error, and
// every named pipe in the case's folder is then opened for writing and
// closed, so that the start stops waiting and is reaped.
func (r *caseRun) startBounded() (Instance, error) {
	type started struct {
		inst Instance
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		inst, err := r.restart()
		ch <- started{inst, err}
	}()
	t := time.NewTimer(r.stepTimeout)
	defer t.Stop()
	select {
	case s := <-ch:
		return s.inst, s.err
	case <-t.C:
	}
	_ = filepath.WalkDir(r.caseDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeNamedPipe != 0 {
			if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
				_ = f.Close()
			}
		}
		return nil
	})
	if s := <-ch; s.inst != nil {
		_ = s.inst.Close()
	}
	return nil, fmt.Errorf("the start did not return within %s (blocked on a file in the state dir?)", r.stepTimeout)
}

// useServer makes a running server of the case the one steps talk to.
func (r *caseRun) useServer(name string) error {
	inst := r.servers[name]
	if inst == nil {
		return fmt.Errorf("no server %q runs", name)
	}
	r.inst, r.base, r.cur = inst, inst.URL(), name
	r.tr.CloseIdleConnections()
	return nil
}

// restartServer stops the current server (cleanly, or by SIGKILL) and
// starts it again under its name; later steps talk to the new one.
func (r *caseRun) restartServer(a *RestartStep) error {
	name := r.cur
	if name == "" {
		return errors.New("restart: no server runs (use start)")
	}
	if err := r.stopServer(&StopStep{Kill: a.Kill}); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := r.startServer(&StartStep{As: name}); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// closeOthers closes every server of the case but the current one (which
// the runner closes).
func (r *caseRun) closeOthers() error {
	var errs []error
	for name, inst := range r.servers {
		if name != r.cur {
			if err := inst.Close(); err != nil {
				errs = append(errs, fmt.Errorf("server %s: %w", name, err))
			}
			delete(r.servers, name)
		}
	}
	return errors.Join(errs...)
}
