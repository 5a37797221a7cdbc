package engines

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// TestCostRefusedBeforeWork (contract engine.cost-bound): every checkpoint
// of the default root refuses a request over its cost bound (text length,
// stated duration) with ErrInvalid naming the field, a 400 with `param`,
// and its session then answers a standard request.
func TestCostRefusedBeforeWork(t *testing.T) {
	cat, reg := scan(t)
	in := standardInputs(t)
	ctx := context.Background()
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		t.Run(name, func(t *testing.T) {
			s, _, err := reg[cp.Engine].Open(ctx, SpecFor(name, cp, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			req, param := OverLimit(cp.Task)
			_, err = s.Infer(ctx, req, nil)
			if !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != param {
				t.Fatalf("over the bound: %v (param %q), want invalid naming %q", err, backends.ParamOf(err), param)
			}
			if _, err := s.Infer(ctx, in[cp.Task][0], nil); err != nil {
				t.Fatalf("after the refusal: %v", err)
			}
		})
	}
}
