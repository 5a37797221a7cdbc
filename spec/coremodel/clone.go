package coremodel

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/core"
)

// core.Machine has no Clone method. Replay (rebuilding a state from its
// path) is the reference way to copy one; cloneMachine is the fast way: a
// deep copy of the machine's fields by reflection. Slices, maps, arrays and
// structs are copied recursively; the only pointers shared are to values
// core never mutates after creation (*core.Config, *core.BulkResult, the
// *core.ModelStatus snapshot of a manager's answer). Any
// other pointer, interface, channel or function in the machine makes
// cloneMachine panic at first use, so a change of core's shape fails loudly
// rather than sharing state; TestCloneMatchesReplay compares clones with
// replays along random paths.

var sharedPointers = map[reflect.Type]bool{
	reflect.TypeFor[*core.Config]():      true,
	reflect.TypeFor[*core.BulkResult]():  true,
	reflect.TypeFor[*core.ModelStatus](): true,
}

var (
	checkOnce sync.Once
	checkErr  error
)

// needsCopy reports whether values of t refer to memory a copy must not
// share, and rejects types cloneMachine cannot copy.
func needsCopy(t reflect.Type, seen map[reflect.Type]bool) (bool, error) {
	switch t.Kind() {
	case reflect.Slice, reflect.Map:
		if _, err := needsCopy(t.Elem(), seen); err != nil {
			return false, err
		}
		if t.Kind() == reflect.Map {
			if _, err := needsCopy(t.Key(), seen); err != nil {
				return false, err
			}
		}
		return true, nil
	case reflect.Array:
		return needsCopy(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return false, nil
		}
		seen[t] = true
		any := false
		for i := 0; i < t.NumField(); i++ {
			n, err := needsCopy(t.Field(i).Type, seen)
			if err != nil {
				return false, fmt.Errorf("%s.%s: %w", t.Name(), t.Field(i).Name, err)
			}
			any = any || n
		}
		return any, nil
	case reflect.Pointer:
		if sharedPointers[t] {
			return false, nil
		}
		return false, fmt.Errorf("pointer type %s may be mutable", t)
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false, fmt.Errorf("cannot copy %s", t)
	}
	return false, nil
}

var copyCache sync.Map // reflect.Type -> bool

// copyNeeded is needsCopy for types already accepted, cached.
func copyNeeded(t reflect.Type) bool {
	if v, ok := copyCache.Load(t); ok {
		return v.(bool)
	}
	n, _ := needsCopy(t, map[reflect.Type]bool{})
	copyCache.Store(t, n)
	return n
}

// writable returns a settable view of v (which may be an unexported field).
func writable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// deepen replaces everything v refers to by copies; v is addressable.
func deepen(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if copyNeeded(v.Field(i).Type()) {
				deepen(writable(v.Field(i)))
			}
		}
	case reflect.Array:
		if copyNeeded(v.Type().Elem()) {
			for i := 0; i < v.Len(); i++ {
				deepen(v.Index(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len()) // spare capacity is not state
		reflect.Copy(c, v)
		if copyNeeded(v.Type().Elem()) {
			for i := 0; i < c.Len(); i++ {
				deepen(c.Index(i))
			}
		}
		writable(v).Set(c)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		deepVal := copyNeeded(v.Type().Elem())
		it := v.MapRange()
		for it.Next() {
			val := it.Value()
			if deepVal {
				x := reflect.New(val.Type()).Elem()
				x.Set(val)
				deepen(x)
				val = x
			}
			c.SetMapIndex(it.Key(), val)
		}
		writable(v).Set(c)
	}
}

// cloneMachine returns a deep copy of m.
func cloneMachine(m *core.Machine) *core.Machine {
	checkOnce.Do(func() {
		_, checkErr = needsCopy(reflect.TypeFor[core.Machine](), map[reflect.Type]bool{})
	})
	if checkErr != nil {
		panic("coremodel: core.Machine cannot be cloned by reflection any more (use replay): " + checkErr.Error())
	}
	c := new(core.Machine)
	*c = *m
	deepen(reflect.ValueOf(c).Elem())
	return c
}

// Clone returns an independent copy of the driver and its machine.
func (d *Driver) Clone() *Driver {
	c := *d
	c.M = cloneMachine(d.M)
	c.Effects = append([]core.Effect(nil), d.Effects...)
	c.tickets = make(map[core.Ticket]*Ticket, len(d.tickets))
	for k, t := range d.tickets {
		x := *t
		c.tickets[k] = &x
	}
	c.members = make(map[core.Ticket]core.Ticket, len(d.members))
	for k, p := range d.members {
		c.members[k] = p
	}
	c.bulks = make([]*Bulk, len(d.bulks))
	for k, b := range d.bulks {
		x := *b
		c.bulks[k] = &x
	}
	c.jobs = make(map[core.Handle]job, len(d.jobs))
	for k, j := range d.jobs {
		c.jobs[k] = j
	}
	c.failCode = make(map[core.Handle]core.Code, len(d.failCode))
	for k, x := range d.failCode {
		c.failCode[k] = x
	}
	return &c
}
