package pgkv

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
)

// The change feed (store.ChangeFeed): a transaction that announced topics
// (store.Announcer) sends them with pg_notify before its COMMIT, so only
// committed changes are announced and they arrive after the data is
// visible. Every KV keeps one connection LISTENing on the schema's channel
// and hands what other processes announced to its subscribers. The
// connection is re-established with backoff when it breaks; after every
// (re)connect the subscribers are told that anything may have changed,
// because notifications sent while it was down are lost.
//
// Payload: the sender's id, then one topic per line. NOTIFY payloads are
// limited to 8000 bytes; a transaction announcing more is coalesced to the
// topics' types, and past that to "anything changed".

// maxPayload keeps a notification well under PostgreSQL's 8000-byte limit.
const maxPayload = 7900

// everything is the payload line that stands for every topic.
const everything = store.AnnounceEverything

// Reconnection backoff of the listening connection: doubling, jittered.
const (
	minListenBackoff = 50 * time.Millisecond
	maxListenBackoff = 5 * time.Second
)

// listenIdle is how long the listening connection may be silent before it
// is checked with a query, so a connection that died without a word (a
// lost network path) is noticed and replaced.
const listenIdle = 15 * time.Second

// listenPing bounds that check, and connecting.
const listenPing = 5 * time.Second

// newSenderID names this KV in its notifications, so that it ignores its
// own (its Store counted those writes already).
func newSenderID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// channelName is the notification channel of a schema: replicas of one
// schema share it, other schemas of the database (another deployment, a
// test) do not hear it. Channel names are identifiers of at most 63 bytes.
func channelName(schema string) string {
	name := "fhirgate_changes_" + schema
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return "fhirgate_changes_" + hex.EncodeToString(sum[:16])
}

// Subscribe implements store.ChangeFeed. The listening connection starts
// with the first subscriber, and Subscribe returns once its first attempt
// has listened (or failed, at most listenPing later): the flush that
// follows every LISTEN then happens while the Store is being built, not at
// some moment after it began to answer.
func (k *KV) Subscribe(changed func(topics []string)) {
	k.feedMu.Lock()
	k.subscribers = append(k.subscribers, changed)
	if len(k.subscribers) == 1 {
		k.loops.Add(1)
		go k.listenLoop(k.loopCtx)
	}
	k.feedMu.Unlock()
	<-k.firstListen
}

// deliver hands topics to every subscriber.
func (k *KV) deliver(topics []string) {
	k.feedMu.Lock()
	subs := slices.Clone(k.subscribers)
	k.feedMu.Unlock()
	for _, fn := range subs {
		fn(topics)
	}
}

// listenLoop keeps a connection listening until ctx ends.
func (k *KV) listenLoop(ctx context.Context) {
	defer k.loops.Done()
	defer k.markFirstListen()
	backoff := minListenBackoff
	for ctx.Err() == nil {
		heard, err := k.listenRecovered(ctx)
		k.markFirstListen()
		if ctx.Err() != nil {
			return
		}
		if heard {
			backoff = minListenBackoff
		}
		k.logger.Warn("the change feed's connection to PostgreSQL broke; reconnecting",
			zap.Duration("backoff", backoff), zap.Error(err))
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// markFirstListen releases Subscribe's wait for the first attempt.
func (k *KV) markFirstListen() {
	k.firstListenOnce.Do(func() { close(k.firstListen) })
}

// listenRecovered is listen, with a panic turned into an error: the
// connection is then replaced like a broken one, and the flush after the
// reconnect covers whatever the panic interrupted.
func (k *KV) listenRecovered(ctx context.Context) (listening bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			// Not counted as listening, so a panic that repeats backs off.
			listening, err = false, fmt.Errorf("panic in the change feed: %v", v)
		}
	}()
	return k.listen(ctx)
}

// listen connects, LISTENs, flushes the subscribers and then delivers
// notifications until the connection breaks or ctx ends. listening
// reports that it got as far as LISTEN.
func (k *KV) listen(ctx context.Context) (listening bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, listenPing)
	conn, err := pgx.ConnectConfig(cctx, k.listenConfig.Copy())
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{k.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), listenPing)
			_ = conn.Close(cctx)
			cancel()
		}
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), listenPing)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// Whatever was announced while no connection listened is lost.
	k.deliver(nil)
	k.listens.Add(1)
	k.markFirstListen()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case err == nil:
			if topics, ok := k.parse(n.Payload); ok {
				k.deliver(topics)
			}
			continue
		case wctx.Err() == nil:
			return true, err
		}
		// Silent for listenIdle: check the connection is still alive.
		pctx, cancel := context.WithTimeout(ctx, listenPing)
		_, err = conn.Exec(pctx, "SELECT 1")
		cancel()
		if err != nil {
			return true, err
		}
	}
}

// parse reads a payload; ok is false for this KV's own notifications. A
// nil topics slice means everything.
func (k *KV) parse(payload string) (topics []string, ok bool) {
	sender, rest, _ := strings.Cut(payload, "\n")
	if sender == k.sender {
		return nil, false
	}
	lines := strings.Split(rest, "\n")
	if slices.Contains(lines, everything) {
		return nil, true
	}
	return lines, true
}

// Announce implements store.Announcer.
func (t *txn) Announce(topic string) {
	if t.topics == nil {
		t.topics = make(map[string]struct{})
	}
	t.topics[topic] = struct{}{}
}

// notifyStmt is the statement that sends the transaction's announcements,
// the last before COMMIT; ok is false when there are none.
func (t *txn) notifyStmt(channel, sender string) (s stmt, ok bool) {
	if len(t.topics) == 0 {
		return stmt{}, false
	}
	payload := buildPayload(sender, t.topics)
	return stmt{sql: `SELECT pg_notify($1, $2)`, args: []any{channel, payload}}, true
}

// buildPayload lists the topics after the sender, coalesced to fit a
// notification: each topic cut to its type, or failing that, everything.
func buildPayload(sender string, topics map[string]struct{}) string {
	lines := make([]string, 0, len(topics))
	size := len(sender)
	for topic := range topics {
		lines = append(lines, topic)
		size += 1 + len(topic)
	}
	if size > maxPayload {
		types := make(map[string]bool)
		lines, size = lines[:0], len(sender)
		for topic := range topics {
			typ, _, _ := strings.Cut(topic, "/")
			if !types[typ] {
				types[typ] = true
				lines = append(lines, typ)
				size += 1 + len(typ)
			}
		}
		if size > maxPayload {
			lines = []string{everything}
		}
	}
	slices.Sort(lines)
	return sender + "\n" + strings.Join(lines, "\n")
}

// Interface guards
var (
	_ store.ChangeFeed = (*KV)(nil)
	_ store.Announcer  = (*txn)(nil)
)
