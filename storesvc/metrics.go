package storesvc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencesim/fencesim/internal/httpx"
)

// metrics are the service's Prometheus series, all prefixed
// fencesim_store_. T_max is per key, so it is not exported: a gauge per key
// would grow the series without bound.
type metrics struct {
	writes  *prometheus.CounterVec   // result: accepted|stale
	reads   *prometheus.CounterVec   // result: found|not_found
	errors  *prometheus.CounterVec   // op, reason
	latency *prometheus.HistogramVec // op
}

func newMetrics(s *Service) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencesim_store_writes_total", Help: "Writes the store decided, synced before the answer: accepted, or stale (token below T_max, 409).",
		}, []string{"result"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencesim_store_reads_total", Help: "Reads answered: found, or not_found (404).",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencesim_store_errors_total", Help: "Object requests the store did not decide, by reason (invalid, too_large, full, shed, draining, unavailable, internal).",
		}, []string{"op", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencesim_store_request_duration_seconds", Help: "Latency of admitted object requests, fsync included for writes.",
			Buckets: httpx.LatencyBuckets(),
		}, []string{"op"}),
	}
	s.reg.MustRegister(m.writes, m.reads, m.errors, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_store_keys", Help: "Keys the store holds (bounded by MaxKeys).",
		}, func() float64 { return float64(s.keyCount.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_store_in_flight", Help: "Object requests being served.",
		}, func() float64 { return float64(max(s.inFlight.Load(), 0)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_store_draining", Help: "1 while the service drains.",
		}, func() float64 {
			if s.draining.Load() {
				return 1
			}
			return 0
		}),
	)
	for _, r := range []string{"accepted", "stale"} {
		m.writes.WithLabelValues(r)
	}
	for _, r := range []string{"found", "not_found"} {
		m.reads.WithLabelValues(r)
	}
	return m
}

// opMetrics are one operation's series, resolved once.
type opMetrics struct {
	errors  *prometheus.CounterVec // reason, curried with op
	latency prometheus.Observer
}

func (m *metrics) op(op string) opMetrics {
	return opMetrics{
		errors:  m.errors.MustCurryWith(prometheus.Labels{"op": op}),
		latency: m.latency.WithLabelValues(op),
	}
}
