package caddymodule

import (
	"errors"

	"github.com/fhirgate/fhirgate/internal/botapi"
)

// cronAPI is the bot API a scheduled bot's tick runs on: that of the
// running config's handler for runs without a request (requestLessHandler),
// so the bot's medplum calls take that handler's backend route.
func (h *storeHandle) cronAPI() (*botapi.API, error) {
	app := h.running.Load()
	if app == nil {
		return nil, errors.New("no configuration is running")
	}
	handler, err := app.requestLessHandler()
	if err != nil {
		return nil, err
	}
	return handler.bots.API, nil
}
