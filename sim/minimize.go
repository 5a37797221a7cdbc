package sim

import "time"

// ddmin is Zeller's delta debugging: it shrinks the failing index list all
// (where fails(all) holds) to a smaller list on which fails still holds,
// removing chunks of decreasing size. It stops early when the test budget
// or the deadline runs out (complete is then false); what it returns always
// fails.
func ddmin(all []int, fails func([]int) bool, maxTests int, deadline time.Time) (kept []int, tests int, complete bool) {
	cur := append([]int(nil), all...)
	n := 2
	budget := func() bool { return tests < maxTests && time.Now().Before(deadline) }
	for len(cur) >= 2 && budget() {
		chunk := (len(cur) + n - 1) / n
		reduced := false
		// Subsets first, when few: a single chunk that fails alone.
		if n <= 8 {
			for start := 0; start < len(cur) && budget(); start += chunk {
				sub := cur[start:min(start+chunk, len(cur))]
				tests++
				if len(sub) < len(cur) && fails(sub) {
					cur = append([]int(nil), sub...)
					n = 2
					reduced = true
					break
				}
			}
		}
		if !reduced {
			// Complements: everything but one chunk, from the end (later
			// events are more often removable without losing the failure
			// point, which is the last event).
			for start := (len(cur) - 1) / chunk * chunk; start >= 0 && budget(); start -= chunk {
				comp := make([]int, 0, len(cur))
				comp = append(comp, cur[:start]...)
				comp = append(comp, cur[min(start+chunk, len(cur)):]...)
				tests++
				if fails(comp) {
					cur = comp
					n = max(n-1, 2)
					reduced = true
					break
				}
			}
		}
		if !reduced {
			if n >= len(cur) {
				return cur, tests, true
			}
			n = min(n*2, len(cur))
		}
	}
	return cur, tests, len(cur) < 2
}
