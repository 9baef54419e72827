package main

// mergeResults combines runs of the same load (the segments of one side of
// a comparison) as if they were one run: counts add up, throughput is over
// the summed measured time, percentiles come from the merged histograms.
func mergeResults(rs ...*loadResult) (*loadResult, error) {
	if len(rs) == 1 {
		return rs[0], nil
	}
	h := newHistogram()
	out := &loadResult{Concurrency: rs[0].Concurrency, Status: map[string]uint64{}}
	var bodyBytes float64
	for _, r := range rs {
		rh, err := histogramFrom(r.Latency)
		if err != nil {
			return nil, err
		}
		h.merge(rh)
		out.Requests += r.Requests
		out.Seconds += r.Seconds
		out.Non2xx += r.Non2xx
		out.Throttled += r.Throttled
		out.TransportErrors += r.TransportErrors
		out.ServerCPUSeconds += r.ServerCPUSeconds
		out.ServerOwnCPUSeconds += r.ServerOwnCPUSeconds
		bodyBytes += r.MeanBodyBytes * float64(r.Requests)
		for k, v := range r.Status {
			out.Status[k] += v
		}
		for _, e := range r.ErrorSamples {
			if len(out.ErrorSamples) < maxErrorSamples {
				out.ErrorSamples = append(out.ErrorSamples, e)
			}
		}
	}
	if out.Seconds > 0 {
		out.Throughput = float64(out.Requests) / out.Seconds
	}
	if out.Requests > 0 {
		out.MeanBodyBytes = bodyBytes / float64(out.Requests)
	}
	out.perRequestCPU()
	out.P50Ms, out.P90Ms, out.P99Ms = ms(h.quantile(0.50)), ms(h.quantile(0.90)), ms(h.quantile(0.99))
	out.MaxMs, out.MeanMs = ms(h.max), ms(h.mean())
	out.Latency = h.export()
	return out, nil
}
