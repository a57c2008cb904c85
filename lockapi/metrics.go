package lockapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencesim/fencesim/internal/httpx"
)

// metrics are the server's Prometheus series, all prefixed fencesim_lockapi_.
type metrics struct {
	grants     *prometheus.CounterVec   // op: acquire|renew
	rejections *prometheus.CounterVec   // op, reason
	shed       prometheus.Counter       // refused at admission
	latency    *prometheus.HistogramVec // op, outcome: ok|rejected
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencesim_lockapi_grants_total", Help: "Leases granted (acquire) or extended (renew).",
		}, []string{"op"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencesim_lockapi_rejections_total", Help: "Lock requests answered with an error, by reason (held, not_holder, invalid, too_large, overloaded, unavailable, not_leader, draining).",
		}, []string{"op", "reason"}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencesim_lockapi_shed_total", Help: "Lock requests refused at admission (429) because the concurrency limit was reached.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencesim_lockapi_request_duration_seconds", Help: "Latency of admitted lock requests.",
			Buckets: httpx.LatencyBuckets(),
		}, []string{"op", "outcome"}),
	}
	s.reg.MustRegister(m.grants, m.rejections, m.shed, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_lockapi_in_flight", Help: "Admitted lock requests in flight.",
		}, func() float64 { return float64(s.limiter.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_lockapi_concurrency_limit", Help: "The adaptive concurrency limit now.",
		}, func() float64 { return float64(s.limiter.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_lockapi_draining", Help: "1 while the server drains.",
		}, func() float64 {
			if s.draining.Load() {
				return 1
			}
			return 0
		}),
	)
	return m
}

// opMetrics are one operation's series, resolved once so the request path
// does no label lookups.
type opMetrics struct {
	m       *metrics
	op      string
	ok, bad prometheus.Observer
}

func (m *metrics) op(op string) *opMetrics {
	return &opMetrics{m: m, op: op, ok: m.latency.WithLabelValues(op, "ok"), bad: m.latency.WithLabelValues(op, "rejected")}
}

func (o *opMetrics) rejected(reason string) { o.m.rejections.WithLabelValues(o.op, reason).Inc() }

func (o *opMetrics) observe(outcome string, d time.Duration) {
	if outcome == "ok" {
		o.ok.Observe(d.Seconds())
	} else {
		o.bad.Observe(d.Seconds())
	}
}
