package abstract

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// AppendKey appends the canonical key of s: everything that decides its
// future, without ticket numbers, job numbers or absolute arrival numbers
// (arrival order enters as the rank of each admitted request among the
// queued ones, bulk parents as their rank). With sym, models are sorted by
// their own encoding: symmetry over model identities.
func (s *State) AppendKey(b []byte, sym bool) []byte { return s.appendKey(b, sym, false) }

// AppendExactKey appends a key that also names tickets and jobs by number
// and models by ID, in registration order (trace validation).
func (s *State) AppendExactKey(b []byte) []byte { return s.appendKey(b, false, true) }

func (s *State) appendKey(b []byte, sym, ids bool) []byte {
	b = append(b, byte(len(s.Models)), b2b(s.Shutdown), b2b(s.ShutdownSent), byte(len(s.Bulks)))
	for _, bk := range s.Bulks {
		b = append(b, byte(bk.Reason))
		if ids {
			b = binary.AppendUvarint(b, bk.ID)
		}
	}
	keys := make([][]byte, len(s.Models))
	for i := range s.Models {
		keys[i] = s.appendModelKey(nil, i, ids)
	}
	if sym {
		slices.SortFunc(keys, bytes.Compare)
	}
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

func (s *State) bulkRank(id uint64) byte {
	for k := range s.Bulks {
		if s.Bulks[k].ID == id {
			return byte(k)
		}
	}
	return 0xff
}

func (s *State) appendEntry(b []byte, e *Entry, ids bool) []byte {
	cfg := 0
	if e.Cfg != nil {
		cfg = e.Cfg.id
	}
	b = append(b, byte(e.Kind), byte(e.Op), byte(cfg), b2b(e.Bounded))
	if e.Kind == KMember {
		b = append(b, s.bulkRank(e.Bulk))
	}
	if ids {
		b = binary.AppendUvarint(b, e.ID)
	}
	return b
}

func (s *State) appendModelKey(b []byte, i int, ids bool) []byte {
	md := &s.Models[i]
	lpos := byte(0xff)
	for k, x := range s.Loaders {
		if x == i {
			lpos = byte(k)
		}
	}
	cause := md.Cause
	if md.Job != JTeardown {
		cause = 0
	}
	b = append(b, byte(md.Life), byte(md.Cfg.id), b2b(md.Published), byte(md.Sessions), byte(md.Capacity),
		byte(md.Built), byte(md.Step), byte(md.FailCode), byte(md.Job), byte(cause), b2b(md.Resident), lpos)
	b = binary.AppendUvarint(b, md.Ver)
	b = binary.AppendUvarint(b, md.PoolVer)
	b = binary.AppendUvarint(b, uint64(md.ResMB))
	// Eviction order among published pools, the only victims; a model's
	// last use matters again only once it publishes, which resets it.
	lru := byte(0xff)
	if md.Published {
		lru = 0
		for x := range s.Models {
			if s.Models[x].Published && s.Models[x].LastUse < md.LastUse {
				lru++
			}
		}
	}
	b = append(b, lru)
	if md.HasMgr {
		b = s.appendEntry(append(b, 'm'), &md.Mgr, ids)
	}
	hs := make([][20]byte, len(md.Holders))
	for k, h := range md.Holders {
		var x [20]byte
		x[0] = b2b(h.Wait)
		binary.BigEndian.PutUint64(x[1:], h.Ver)
		rank := 0
		for _, e := range md.Queue {
			if e.Seq < h.Seq {
				rank++
			}
		}
		x[9] = byte(rank)
		if ids {
			binary.BigEndian.PutUint64(x[10:], h.ID)
		}
		hs[k] = x
	}
	slices.SortFunc(hs, func(a, c [20]byte) int { return bytes.Compare(a[:], c[:]) })
	for _, x := range hs {
		b = append(append(b, 's'), x[:]...)
	}
	for k := range md.Queue {
		b = s.appendEntry(append(b, 'q'), &md.Queue[k], ids)
	}
	if ids {
		b = binary.AppendUvarint(append(b, 'j'), md.JobID)
		b = append(append(b, md.ID...), 0)
	}
	return append(b, '|')
}

// AppendEffectsKey appends a canonical encoding of a multiset of effects.
func AppendEffectsKey(b []byte, effs []Effect) []byte {
	if len(effs) == 0 {
		return append(b, 0)
	}
	keys := make([][]byte, len(effs))
	for k := range effs {
		keys[k] = effs[k].appendKey(nil)
	}
	slices.SortFunc(keys, bytes.Compare)
	b = append(b, byte(len(keys)))
	for _, k := range keys {
		b = append(b, k...)
	}
	return b
}

func (e *Effect) appendKey(b []byte) []byte {
	cfg := 0
	if e.Cfg != nil {
		cfg = e.Cfg.id
	}
	b = append(b, byte(e.Kind), byte(e.Code), byte(e.Cause), byte(cfg), byte(e.Index), byte(e.Sessions))
	b = binary.AppendUvarint(b, e.Ticket)
	b = binary.AppendUvarint(b, uint64(e.Model))
	b = binary.AppendUvarint(b, e.Ver)
	if e.Bulk != nil {
		for _, x := range e.Bulk.Unloaded {
			b = append(append(b, x...), 0)
		}
		b = append(b, 1)
		for _, x := range e.Bulk.NotFound {
			b = append(append(b, x...), 0)
		}
	}
	return append(b, '|')
}

func b2b(v bool) byte {
	if v {
		return 1
	}
	return 0
}
