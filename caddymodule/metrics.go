package caddymodule

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are built once per process; Caddy gives each config load a
// fresh registry, so Provision registers them again every time.
var (
	tokenRequests = counterVec("token_requests_total",
		"Token endpoint answers by grant type, client (known clients only) and outcome (ok or the OAuth error code).",
		"grant_type", "client_id", "outcome")

	authFailures = counterVec("auth_failures_total",
		"Bearer tokens refused on the FHIR API, by reason.",
		"reason")

	userinfoLatency = histogramVec("userinfo_duration_seconds",
		"Identity provider userinfo calls, by outcome.",
		prometheus.ExponentialBuckets(0.005, 2, 12), "outcome")

	botExecutions = counterVec("bot_executions_total",
		"Bot runs by outcome: success, error, timeout, busy (refused with 429), cancelled.",
		"outcome")

	botDuration = histogram("bot_duration_seconds",
		"Bot run time, excluding the wait for a slot.",
		prometheus.ExponentialBuckets(0.0005, 2, 16))

	botRecordsRefused = counterVec("bot_records_refused_total",
		"Bot records the store refused, by record (audit_event: logged instead; async_job: the run refused or the job failed) and reason (quota: the project's project_bot_records_max; disk: bot_records_disk_reserve).",
		"record", "reason")

	botQueueWait = histogram("bot_queue_wait_seconds",
		"Time bot runs waited for a free slot.",
		prometheus.ExponentialBuckets(0.0001, 2, 16))

	botCronTicks = counterVec("bot_cron_ticks_total",
		"Scheduled bots' cron ticks by result: enqueued (by the scan, once per cluster), run, skipped (bot, schedule or code gone or changed), failed (retried while attempts last).",
		"result")

	mllpConnections = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "mllp_connections",
		Help:      "MLLP connections open.",
	})

	mllpMessages = counterVec("mllp_messages_total",
		"MLLP messages by the application acknowledgment answered (AA, AE, AR, or the code of the bot's own answer) and duplicate for a message answered from memory.",
		"ack")

	mllpFrameErrors = counterVec("mllp_frame_errors_total",
		"MLLP framing problems by reason: skipped_bytes (bytes outside a frame), too_large, truncated, idle (connections closed by idle_timeout).",
		"reason")

	subscriptionEvents = counterVec("subscription_events_total",
		"Subscription work by event: queued (a write's triggers enqueued before its answer), lost (a write whose triggers could not be enqueued), delivered, failed (a bot that failed, or a webhook's last attempt), retried, dropped (Subscription gone or off, resource moved on, chain too deep).",
		"event")

	subscriptionLag = histogram("subscription_lag_seconds",
		"Time from a write's answer to the first delivery attempt of each Subscription it triggered.",
		prometheus.ExponentialBuckets(0.005, 2, 14))
)

// Every metric is caddy_fhirgate_<name>, as Caddy's own are caddy_<module>_….
const (
	metricsNamespace = "caddy"
	metricsSubsystem = "fhirgate"
)

// counterVec is the counter caddy_fhirgate_<name> with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	}, labels)
}

// histogramVec is the histogram caddy_fhirgate_<name> with labels.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(histogramOpts(name, help, buckets), labels)
}

// histogram is the histogram caddy_fhirgate_<name> without labels.
func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(histogramOpts(name, help, buckets))
}

func histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets,
	}
}

// collectors are every metric fhirgate exports (docs/grafana-dashboard.json
// charts each of them; its test holds the two together).
var collectors = []prometheus.Collector{
	tokenRequests, authFailures, userinfoLatency, botExecutions, botDuration, botQueueWait, botRecordsRefused, botCronTicks,
	mllpConnections, mllpMessages, mllpFrameErrors, subscriptionEvents, subscriptionLag,
}

// registerMetrics adds the collectors to this config's registry.
func registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

func observeToken(grant, clientID, outcome string) {
	tokenRequests.WithLabelValues(grant, clientID, outcome).Inc()
}

func observeAuthFailure(reason string) { authFailures.WithLabelValues(reason).Inc() }

func observeUserinfo(d time.Duration, outcome string) {
	userinfoLatency.WithLabelValues(outcome).Observe(d.Seconds())
}

func observeBot(outcome string, run, queueWait time.Duration) {
	botExecutions.WithLabelValues(outcome).Inc()
	if outcome != "busy" && outcome != "cancelled" {
		botDuration.Observe(run.Seconds())
	}
	botQueueWait.Observe(queueWait.Seconds())
}

func observeCronTick(result string) { botCronTicks.WithLabelValues(result).Inc() }

func observeRecordRefused(record, reason string) {
	botRecordsRefused.WithLabelValues(record, reason).Inc()
}

func observeSubscription(event string) { subscriptionEvents.WithLabelValues(event).Inc() }

func observeSubscriptionLag(d time.Duration) { subscriptionLag.Observe(d.Seconds()) }
