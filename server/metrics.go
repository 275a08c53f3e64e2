package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sluicehq/sluice"
)

// metrics are the server's Prometheus series, on a registry of its own (two
// servers in one process do not collide). Engine gauges are read from
// Engine.Stats at scrape time.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec // by endpoint and status code
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	duration         *prometheus.HistogramVec
	firstToken       prometheus.Histogram
	connsRefused     prometheus.Counter // beyond Options.MaxConns
}

func newMetrics(eng *sluice.Engine, s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_requests_total", Help: "HTTP requests by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_prompt_tokens_total", Help: "Prompt tokens of the requests submitted to the engine.",
	})
	m.generationTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_generation_tokens_total", Help: "Tokens generated for clients.",
	})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_request_duration_seconds", Help: "Time from a generation request's arrival to its last byte.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"endpoint"})
	m.firstToken = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_time_to_first_token_seconds", Help: "Time from submitting a choice to its first token.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	m.connsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_http_connections_refused_total", Help: "Connections answered 503 and closed because --max-conns were open.",
	})
	m.reg.MustRegister(m.requests, m.promptTokens, m.generationTokens, m.duration, m.firstToken, m.connsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_queue_depth", Help: "Requests in the engine's queue, admitted but not yet running."},
			func() float64 { return float64(eng.Stats().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_running_sequences", Help: "Sequences in the continuous batch."},
			func() float64 { return float64(eng.Stats().Active) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_server_requests_in_flight", Help: "Choices the server has accepted and not finished: waiting for the engine or running."},
			func() float64 { return float64(s.inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_kv_pages_in_use", Help: "KV-cache pages referenced by a sequence."},
			func() float64 { return float64(eng.Stats().Cache.PagesInUse) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_kv_pages", Help: "KV-cache pages in the pool."},
			func() float64 { return float64(eng.Stats().Cache.Pages) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_kv_frames_resident", Help: "KV frames (one layer of one page) in memory under the KV budget."},
			func() float64 { return float64(eng.Stats().Cache.Spill.Resident) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_kv_frames_spilled", Help: "KV frames only in the spill file under the KV budget."},
			func() float64 { return float64(eng.Stats().Cache.Spill.Spilled) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_kv_frame_hits_total", Help: "KV frames a pass needed and found in memory (KV budget)."},
			func() float64 { return float64(eng.Stats().Cache.Spill.Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_kv_frame_misses_total", Help: "KV frames a pass needed and read back from the spill file (KV budget)."},
			func() float64 { return float64(eng.Stats().Cache.Spill.Misses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_kv_spill_written_bytes_total", Help: "Bytes of KV frames written to the spill file."},
			func() float64 { return float64(eng.Stats().Cache.Spill.BytesWritten) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_kv_spill_read_bytes_total", Help: "Bytes of KV frames read back from the spill file."},
			func() float64 { return float64(eng.Stats().Cache.Spill.BytesRead) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_prefix_cache_lookups_total", Help: "Requests that looked up their prompt's prefix in the prefix cache."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.Lookups) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_prefix_cache_hits_total", Help: "Lookups that mapped at least one cached KV page."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_prefix_cache_hit_pages_total", Help: "KV pages mapped from the prefix cache."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.HitPages) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_prefix_cache_hit_tokens_total", Help: "Prompt tokens whose keys and values came from the prefix cache."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.HitTokens) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_prefix_cache_evictions_total", Help: "Cached KV pages dropped (ristretto's policy, pool pressure or the KV budget)."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.Evictions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_prefix_cache_bytes", Help: "Bytes of cached KV pages no sequence holds."},
			func() float64 { return float64(eng.Stats().Cache.Prefix.CachedBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_steps_total", Help: "Forward passes (steps of the continuous batch)."},
			func() float64 { return float64(eng.Stats().Steps) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_batch_rows_total", Help: "Rows (tokens) of every step: prefill and decode."},
			func() float64 { return float64(eng.Stats().Rows) }),
	)
	return m
}
