package env

import (
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// Packed is a Label in 16 bytes instead of 24: the model checker keeps one
// per state.
type Packed struct {
	bits   uint64
	ticket uint64
}

// Field widths of Packed.bits, low bits first.
const (
	kindBits   = 8
	modelBits  = 8
	opBits     = 4
	cfgBits    = 8
	reasonBits = 4
	selBits    = 8
	altBits    = 8
	cloneBits  = 8
	capBits    = 2
)

// Pack returns l packed; it panics when a field does not fit (a bound with
// more than 256 models or configs).
func (l Label) Pack() Packed {
	var bits uint64
	shift := 0
	put := func(v uint64, width int, what string) {
		if v >= 1<<width {
			panic(fmt.Sprintf("env: label %s %d does not fit %d bits", what, v, width))
		}
		bits |= v << shift
		shift += width
	}
	put(uint64(l.Kind), kindBits, "kind")
	put(uint64(l.Model), modelBits, "model")
	put(uint64(l.Op), opBits, "op")
	put(uint64(l.Cfg), cfgBits, "config")
	put(uint64(l.Reason), reasonBits, "reason")
	put(uint64(l.Sel), selBits, "selection")
	put(uint64(l.Alt), altBits, "outcome")
	put(uint64(l.Clone), cloneBits, "clone")
	put(uint64(l.Cap), capBits, "capacity")
	put(uint64(boolByte(l.Bounded)), 1, "bounded")
	put(uint64(boolByte(l.Failed)), 1, "failed")
	put(uint64(boolByte(l.Fair)), 1, "fair")
	return Packed{bits: bits, ticket: l.Ticket}
}

// Label returns the label p packs.
func (p Packed) Label() Label {
	bits := p.bits
	get := func(width int) uint64 {
		v := bits & (1<<width - 1)
		bits >>= width
		return v
	}
	var l Label
	l.Kind = core.EventKind(get(kindBits))
	l.Model = uint8(get(modelBits))
	l.Op = core.Op(get(opBits))
	l.Cfg = uint8(get(cfgBits))
	l.Reason = core.Reason(get(reasonBits))
	l.Sel = uint8(get(selBits))
	l.Alt = uint8(get(altBits))
	l.Clone = uint8(get(cloneBits))
	l.Cap = uint8(get(capBits))
	l.Bounded = get(1) == 1
	l.Failed = get(1) == 1
	l.Fair = get(1) == 1
	l.Ticket = p.ticket
	return l
}
