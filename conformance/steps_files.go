package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// Steps that use files on the runner's machine, next to the case's own
// server: its scheduler trace and models-root folders.

// teardowns waits until the own server's trace shows len(Causes) teardowns
// of the model and checks their causes, in order. The trace is the
// server's --trace file (one core.Record per line, written in the
// scheduler's order, flushed after every step); a partial last line is
// read again at the next poll.
func (r *caseRun) teardowns(a *TeardownStep) error {
	path := r.inst.TracePath()
	if path == "" {
		return fmt.Errorf("the case's server writes no trace")
	}
	id := r.model(a.Model)
	return r.waitFor(fmt.Sprintf("teardowns of %s with causes %v", a.Model, a.Causes), func() (bool, string, error) {
		causes, err := teardownCauses(path, id)
		if err != nil {
			return false, "", err
		}
		for i, c := range causes {
			if i >= len(a.Causes) {
				return false, "", fmt.Errorf("model %s: teardown causes %v, want exactly %v", a.Model, causes, a.Causes)
			}
			if c != a.Causes[i] {
				return false, "", fmt.Errorf("model %s: teardown causes %v, want %v", a.Model, causes, a.Causes)
			}
		}
		return len(causes) == len(a.Causes), fmt.Sprintf("causes %v", causes), nil
	})
}

// teardownCauses returns the causes of every StartTeardown of model id in
// the trace at path, in order.
func teardownCauses(path, id string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("trace: %w", err)
	}
	var causes []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	want := core.EfStartTeardown.String()
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(id)) || !bytes.Contains(line, []byte(want)) {
			continue
		}
		var rec core.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && bytes.HasSuffix(b, line) {
				break // the last line is still being written
			}
			return nil, fmt.Errorf("trace: %w: %s", err, line)
		}
		if rec.Ef == want && rec.Model == id {
			causes = append(causes, rec.Cause)
		}
	}
	return causes, sc.Err()
}

// folder makes a models-root folder with fixture checkpoints.
func (r *caseRun) folder(a *FolderStep) error {
	dir, err := os.MkdirTemp("", "sluice-conformance-root-")
	if err != nil {
		return err
	}
	r.dirs[a.As] = dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		r.dirs[a.As] = real // the server reports the resolved path
	}
	for _, cp := range a.Checkpoints {
		m := catalogue.Manifest{Schema: catalogue.Schema, Name: cp.Name, Task: "tts", Engine: fixture.Name,
			Parallel: catalogue.Parallel{MaxSlots: 16}}
		if cp.Engine != "" {
			m.Engine = cp.Engine
		}
		if cp.Task != "" {
			m.Task = cp.Task
		}
		if cp.Options != nil {
			if m.Options, err = json.Marshal(cp.Options); err != nil {
				return err
			}
		}
		b, err := m.Marshal()
		if err != nil {
			return err
		}
		d := filepath.Join(dir, cp.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, catalogue.ManifestName), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// folderSymbol reports whether s, written $NAME, names a folder of the case.
func (r *caseRun) folderSymbol(s string) (string, bool) {
	d, ok := r.dirs[strings.TrimPrefix(s, "$")]
	return d, ok && strings.HasPrefix(s, "$")
}

// v2AudioBody is an inference-protocol infer body carrying samples as one
// "audio" tensor of datatype INT16 or FP32 (samples/32768).
func v2AudioBody(datatype string, rate int, s []int16) ([]byte, error) {
	var data any
	switch datatype {
	case "INT16":
		data = s
	case "FP32":
		f := make([]float32, len(s))
		for i, v := range s {
			f[i] = float32(v) / 32768
		}
		data = f
	default:
		return nil, fmt.Errorf("audio body: tensor %q: want INT16 or FP32", datatype)
	}
	return json.Marshal(map[string]any{
		"parameters": map[string]any{"sample_rate": rate},
		"inputs":     []any{map[string]any{"name": "audio", "shape": []int{len(s)}, "datatype": datatype, "data": data}},
	})
}
