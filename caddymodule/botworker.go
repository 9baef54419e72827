package caddymodule

import (
	"github.com/spf13/cobra"

	"github.com/fhirgate/fhirgate/botrunner"
)

// botWorkerCommandName is the hidden subcommand the bot worker pool starts:
// `caddy fhirgate bot-worker`.
const botWorkerCommandName = "bot-worker"

// botWorkerCommand is a bot worker process (bot_isolation process): it
// serves the gateway that started it over stdin and stdout and exits when
// stdin closes. People never run it, so it is hidden from help.
func botWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:    botWorkerCommandName,
		Short:  "Runs bots for the gateway that started it (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return botrunner.ServeWorker()
		},
	}
}
