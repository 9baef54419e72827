// Package email sends the email of bots (Medplum's medplum.sendEmail) through the SMTP server the
// operator configures, with github.com/wneessen/go-mail.
//
// A [Sender] takes Medplum's email options (nodemailer's: to, cc, bcc, from, replyTo, subject,
// text, html) as JSON, checks the sender against the operator's default sender and the project's
// allow-list, bounds the messages a project sends in a period, and delivers the message. Failures
// are *fhir.Error values with the status to answer: 400 for a message that cannot be sent as
// given or a sender the project may not use, 429 over the rate, 502 when the SMTP server
// refuses or cannot be reached (its reply, never the credentials).
package email
