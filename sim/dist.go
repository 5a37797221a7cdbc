package sim

import "math/rand/v2"

// The distributions use integers only, so a seed draws the same numbers on
// every platform (floating-point functions may differ in their last bit
// between architectures, and the traces must be byte-identical).

// pow2Eighths[k+40] is 1024 * 2^(k/8) for k in -40..40.
var pow2Eighths = [...]int64{
	32, 35, 38, 41, 45, 49, 54, 59, 64, 70, 76, 83, 91, 99, 108, 117,
	128, 140, 152, 166, 181, 197, 215, 235, 256, 279, 304, 332, 362, 395, 431, 470,
	512, 558, 609, 664, 724, 790, 861, 939, 1024, 1117, 1218, 1328, 1448, 1579, 1722, 1878,
	2048, 2233, 2435, 2656, 2896, 3158, 3444, 3756, 4096, 4467, 4871, 5312, 5793, 6317, 6889, 7512,
	8192, 8933, 9742, 10624, 11585, 12634, 13777, 15024, 16384, 17867, 19484, 21247, 23170, 25268, 27554, 30048,
	32768,
}

// negLog[i] is 1024 * -ln((i+0.5)/256): an exponential variate with mean
// about 1 in fixed point, drawn by a uniform index.
var negLog = [...]int64{
	6388, 5263, 4740, 4395, 4138, 3933, 3762, 3615, 3487, 3373, 3270, 3177, 3092, 3013, 2940, 2872,
	2808, 2747, 2690, 2637, 2585, 2537, 2490, 2445, 2403, 2362, 2322, 2285, 2248, 2213, 2179, 2145,
	2113, 2082, 2052, 2023, 1995, 1967, 1940, 1914, 1888, 1863, 1839, 1815, 1792, 1769, 1747, 1725,
	1704, 1683, 1662, 1642, 1622, 1603, 1584, 1565, 1547, 1529, 1512, 1494, 1477, 1460, 1444, 1428,
	1412, 1396, 1380, 1365, 1350, 1335, 1321, 1306, 1292, 1278, 1264, 1250, 1237, 1224, 1210, 1197,
	1185, 1172, 1160, 1147, 1135, 1123, 1111, 1099, 1088, 1076, 1065, 1054, 1042, 1031, 1020, 1010,
	999, 988, 978, 968, 957, 947, 937, 927, 917, 908, 898, 889, 879, 870, 860, 851,
	842, 833, 824, 815, 806, 797, 789, 780, 772, 763, 755, 746, 738, 730, 722, 714,
	706, 698, 690, 682, 674, 667, 659, 651, 644, 636, 629, 622, 614, 607, 600, 593,
	586, 579, 572, 565, 558, 551, 544, 537, 530, 524, 517, 510, 504, 497, 491, 484,
	478, 472, 465, 459, 453, 447, 441, 434, 428, 422, 416, 410, 404, 398, 392, 387,
	381, 375, 369, 364, 358, 352, 347, 341, 335, 330, 324, 319, 313, 308, 303, 297,
	292, 287, 281, 276, 271, 266, 260, 255, 250, 245, 240, 235, 230, 225, 220, 215,
	210, 205, 200, 196, 191, 186, 181, 176, 172, 167, 162, 158, 153, 148, 144, 139,
	134, 130, 125, 121, 116, 112, 107, 103, 99, 94, 90, 85, 81, 77, 73, 68,
	64, 60, 55, 51, 47, 43, 39, 35, 30, 26, 22, 18, 14, 10, 6, 2,
}

// rng wraps the seeded generator with the integer draws the world uses.
type rng struct{ *rand.Rand }

func newRNG(seed uint64) rng {
	return rng{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// ppm reports true with probability p parts per million.
func (r rng) ppm(p int64) bool { return p > 0 && r.Int64N(1_000_000) < p }

// between draws uniformly from [lo, hi].
func (r rng) between(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}

// logUniform draws from [lo, hi] with equal weight per doubling.
func (r rng) logUniform(lo, hi int64) int64 {
	v := lo
	for v*2 <= hi && r.IntN(2) == 0 {
		v *= 2
	}
	return r.between(v, min(hi, 2*v))
}

// expo draws an exponential variate with the given mean (cut at about 6x).
func (r rng) expo(mean int64) int64 {
	return mean*negLog[r.IntN(len(negLog))]/1024 + r.Int64N(max(1, mean/256))
}

// spread draws a log-normal-like variate around median: the exponent is a
// sum of uniform eighths of an octave, so spread 8 gives about one octave of
// standard deviation. A heavy tail is the caller's business.
func (r rng) spread(median int64, spread int) int64 {
	k := 0
	for range 4 {
		k += r.IntN(2*spread+1) - spread
	}
	k /= 2
	k = max(-40, min(40, k))
	return median*pow2Eighths[k+40]/1024 + 1
}
