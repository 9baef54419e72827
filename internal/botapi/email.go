package botapi

import (
	"context"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// EmailSender sends a bot's email for its project: body is Medplum's email options as JSON.
// Errors are *fhir.Error values with the status to answer.
type EmailSender interface {
	Send(ctx context.Context, project string, body []byte) error
}

// emailPath is where Medplum's client posts sendEmail (its server's email API). The gateway
// answers it for bots instead of the FHIR backend.
const emailPath = "email/v1/send"

// sendEmail answers a bot's medplum.sendEmail: the project's email through the operator's SMTP
// server, allOk as Medplum's server answers.
func (c medplumClient) sendEmail(ctx context.Context, method string, body []byte) (int, string, []byte, error) {
	if method != http.MethodPost {
		return http.StatusMethodNotAllowed, fhir.ContentType, fhir.MarshalOutcome(http.StatusMethodNotAllowed, "email is sent with POST"), nil
	}
	if c.api.o.Email == nil {
		return http.StatusNotImplemented, fhir.ContentType, fhir.MarshalOutcome(http.StatusNotImplemented,
			"medplum.sendEmail: no SMTP server is configured (the email option of the fhirgate block)"), nil
	}
	if err := c.api.o.Email.Send(ctx, c.id.ProjectID, body); err != nil {
		if ferr := fhir.AsError(err); ferr != nil {
			return ferr.Status, fhir.ContentType, fhir.MarshalOutcome(ferr.Status, ferr.Message), nil
		}
		return http.StatusBadGateway, fhir.ContentType, fhir.MarshalOutcome(http.StatusBadGateway, "sending the email failed"), nil
	}
	return http.StatusOK, fhir.ContentType, fhir.MarshalOutcome(http.StatusOK, "All OK"), nil
}
