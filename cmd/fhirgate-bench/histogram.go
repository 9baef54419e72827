package main

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// subBuckets is the number of linear buckets per power of two. With 128 a
// recorded value is off by less than 1/128 (0.8%) of itself, which is far
// below the run-to-run noise of a loopback benchmark, and the whole range
// of time.Duration fits in 57*128 counters (58 KiB per histogram).
const (
	subBucketBits = 7
	subBuckets    = 1 << subBucketBits
	numBuckets    = (64 - subBucketBits + 1) * subBuckets
)

// histogram records every latency of a run in log-linear buckets (the
// HdrHistogram layout), so percentiles cost no sorting and no memory per
// sample. It is not safe for concurrent use: each load worker keeps its own
// and they are merged at the end.
type histogram struct {
	counts   []uint64
	n        uint64
	sum      float64 // nanoseconds, for the mean
	min, max time.Duration
}

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, numBuckets)}
}

// bucketOf maps a non-negative value to its bucket. Values below
// subBuckets have a bucket each; above, every power of two is split into
// subBuckets equal parts.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBucketBits - 1
	return (shift+1)*subBuckets + int(v>>uint(shift)) - subBuckets
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subBuckets {
		return uint64(i), uint64(i)
	}
	shift := i/subBuckets - 1
	lo = uint64(i%subBuckets+subBuckets) << uint(shift)
	return lo, lo + (uint64(1) << uint(shift)) - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += float64(d)
}

// merge adds o's samples to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// count returns the number of samples.
func (h *histogram) count() uint64 { return h.n }

// mean returns the exact mean latency.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// quantile returns the latency below which a fraction q (0..1) of the
// samples fall: the midpoint of the bucket holding the sample of rank
// ceil(q*n), clamped to the exact min and max.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			v := time.Duration(lo + (hi-lo)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// histogramJSON is a histogram as the loadgen prints it: the non-empty
// buckets as [index, count] pairs plus the exact extremes and sum, enough
// for the parent to merge runs exactly.
type histogramJSON struct {
	Buckets [][2]uint64 `json:"buckets"`
	MinNs   int64       `json:"min_ns"`
	MaxNs   int64       `json:"max_ns"`
	SumNs   float64     `json:"sum_ns"`
}

func (h *histogram) export() histogramJSON {
	out := histogramJSON{MinNs: int64(h.min), MaxNs: int64(h.max), SumNs: h.sum}
	for i, c := range h.counts {
		if c > 0 {
			out.Buckets = append(out.Buckets, [2]uint64{uint64(i), c})
		}
	}
	return out
}

// histogramFrom rebuilds a histogram; bucket indexes out of range are an
// error (output of another version).
func histogramFrom(j histogramJSON) (*histogram, error) {
	h := newHistogram()
	for _, b := range j.Buckets {
		if b[0] >= numBuckets {
			return nil, fmt.Errorf("histogram bucket %d out of range", b[0])
		}
		h.counts[b[0]] += b[1]
		h.n += b[1]
	}
	h.min, h.max, h.sum = time.Duration(j.MinNs), time.Duration(j.MaxNs), j.SumNs
	return h, nil
}
