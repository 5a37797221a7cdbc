package diarize

import (
	"context"
	"math"
)

// cosineDistances returns the n x n cosine distances (1 - cos) of vecs,
// flattened row-major.
func cosineDistances(vecs [][]float64) []float64 {
	n := len(vecs)
	norms := make([]float64, n)
	for i, v := range vecs {
		s := 0.0
		for _, x := range v {
			s += x * x
		}
		norms[i] = math.Sqrt(s) + 1e-12
	}
	d := make([]float64, n*n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			s := 0.0
			for k, x := range vecs[i] {
				s += x * vecs[j][k]
			}
			v := 1 - s/(norms[i]*norms[j])
			d[i*n+j], d[j*n+i] = v, v
		}
	}
	return d
}

// dendrogram is agglomerative clustering with average linkage over the
// distance matrix d (n x n, overwritten): it merges the closest pair until
// one cluster is left and returns the merges in order, each as the pair of
// representative items (the lower index survives). Ties go to the lowest
// indices, so the result depends on the input alone.
func dendrogram(ctx context.Context, d []float64, n int) ([][2]int, []float64, error) {
	size := make([]int, n)
	alive := make([]bool, n)
	nn := make([]int, n)
	nnd := make([]float64, n)
	for i := range n {
		size[i], alive[i] = 1, true
	}
	near := func(i int) {
		nn[i], nnd[i] = -1, math.Inf(1)
		for j := range n {
			if j != i && alive[j] && d[i*n+j] < nnd[i] {
				nn[i], nnd[i] = j, d[i*n+j]
			}
		}
	}
	for i := range n {
		near(i)
	}
	var merges [][2]int
	var heights []float64
	for k := n; k > 1; k-- {
		if k%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		a := -1
		for i := range n {
			if alive[i] && nn[i] >= 0 && (a < 0 || nnd[i] < nnd[a]) {
				a = i
			}
		}
		if a < 0 {
			break
		}
		b := nn[a]
		h := nnd[a]
		if b < a {
			a, b = b, a
		}
		// Merge b into a; Lance-Williams for average linkage.
		sa, sb := float64(size[a]), float64(size[b])
		for j := range n {
			if alive[j] && j != a && j != b {
				v := (sa*d[a*n+j] + sb*d[b*n+j]) / (sa + sb)
				d[a*n+j], d[j*n+a] = v, v
			}
		}
		alive[b] = false
		size[a] += size[b]
		merges = append(merges, [2]int{a, b})
		heights = append(heights, h)
		for j := range n {
			if !alive[j] {
				continue
			}
			if j == a || nn[j] == a || nn[j] == b {
				near(j)
			} else if d[j*n+a] < nnd[j] || (d[j*n+a] == nnd[j] && a < nn[j]) {
				nn[j], nnd[j] = a, d[j*n+a]
			}
		}
	}
	return merges, heights, nil
}

// cut returns the labels of the dendrogram cut at k clusters (0..k-1 in
// order of first appearance).
func cut(merges [][2]int, n, k int) []int {
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, m := range merges[:max(0, min(len(merges), n-k))] {
		parent[find(m[1])] = find(m[0])
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = find(i)
	}
	return firstAppearance(labels)
}

// firstAppearance renumbers labels 0..k-1 in order of first appearance.
func firstAppearance(labels []int) []int {
	m := map[int]int{}
	out := make([]int, len(labels))
	for i, l := range labels {
		if l < 0 {
			out[i] = -1
			continue
		}
		v, ok := m[l]
		if !ok {
			v = len(m)
			m[l] = v
		}
		out[i] = v
	}
	return out
}
