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
func (s *State) AppendKey(b []byte, sym bool) []byte {
	var class func(string) byte
	if sym {
		class = oneClass
	}
	return s.appendKey(b, class, false)
}

func oneClass(string) byte { return 0 }

// AppendSymmetricKey appends the canonical key of s with symmetry over the
// models of each class: class(id) is model id's class; each model's key
// starts with its class and the models are sorted, so models are exchanged
// only within a class.
func (s *State) AppendSymmetricKey(b []byte, class func(id string) byte) []byte {
	return s.appendKey(b, class, false)
}

// AppendExactKey appends a key that also names tickets and jobs by number
// and models by ID, in registration order (trace validation).
func (s *State) AppendExactKey(b []byte) []byte { return s.appendKey(b, nil, true) }

// appendKey appends the key; with class, models are sorted by class, then key.
func (s *State) appendKey(b []byte, class func(string) byte, ids bool) []byte {
	b = append(b, byte(len(s.Models)), b2b(s.Shutdown), b2b(s.ShutdownSent), byte(len(s.Bulks)))
	for _, bk := range s.Bulks {
		b = append(b, byte(bk.Reason))
		if ids {
			b = binary.AppendUvarint(b, bk.ID)
		}
	}
	// Each model's key, prefixed by its length (two bytes), so that the
	// concatenation is unambiguous.
	start := len(b)
	var spanBuf [8][2]int
	spans := spanBuf[:0]
	for i := range s.Models {
		at := len(b)
		b = append(b, 0, 0)
		if class != nil {
			b = append(b, class(s.Models[i].ID))
		}
		b = s.appendModelKey(b, i, ids)
		binary.BigEndian.PutUint16(b[at:], uint16(len(b)-at-2))
		spans = append(spans, [2]int{at, len(b)})
	}
	if class != nil && len(spans) > 1 {
		b = SortSpans(b, start, spans)
	}
	return b
}

// SortSpans reorders the byte spans of b[start:] (which tile it, in order)
// by content: symmetry over model identities. The core model's keys use
// it too.
func SortSpans(b []byte, start int, spans [][2]int) []byte {
	if slices.IsSortedFunc(spans, func(x, y [2]int) int { return bytes.Compare(b[x[0]:x[1]], b[y[0]:y[1]]) }) {
		return b
	}
	var tmpBuf [1024]byte // the models' keys, on the stack when they fit
	tmp := append(tmpBuf[:0], b[start:]...)
	slices.SortFunc(spans, func(x, y [2]int) int {
		return bytes.Compare(tmp[x[0]-start:x[1]-start], tmp[y[0]-start:y[1]-start])
	})
	b = b[:start]
	for _, x := range spans {
		b = append(b, tmp[x[0]-start:x[1]-start]...)
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
		byte(md.Built), byte(md.Step), byte(md.FailCode), byte(md.Job), byte(cause), b2b(md.Resident), lpos,
		b2b(md.Backoff), b2b(md.Gone))
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
	var hsBuf [8][20]byte
	hs := hsBuf[:0]
	if len(md.Holders) > len(hsBuf) {
		hs = make([][20]byte, 0, len(md.Holders))
	}
	hs = hs[:len(md.Holders)]
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
	b = append(b, byte(len(effs)))
	start := len(b)
	var spanBuf [8][2]int
	spans := spanBuf[:0]
	for k := range effs {
		at := len(b)
		b = effs[k].appendKey(b)
		spans = append(spans, [2]int{at, len(b)})
	}
	return SortSpans(b, start, spans)
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
