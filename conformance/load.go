package conformance

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed matrices/*.yaml
var matricesFS embed.FS

// Suite is every case of every matrix file, in file order (files sorted by
// name) and case order.
type Suite struct {
	Files []*File
	Cases []*Case
	Areas map[string]Area
}

// Load returns the suite embedded in the binary (conformance/matrices).
func Load() (*Suite, error) {
	sub, err := fs.Sub(matricesFS, "matrices")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	return LoadFS(sub)
}

// LoadDir reads the matrices from a folder instead (edit a file and run it
// without rebuilding: `sluice conformance --matrices DIR`).
func LoadDir(dir string) (*Suite, error) { return LoadFS(os.DirFS(dir)) }

var (
	caseNameRe = regexp.MustCompile(`^[a-z][a-z0-9.-]*(~[a-z0-9.-]+)?$`)
	cellIDRe   = regexp.MustCompile(`^[a-z]+\.[a-z0-9.-]+$`)
	symbolRe   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,23}$`)
)

// ownServerSteps can run only on a server the runner started for the case.
var ownServerSteps = map[string]bool{"shutdown": true, "exited": true, "log": true, "refused": true, "sessions": true,
	"signal": true, "teardowns": true, "folder": true, "restart": true, "stop": true, "start": true, "use": true,
	"file": true, "crash_loop": true}

// fileSteps act on the case's folder and state dir, or on the servers
// started on it (steps_state.go); they need `state_dir: true`.
var fileSteps = map[string]bool{"stop": true, "start": true, "use": true, "file": true, "crash_loop": true}

// LoadFS reads every *.yaml file of fsys as one matrix file.
func LoadFS(fsys fs.FS) (*Suite, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	sort.Strings(names)
	s := &Suite{Areas: map[string]Area{}}
	seen := map[string]string{}
	var errs []error
	situations := map[string][]Step{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		f, err := parseFile(name, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for k, v := range f.Areas {
			if v.Cap != "" && v.Cap != "P" && v.Cap != "U" {
				errs = append(errs, fmt.Errorf("%s: area %s: cap must be P or U", name, k))
			}
			if v.Cap != "" && v.Why == "" {
				errs = append(errs, fmt.Errorf("%s: area %s: a cap needs `why`", name, k))
			}
			s.Areas[k] = v
		}
		for k, v := range f.Situations {
			if _, dup := situations[k]; dup {
				errs = append(errs, fmt.Errorf("%s: situation %s defined twice", name, k))
			}
			situations[k] = v
		}
		s.Files = append(s.Files, f)
	}
	for _, f := range s.Files {
		if err := f.expandCases(situations); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range f.Cases {
			c := &f.Cases[i]
			if prev, dup := seen[c.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: case %s already defined in %s", f.name, c.Name, prev))
			}
			seen[c.Name] = f.name
			s.Cases = append(s.Cases, c)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("conformance: %w", errors.Join(errs...))
	}
	for i, c := range s.Cases {
		c.index = i
	}
	return s, nil
}

// parseFile decodes one matrix file strictly.
func parseFile(name string, b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.name = name
	if want := strings.TrimSuffix(path.Base(name), ".yaml"); f.Matrix != want {
		return nil, fmt.Errorf("%s: matrix %q must match the file name %q", name, f.Matrix, want)
	}
	for _, steps := range f.Situations {
		for i := range steps {
			steps[i].File = name
		}
	}
	for i := range f.Cases {
		for j := range f.Cases[i].Steps {
			f.Cases[i].Steps[j].File = name
		}
	}
	return &f, nil
}

// expandCases inlines the situations (of every file) into the file's cases
// and validates them.
func (f *File) expandCases(situations map[string][]Step) error {
	var errs []error
	for i := range f.Cases {
		c := &f.Cases[i]
		c.file = f.name
		steps, err := expand(situations, c.Steps, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: case %s: %w", f.name, c.Name, err))
			continue
		}
		c.Steps = steps
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: case %s: %w", f.name, c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// expand inlines `situation` steps, refusing cycles.
func expand(situations map[string][]Step, steps []Step, stack []string) ([]Step, error) {
	var out []Step
	for _, st := range steps {
		if rp, ok := st.Arg.(*RepeatStep); ok {
			if rp.Times < 1 || rp.Times > 1000 || len(rp.Steps) == 0 {
				return nil, fmt.Errorf("line %d: repeat needs times 1..1000 and steps", st.Line)
			}
			x, err := expand(situations, rp.Steps, stack)
			if err != nil {
				return nil, err
			}
			for k := range x {
				x[k].File, x[k].Line = st.File, st.Line // the nested lines count from the repeat
			}
			for range rp.Times {
				out = append(out, x...)
			}
			continue
		}
		if st.Kind != "situation" {
			out = append(out, st)
			continue
		}
		name := *st.Arg.(*string)
		for _, s := range stack {
			if s == name {
				return nil, fmt.Errorf("situation %s includes itself", name)
			}
		}
		sub, ok := situations[name]
		if !ok {
			return nil, fmt.Errorf("line %d: unknown situation %q", st.Line, name)
		}
		x, err := expand(situations, sub, append(stack, name))
		if err != nil {
			return nil, err
		}
		out = append(out, x...)
	}
	return out, nil
}

// validate checks what can be checked before running: names, cells, call
// references and steps that need the case's own server.
func (c *Case) validate() error {
	if !caseNameRe.MatchString(c.Name) {
		return fmt.Errorf("bad case name %q (lower case, digits, '.', '-', optionally ~suffix)", c.Name)
	}
	if len(c.Covers)+len(c.Partial) == 0 {
		return errors.New("covers no cell: set covers and/or partial")
	}
	for _, id := range append(append([]string(nil), c.Covers...), c.Partial...) {
		if !cellIDRe.MatchString(id) {
			return fmt.Errorf("bad cell ID %q", id)
		}
	}
	if len(c.Partial) > 0 && c.Missing == "" {
		return errors.New("partial cells need `missing`: what the case does not check")
	}
	if c.Server != nil && c.Server.SpoolDir && !c.Server.StateDir {
		return errors.New("spool_dir needs `server: {state_dir: true}` (the spool is in the case's folder)")
	}
	if c.Runtime != "" {
		if _, ok := runtimeChecks[c.Runtime]; !ok {
			return fmt.Errorf("unknown runtime check %q (known: %s)", c.Runtime, strings.Join(runtimeCheckNames(), ", "))
		}
		if len(c.Steps) > 0 || c.Server != nil {
			return errors.New("a runtime check has no steps and no server: it drives core/runtime in process")
		}
		return nil
	}
	if len(c.Steps) == 0 {
		return errors.New("no steps")
	}
	if c.Server != nil {
		for _, e := range c.Server.Engines {
			if !isRealEngine(e) {
				return fmt.Errorf("server.engines: unknown real engine %q", e)
			}
		}
	}
	calls := map[string]bool{}
	folders := map[string]bool{}
	ref := func(st Step, name string) error {
		if !calls[name] {
			return fmt.Errorf("line %d: %s refers to call %q, not started before", st.Line, st.Kind, name)
		}
		return nil
	}
	def := func(st Step, name string) error {
		if name == "" {
			return nil
		}
		if !symbolRe.MatchString(name) {
			return fmt.Errorf("line %d: bad call name %q", st.Line, name)
		}
		if calls[name] {
			return fmt.Errorf("line %d: call %q started twice", st.Line, name)
		}
		calls[name] = true
		return nil
	}
	unpinned := "" // the last asynchronous submission not yet observed
	for _, st := range c.Steps {
		switch st.Kind {
		case "await", "await_gate", "await_model", "await_chunks", "exited":
			unpinned = ""
		case "put", "infer", "load", "unload", "bulk", "http", "stall":
			if unpinned != "" {
				return fmt.Errorf("line %d: %s is sent while the asynchronous %s may not have reached the server yet: "+
					"pin the arrival order with an await_model, await_gate or await step first", st.Line, st.Kind, unpinned)
			}
			if asyncName(st) != "" && st.Kind != "stall" { // a stall step returns once its bytes are sent
				unpinned = asyncName(st)
			}
		}
		if ownServerSteps[st.Kind] && c.Server == nil {
			return fmt.Errorf("line %d: step %s needs the case's own server (set `server:`)", st.Line, st.Kind)
		}
		if rs, ok := st.Arg.(*RestartStep); ok && (!c.Server.StateDir || rs.Kill && !c.Server.Binary) {
			return fmt.Errorf("line %d: restart needs `server: {state_dir: true}`, and kill: true also binary: true", st.Line)
		}
		if fileSteps[st.Kind] && !c.Server.StateDir {
			return fmt.Errorf("line %d: step %s needs `server: {state_dir: true}`", st.Line, st.Kind)
		}
		if ss, ok := st.Arg.(*StopStep); ok && ss.Kill && !c.Server.Binary {
			return fmt.Errorf("line %d: stop with kill: true needs `binary: true`", st.Line)
		}
		if _, ok := st.Arg.(*CrashLoopStep); ok && !c.Server.Binary {
			return fmt.Errorf("line %d: crash_loop kills its server: it needs `binary: true`", st.Line)
		}
		var err error
		switch a := st.Arg.(type) {
		case *PutStep:
			err = def(st, a.As)
		case *InferStep:
			err = def(st, a.As)
		case *TargetStep:
			err = def(st, a.As)
		case *BulkStep:
			err = def(st, a.As)
		case *HTTPStep:
			err = def(st, a.As)
			if err == nil && a.Jar != "" && a.As != "" {
				err = fmt.Errorf("line %d: an http step with a jar is synchronous (no `as`)", st.Line)
			}
		case *StallStep:
			err = def(st, a.As)
		case *[]string:
			for _, n := range *a {
				if err = ref(st, n); err != nil {
					break
				}
			}
		case *AwaitStep:
			err = ref(st, a.Call)
		case *ChunkStep:
			err = ref(st, a.Call)
		case *FolderStep:
			switch {
			case !symbolRe.MatchString(a.As):
				err = fmt.Errorf("line %d: folder needs `as`, a symbol", st.Line)
			case folders[a.As]:
				err = fmt.Errorf("line %d: folder %q made twice", st.Line, a.As)
			}
			folders[a.As] = true
			for _, cp := range a.Checkpoints {
				if cp.Name == "" && err == nil {
					err = fmt.Errorf("line %d: a folder checkpoint needs a name", st.Line)
				}
			}
		case *FileStep:
			if err = a.validate(); err != nil {
				err = fmt.Errorf("line %d: %w", st.Line, err)
			}
		case *CrashLoopStep:
			err = a.validate(st.Line)
		case *TeardownStep:
			if a.Model == "" {
				err = fmt.Errorf("line %d: teardowns needs a model", st.Line)
			}
		case *string:
			if st.Kind == "disconnect" {
				err = ref(st, *a)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// asyncName returns the call name of an asynchronous step, or "".
func asyncName(st Step) string {
	switch a := st.Arg.(type) {
	case *PutStep:
		return a.As
	case *InferStep:
		return a.As
	case *TargetStep:
		return a.As
	case *BulkStep:
		return a.As
	case *HTTPStep:
		return a.As
	case *StallStep:
		return a.As
	}
	return ""
}

// Cells returns every cell the case names, covered fully or partially.
func (c *Case) Cells() []string {
	return append(append([]string(nil), c.Covers...), c.Partial...)
}

// Matrix returns the matrix (file) the case belongs to.
func (c *Case) Matrix() string { return strings.TrimSuffix(path.Base(c.file), ".yaml") }

// NeedsBinary reports whether the case needs a real server process.
func (c *Case) NeedsBinary() bool { return c.Server != nil && c.Server.Binary }

// TouchesFiles reports whether a step acts on the case's state dir and
// folder, or starts a server on it beside the runner's (fileSteps):
// against --target such a case needs the build as a binary.
func (c *Case) TouchesFiles() bool {
	return slices.ContainsFunc(c.Steps, func(st Step) bool { return fileSteps[st.Kind] })
}

// readsTrace reports whether a step reads the server's scheduler trace.
func (c *Case) readsTrace() bool {
	for _, st := range c.Steps {
		if st.Kind == "teardowns" {
			return true
		}
	}
	return false
}

// afterShutdownOK are the steps that need no new connection once the
// case's server has begun its shutdown.
var afterShutdownOK = map[string]bool{"pending": true, "await": true, "await_chunks": true, "disconnect": true,
	"refused": true, "exited": true, "log": true, "sessions": true, "signal": true, "shutdown": true,
	"teardowns": true}

// UsesHandler reports whether a step goes to the in-process handler: an
// explicit `via: handler`, or any step that sends a request after the
// shutdown began (the listener is closed by then; in-process such steps
// reach the server's handler). Such cases run only on in-process servers:
// over a real connection net/http drops every request whose header
// arrives after its Shutdown began, so the window in which a new
// submission meets the shutting-down runtime cannot be reached from
// outside the process.
func (c *Case) UsesHandler() bool {
	down := false
	for _, st := range c.Steps {
		if h, ok := st.Arg.(*HTTPStep); ok && h.Via == "handler" {
			return true
		}
		if down && !afterShutdownOK[st.Kind] {
			return true
		}
		down = down || st.Kind == "shutdown"
	}
	return false
}
