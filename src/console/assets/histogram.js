// Percentiles over a recent window from the engine's cumulative histograms
// (GET /console/api/status, latency_ms.*): the difference of two readings
// holds exactly the observations made between them.

// now - before, bucket by bucket. `before` may be null (since start). The
// bounds must be the same (they are fixed when the server starts).
export function histogramSince(now, before) {
  if (!before) return now;
  return {
    bounds: now.bounds,
    counts: now.counts.map((c, i) => c - (before.counts[i] || 0)),
    count: now.count - before.count,
    sum: now.sum - before.sum,
  };
}

// The q-quantile (q in [0, 1]) by linear interpolation inside the bucket
// that holds it, as the engine estimates it (engine/metrics.cc); null when
// the histogram is empty. The overflow bucket has no upper edge: its lower
// edge is returned.
export function quantile(h, q) {
  if (!h || h.count <= 0) return null;
  const target = Math.min(Math.max(q, 0), 1) * h.count;
  let seen = 0;
  for (let i = 0; i < h.counts.length; i++) {
    const c = h.counts[i];
    if (c > 0 && seen + c >= target) {
      const lo = i === 0 ? 0 : h.bounds[i - 1];
      if (i === h.bounds.length) return lo;
      return lo + (h.bounds[i] - lo) * Math.min(Math.max((target - seen) / c, 0), 1);
    }
    seen += c;
  }
  return h.bounds.length ? h.bounds[h.bounds.length - 1] : null;
}

export function mean(h) {
  return h && h.count > 0 ? h.sum / h.count : null;
}
