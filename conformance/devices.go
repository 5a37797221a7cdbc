package conformance

import (
	"embed"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Device runs: CI has no GPU, so the cells only a device can show
// (CONTRACT.md "GPU-only cells") cannot earn a label from the suite's own
// run. They earn it from a run recorded on a device machine: its log is
// committed in device-runs/ and embedded here, and runs.yaml names the
// cells it covers and the lines of the log that show them (its verdicts).
// A covered cell is D while every verdict appears in the log verbatim, so
// a label never rests on a run nobody can read.

//go:embed device-runs/runs.yaml device-runs/*.log
var deviceFS embed.FS

// DeviceRun is one recorded run on a device machine.
type DeviceRun struct {
	Log      string   `yaml:"log"`
	BuildLog string   `yaml:"build_log"`
	Machine  string   `yaml:"machine"`
	Date     string   `yaml:"date"`
	Command  string   `yaml:"command"`
	Covers   []string `yaml:"covers"`
	Verdicts []string `yaml:"verdicts"`
}

// DeviceRuns returns the recorded device runs, each checked against its
// log: a run with no log, no covered cell, no verdict, or a verdict its
// log does not hold is an error.
func DeviceRuns() ([]DeviceRun, error) {
	b, err := deviceFS.ReadFile("device-runs/runs.yaml")
	if err != nil {
		return nil, fmt.Errorf("conformance: device runs: %w", err)
	}
	var doc struct {
		Runs []DeviceRun `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("conformance: device-runs/runs.yaml: %w", err)
	}
	var errs []error
	for _, r := range doc.Runs {
		if err := r.check(); err != nil {
			errs = append(errs, err)
		}
	}
	return doc.Runs, errors.Join(errs...)
}

func (r DeviceRun) check() error {
	if r.Machine == "" || r.Date == "" || r.Command == "" || len(r.Covers) == 0 || len(r.Verdicts) == 0 {
		return fmt.Errorf("device run %s: machine, date, command, covers and verdicts are required", r.Log)
	}
	logs := []string{r.Log}
	if r.BuildLog != "" {
		logs = append(logs, r.BuildLog)
	}
	var text string
	for _, l := range logs {
		b, err := deviceFS.ReadFile("device-runs/" + l)
		if err != nil {
			return fmt.Errorf("device run %s: %w", r.Log, err)
		}
		if l == r.Log {
			text = string(b)
		}
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, v := range r.Verdicts {
		if !lines[v] {
			return fmt.Errorf("device run %s: verdict %q is not a line of its log", r.Log, v)
		}
	}
	return nil
}

// evidence is the Test column of a cell a device run covers.
func (r DeviceRun) evidence() string {
	cmd, _, _ := strings.Cut(r.Command, " ")
	return fmt.Sprintf("device run `%s`, %s, %s (conformance/device-runs/%s)", cmd, strings.SplitN(r.Machine, ",", 2)[0], r.Date, r.Log)
}
