// Package subscription is fhirgate's subscription engine: it serves the
// Subscription resource under the FHIR base (per project, managed by
// project admins, like Bot), watches the writes the gate passes (a
// gateway.WriteHook), and delivers what matches to a bot or a webhook
// through the durable queue (internal/queue).
//
// # Flow
//
//  1. Watch (before the write goes on): nothing unless the project has an
//     active Subscription for a type the write touches; for a subscribed
//     delete, the last version is read first.
//  2. Done (the backend answered, the client has nothing yet): the changes
//     (spec.Changes) are enqueued as one TriggerKind job, durably, then
//     the answer goes out.
//  3. TriggerKind worker: each change is matched against the project's
//     active Subscriptions (criteria parameters decided by the backend
//     with a count-only search; the author must be allowed to read the
//     resource). Once all are matched, each webhook match is enqueued as
//     a DeliverKind job, and the bot matches are delivered there and then
//     (botapi's RunMessage), one after another: the first attempt of each.
//     A bot that could not start is enqueued as a DeliverKind job from
//     its second attempt on. A rescued trigger delivers its bots again.
//  4. DeliverKind worker: the triggering version is delivered to the URL
//     (POST, signed, retried up to the Subscription's max attempts, then
//     the Subscription is switched off) or the bot.
//
// Writes a triggered bot makes carry the chain depth (WithDepth): a
// delivery deeper than Options.MaxDepth is dropped with an AuditEvent.
//
// The domain part (criteria, extensions, headers, signature, changes) is
// internal/subscription/spec.
package subscription
