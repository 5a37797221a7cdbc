package backends

import "context"

// ProbeByOpening is Engine.Probe for engines whose only honest probe is a
// real open: it opens the primary session with open, closes it, and
// reports the capacity the open advertised. A model the library rejects
// fails the probe.
func ProbeByOpening(ctx context.Context, spec Spec, open func(context.Context, Spec) (Session, int, error)) (int, error) {
	s, n, err := open(ctx, spec)
	if err != nil {
		return 0, err
	}
	return n, s.Close(ctx)
}

// LinearMB is the resident-memory estimate of a pool whose sessions each
// hold perSlotMB beside a shared baseMB (at least one session).
func LinearMB(baseMB, perSlotMB int64, slots int) int64 {
	return baseMB + perSlotMB*int64(max(1, slots))
}
