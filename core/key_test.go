package core

// The machine's fingerprint for tests: only tests compare machines by it
// (clones, replays, the API's determinism), so it lives with them and is not
// part of the production binary. The model checker's complete, symmetric
// key is spec/coremodel's Driver.AppendKey.

import "encoding/binary"

// AppendKey appends a canonical encoding of the machine's scheduling state to
// b: everything that decides future behaviour, without absolute times,
// ticket numbers or job numbers (tickets are named by their place, jobs by
// their kind). Time enters only as "has a deadline". It is a fingerprint
// for tests, not a complete state key: it leaves out the
// least-recently-used order of idle models (which decides eviction victims)
// and a live bulk's cancel reason, and it names slots, so it is not
// symmetric over clients. spec/coremodel builds the model checker's
// complete, symmetric key.
func (m *Machine) AppendKey(b []byte) []byte {
	b = append(b, byte(len(m.models)), b2b(m.shutdown), b2b(m.shutdownSent))
	for h := range m.models {
		b = m.AppendModelKey(b, Handle(h))
	}
	b = append(b, byte(len(m.loaders)))
	for _, h := range m.loaders {
		b = binary.AppendUvarint(b, uint64(h))
	}
	return b
}

// AppendModelKey appends the canonical encoding of one model (see AppendKey).
// Bulk members name their parent by the parent's enqueue order relative to
// other live bulks, so keys stay canonical.
func (m *Machine) AppendModelKey(b []byte, h Handle) []byte {
	md := &m.models[h]
	c := md.cfg
	b = append(b, byte(md.state), byte(c.Slots), b2b(md.published), byte(md.capacity), byte(md.sessions),
		byte(md.built), byte(md.active), byte(md.waitInit), byte(md.step), byte(md.jkind), byte(md.cause),
		b2b(md.inLoaders), b2b(md.resident), b2b(md.backoffUntil != 0), b2b(md.gone))
	b = binary.AppendUvarint(b, md.version)
	b = binary.AppendUvarint(b, md.version-md.poolVersion)
	b = binary.AppendUvarint(b, uint64(c.MemoryMB))
	b = append(b, c.Engine...)
	b = append(b, 0)
	b = append(b, c.Options...)
	b = append(b, 0)
	if md.pend != nil {
		b = append(b, 1, byte(md.pend.Slots))
		b = append(b, md.pend.Options...)
		b = append(b, 0)
	}
	for x := md.busy; x != 0; x &= x - 1 {
		s := trailing(x)
		t := &m.ts.t[md.slotT[s]]
		b = append(b, 's', byte(s), byte(t.phase))
		b = binary.AppendUvarint(b, md.version-t.version)
	}
	if md.mgr >= 0 {
		b = m.appendTicketKey(append(b, 'm'), md.mgr)
	}
	for i := md.head; i >= 0; i = m.ts.t[i].next {
		b = m.appendTicketKey(append(b, 'q'), i)
	}
	return append(b, '|')
}

func (m *Machine) appendTicketKey(b []byte, i int32) []byte {
	t := &m.ts.t[i]
	b = append(b, byte(t.kind), byte(t.op), b2b(t.dead > 0))
	if t.cfg != nil {
		b = append(b, byte(t.cfg.Slots))
		b = append(b, t.cfg.Options...)
		b = append(b, 0)
	}
	if t.parent >= 0 {
		b = binary.AppendUvarint(b, m.bulkRank(t.parent))
	}
	return b
}

// bulkRank is the number of live bulk parents enqueued before p.
func (m *Machine) bulkRank(p int32) uint64 {
	var r uint64
	seq := m.ts.t[p].seq
	for i := range m.ts.t {
		t := &m.ts.t[i]
		if t.kind == tkBulk && t.seq < seq {
			r++
		}
	}
	return r
}

func b2b(v bool) byte {
	if v {
		return 1
	}
	return 0
}
