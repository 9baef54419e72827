package caddymodule

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are built once per process; Caddy gives each config load a
// fresh registry, so Provision registers them again every time.
var (
	tokenRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "token_requests_total",
		Help:      "Token endpoint answers by grant type, client (known clients only) and outcome (ok or the OAuth error code).",
	}, []string{"grant_type", "client_id", "outcome"})

	authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "auth_failures_total",
		Help:      "Bearer tokens refused on the FHIR API, by reason.",
	}, []string{"reason"})

	userinfoLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "userinfo_duration_seconds",
		Help:      "Identity provider userinfo calls, by outcome.",
		Buckets:   prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"outcome"})

	botExecutions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "bot_executions_total",
		Help:      "Bot runs by outcome: success, error, timeout, busy (refused with 429), cancelled.",
	}, []string{"outcome"})

	botDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "bot_duration_seconds",
		Help:      "Bot run time, excluding the wait for a slot.",
		Buckets:   prometheus.ExponentialBuckets(0.0005, 2, 16),
	})

	botRecordsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "bot_records_refused_total",
		Help:      "Bot records the store refused, by record (audit_event: logged instead; async_job: the run refused or the job failed) and reason (quota: the project's project_bot_records_max; disk: bot_records_disk_reserve).",
	}, []string{"record", "reason"})

	botQueueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "bot_queue_wait_seconds",
		Help:      "Time bot runs waited for a free slot.",
		Buckets:   prometheus.ExponentialBuckets(0.0001, 2, 16),
	})

	botCronTicks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "bot_cron_ticks_total",
		Help:      "Scheduled bots' cron ticks by result: enqueued (by the scan, once per cluster), run, skipped (bot, schedule or code gone or changed), failed (retried while attempts last).",
	}, []string{"result"})

	mllpConnections = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "mllp_connections",
		Help:      "MLLP connections open.",
	})

	mllpMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "mllp_messages_total",
		Help:      "MLLP messages by the application acknowledgment answered (AA, AE, AR, or the code of the bot's own answer) and duplicate for a message answered from memory.",
	}, []string{"ack"})

	mllpFrameErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "mllp_frame_errors_total",
		Help:      "MLLP framing problems by reason: skipped_bytes (bytes outside a frame), too_large, truncated, idle (connections closed by idle_timeout).",
	}, []string{"reason"})

	subscriptionEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "subscription_events_total",
		Help:      "Subscription work by event: queued (a write's triggers enqueued before its answer), lost (a write whose triggers could not be enqueued), delivered, failed (a bot that failed, or a webhook's last attempt), retried, dropped (Subscription gone or off, resource moved on, chain too deep).",
	}, []string{"event"})

	subscriptionLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "caddy",
		Subsystem: "fhirgate",
		Name:      "subscription_lag_seconds",
		Help:      "Time from a write's answer to the first delivery attempt of each Subscription it triggered.",
		Buckets:   prometheus.ExponentialBuckets(0.005, 2, 14),
	})
)

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
