package mc

// fpTable is an open-addressing hash table from 64-bit fingerprints to state
// numbers: 12 bytes a state at most half full, a third of what a map of full
// keys would need.
type fpTable struct {
	keys []uint64
	vals []int32
	n    int
}

func (t *fpTable) init(size int) {
	t.keys = make([]uint64, size)
	t.vals = make([]int32, size)
	t.n = 0
}

// insert returns the number of fp, inserting it with number id when absent.
func (t *fpTable) insert(fp uint64, id int32) (int32, bool) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := uint64(len(t.keys) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case fp:
			return t.vals[i], false
		case 0:
			t.keys[i], t.vals[i] = fp, id
			t.n++
			return id, true
		}
	}
}

func (t *fpTable) grow() {
	old, oldv := t.keys, t.vals
	t.init(2 * len(old))
	mask := uint64(len(t.keys) - 1)
	for k, fp := range old {
		if fp == 0 {
			continue
		}
		i := fp & mask
		for t.keys[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i], t.vals[i] = fp, oldv[k]
		t.n++
	}
}

// lookup returns the number of fp, if present.
func (t *fpTable) lookup(fp uint64) (int32, bool) {
	mask := uint64(len(t.keys) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case fp:
			return t.vals[i], true
		case 0:
			return 0, false
		}
	}
}
