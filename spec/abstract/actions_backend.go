package abstract

import (
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// The actions by which backend jobs finish: a load, a clone, a probe or a
// teardown reports back (CONTRACT.md "Failure boundaries and recovery").

func (r *run) jobModel(a Action, j Job) (int, error) {
	i := r.s.Lookup(a.Model)
	if i < 0 || r.s.Models[i].Job != j {
		return -1, fmt.Errorf("abstract: %s of %q: no %s job running", a.Kind, a.Model, j)
	}
	r.s.Models[i].Job, r.s.Models[i].JobID = JNone, 0
	return i, nil
}

// LoadDone: the primary opened with an advertised capacity, or failed. Too
// small a capacity never publishes (CONTRACT fail.initial-load,
// mode.slot-capacity).
func (r *run) LoadDone(a Action) ([]*run, error) {
	i, err := r.jobModel(a, JLoad)
	if err != nil {
		return nil, err
	}
	md := &r.s.Models[i]
	switch {
	case a.Failed:
		r.failLoad(i, core.CodeBackend, 0)
	case a.Capacity < md.Cfg.Slots:
		md.Capacity = a.Capacity
		r.failLoad(i, core.CodeInvalid, 1)
	default:
		md.Capacity = a.Capacity
		md.Built = 1
		r.nextClone(i)
	}
	return []*run{r}, nil
}

// CloneDone: one more private session, or the private pool dies whole.
func (r *run) CloneDone(a Action) ([]*run, error) {
	i, err := r.jobModel(a, JClone)
	if err != nil {
		return nil, err
	}
	md := &r.s.Models[i]
	if a.Failed {
		r.failLoad(i, core.CodeBackend, md.Built)
	} else {
		md.Built++
		r.nextClone(i)
	}
	return []*run{r}, nil
}

// ProbeDone: the private probe of a replacement reports its capacity; a
// failure or too small a capacity keeps the old state whole (CONTRACT
// "Changed multi-slot replacement needs capacity probe").
func (r *run) ProbeDone(a Action) ([]*run, error) {
	i, err := r.jobModel(a, JProbe)
	if err != nil {
		return nil, err
	}
	md := &r.s.Models[i]
	if !md.HasMgr || md.Mgr.Cfg == nil {
		return nil, fmt.Errorf("abstract: ProbeDone of %q without an applying manager", a.Model)
	}
	cfg := md.Mgr.Cfg
	md.Life = core.Unloaded
	if md.Published {
		md.Life = core.Ready
	}
	switch {
	case a.Failed:
		r.managerDone(i, core.EfReject, core.CodeBackend)
	case a.Capacity < cfg.Slots:
		r.managerDone(i, core.EfReject, core.CodeInvalid)
	default:
		r.replace(i, cfg)
	}
	return []*run{r}, nil
}

// TeardownDone: a pool is gone and its memory free; an unload finishes, an
// unregister leaves a tombstone, a reconfigure commits its complete new
// config and loads it.
func (r *run) TeardownDone(a Action) ([]*run, error) {
	i, err := r.jobModel(a, JTeardown)
	if err != nil {
		return nil, err
	}
	md := &r.s.Models[i]
	r.unresident(i)
	md.Life = core.Unloaded
	md.Cause = core.CauseNone
	if md.HasMgr {
		switch md.Step {
		case SUnload:
			r.managerDone(i, core.EfDone, core.CodeOK)
		case SUnregister:
			r.managerDone(i, core.EfDone, core.CodeOK)
			r.tombstone(i)
		case SFailTeardown:
			r.managerDone(i, core.EfReject, md.FailCode)
		case STeardownOld:
			r.commit(i, md.Mgr.Cfg)
			md.Step = SLoad
			r.startLoad(i)
			md.Life = core.Reconfiguring
		}
	}
	return []*run{r}, nil
}
