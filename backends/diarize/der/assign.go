package der

import "math"

// Assign returns the one-to-one assignment of rows to columns that
// maximises the summed weight (the Hungarian method, O(n^3) for n = the
// larger side): out[row] is its column, or -1 when the row is left over.
func Assign(w [][]float64) []int {
	rows := len(w)
	cols := 0
	for _, r := range w {
		cols = max(cols, len(r))
	}
	n := max(rows, cols)
	out := make([]int, rows)
	for i := range out {
		out[i] = -1
	}
	if n == 0 {
		return out
	}
	// Minimise cost = -weight on the square padding (padding costs 0).
	cost := func(i, j int) float64 {
		if i < rows && j < len(w[i]) {
			return -w[i][j]
		}
		return 0
	}
	u, v := make([]float64, n+1), make([]float64, n+1)
	p, way := make([]int, n+1), make([]int, n+1) // p[j]: row (1-based) matched to column j
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		minv := make([]float64, n+1)
		used := make([]bool, n+1)
		for j := range minv {
			minv[j] = math.Inf(1)
		}
		for {
			used[j0] = true
			i0, delta, j1 := p[j0], math.Inf(1), 0
			for j := 1; j <= n; j++ {
				if used[j] {
					continue
				}
				if c := cost(i0-1, j-1) - u[i0] - v[j]; c < minv[j] {
					minv[j], way[j] = c, j0
				}
				if minv[j] < delta {
					delta, j1 = minv[j], j
				}
			}
			for j := 0; j <= n; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	for j := 1; j <= n; j++ {
		if i := p[j] - 1; i >= 0 && i < rows && j-1 < cols {
			out[i] = j - 1
		}
	}
	return out
}
