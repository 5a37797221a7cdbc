package mc

import "github.com/sluice-dev/sluice/spec/env"

// cycles finds the strongly connected components of the explored graph
// (Tarjan's algorithm, iterative). A component with more than one state, or
// a state with an edge to itself, is a reachable cycle; if every state of
// such a cycle has a waiting ticket, the fair scheduler may go round it
// forever without serving that ticket: a liveness violation, reported as a
// lasso (the path to the cycle, then the cycle).
func (c *checker) cycles(res *Result) {
	n := int32(len(c.parent))
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	type frame struct {
		v    int32
		next int64
	}
	var call []frame
	var counter int32
	for s := int32(0); s < n; s++ {
		if index[s] >= 0 {
			continue
		}
		call = append(call, frame{s, c.off[s]})
		index[s], low[s] = counter, counter
		counter++
		stack = append(stack, s)
		onStack[s] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.next < c.off[v+1] {
				w := c.edges[f.next]
				f.next++
				if index[w] < 0 {
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, c.off[w]})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				if low[v] < low[u] {
					low[u] = low[v]
				}
			}
			if low[v] != index[v] {
				continue
			}
			var comp []int32
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) == 1 && !c.selfLoop(v) {
				continue
			}
			res.Cycles++
			starving := true
			for _, w := range comp {
				starving = starving && c.waiting[w]
			}
			if starving && res.Violation == nil {
				res.Violation = &Violation{Kind: "liveness", Name: "NoStarvation",
					Detail: "a reachable cycle in which some ticket waits in every state"}
				res.Root, res.Path = c.path(v)
				res.Cycle = c.cyclePath(v, comp)
				res.Path = append(res.Path, res.Cycle...)
			}
		}
	}
}

func (c *checker) selfLoop(v int32) bool {
	for k := c.off[v]; k < c.off[v+1]; k++ {
		if c.edges[k] == v {
			return true
		}
	}
	return false
}

// cyclePath returns the labels of a cycle from v back to v inside comp: a
// shortest cycle is found on the stored edges, then each edge's label is
// recovered by expanding its source again and matching the target's
// fingerprint.
func (c *checker) cyclePath(v int32, comp []int32) []env.Label {
	in := make(map[int32]bool, len(comp))
	for _, w := range comp {
		in[w] = true
	}
	prev := map[int32]int32{}
	queue := []int32{v}
	var states []int32
	for len(queue) > 0 && states == nil {
		u := queue[0]
		queue = queue[1:]
		for k := c.off[u]; k < c.off[u+1]; k++ {
			w := c.edges[k]
			if !in[w] {
				continue
			}
			if w == v {
				for x := u; x != v; x = prev[x] {
					states = append(states, x)
				}
				states = append(states, v)
				break
			}
			if _, seen := prev[w]; !seen {
				prev[w] = u
				queue = append(queue, w)
			}
		}
	}
	// states is u_k ... u_1 v; the cycle is v -> u_1 -> ... -> u_k -> v.
	var cyc []int32
	for k := len(states) - 1; k >= 0; k-- {
		cyc = append(cyc, states[k])
	}
	var out []env.Label
	for k, u := range cyc {
		w := cyc[(k+1)%len(cyc)]
		root, path := c.path(u)
		exp, err := c.sys.Expand(root, path, nil)
		if err != nil {
			return out
		}
		for _, s := range exp.Succs {
			if !s.Stutter && s.FP == c.fps[w] {
				out = append(out, s.Label)
				break
			}
		}
	}
	return out
}
