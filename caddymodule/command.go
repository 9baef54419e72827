package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "fhirgate",
		Usage: "<project|client|user|membership|bot|keys|backup|restore> ...",
		Short: "Manages fhirgate's projects, clients, users, bots and store",
		Long: `
Manages the records of a running fhirgate through Caddy's admin API
(default ` + caddy.DefaultAdminListen + `; use --address, or --config to read
the admin address from a config). Records are sent in request bodies, never
in URLs, because Caddy logs admin request URIs.

Examples:
  caddy fhirgate project create --id demo --name "Demo clinic"
  caddy fhirgate client create --project demo --id web --userinfo-url https://idp.example.com/userinfo
  caddy fhirgate client create --project demo --id patient-app --userinfo-url https://idp.example.com/userinfo --scope "openid offline_access patient/*.rs"
  caddy fhirgate user create --email alice@example.com
  caddy fhirgate membership create --project demo --email alice@example.com --profile Practitioner/123
  caddy fhirgate bot create --project demo --name echo --identifier https://example.com/bots|echo
  caddy fhirgate bot deploy <bot-id> ./bots/echo.ts
  caddy fhirgate backup fhirgate.backup
  caddy fhirgate restore fhirgate.backup`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.PersistentFlags().String("address", "", "Address of the administration API listener (if --config is not used)")
			cmd.PersistentFlags().StringP("config", "c", "", "Configuration file (if --address is not used)")
			cmd.PersistentFlags().StringP("adapter", "a", "", "Name of config adapter to apply (if --config is used)")
			cmd.AddCommand(projectCommand(), clientCommand(), userCommand(), membershipCommand(),
				botCommand(), keysCommand(), backupCommand(), restoreCommand(), botWorkerCommand())
		},
	})
}

// adminClient talks to the admin API named by the command's flags.
type adminClient struct {
	addr string
	out  io.Writer
}

func newAdminClient(cmd *cobra.Command) (*adminClient, error) {
	flags := cmd.Flags()
	address, _ := flags.GetString("address")
	config, _ := flags.GetString("config")
	adapter, _ := flags.GetString("adapter")
	addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
	if err != nil {
		return nil, fmt.Errorf("determining admin API address: %w", err)
	}
	return &adminClient{addr: addr, out: cmd.OutOrStdout()}, nil
}

// do sends a request and returns the response body. Errors carry the
// OperationOutcome text the API answered.
func (c *adminClient) do(method, path string, body io.Reader, contentType string) ([]byte, error) {
	var headers http.Header
	if contentType != "" {
		headers = http.Header{"Content-Type": {contentType}}
	}
	resp, err := caddycmd.AdminAPIRequest(c.addr, method, path, headers, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// sendJSON sends v and prints the answer, indented.
func (c *adminClient) sendJSON(method, path string, v any) error {
	var body io.Reader
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.do(method, path, body, "application/json")
	if err != nil {
		return err
	}
	return c.print(resp)
}

func (c *adminClient) print(resp []byte) error {
	var pretty bytes.Buffer
	if json.Indent(&pretty, resp, "", "  ") != nil {
		_, err := c.out.Write(resp)
		return err
	}
	pretty.WriteByte('\n')
	_, err := pretty.WriteTo(c.out)
	return err
}

// createOrPut creates the record with POST, or with PUT when an id is given.
func (c *adminClient) createOrPut(typ, id string, record map[string]any) error {
	record["resourceType"] = typ
	if id == "" {
		return c.sendJSON(http.MethodPost, "/fhirgate/"+typ, record)
	}
	return c.sendJSON(http.MethodPut, "/fhirgate/"+typ+"/"+url.PathEscape(id), record)
}

// list prints the records of a type matching the given filters.
func (c *adminClient) list(typ string, filters url.Values) error {
	path := "/fhirgate/" + typ
	if q := filters.Encode(); q != "" {
		path += "?" + q
	}
	resp, err := c.do(http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	return c.print(resp)
}

// userIDByEmail resolves an email to a user id through the API.
func (c *adminClient) userIDByEmail(email string) (string, error) {
	resp, err := c.do(http.MethodGet, "/fhirgate/User?"+url.Values{"email": {email}}.Encode(), nil, "")
	if err != nil {
		return "", err
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				ID string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(resp, &bundle); err != nil {
		return "", fmt.Errorf("decoding user search: %w", err)
	}
	if len(bundle.Entry) == 0 {
		return "", fmt.Errorf("no user with email %s", email)
	}
	return bundle.Entry[0].Resource.ID, nil
}

// run wraps a subcommand body with the admin client setup.
func run(f func(c *adminClient, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := newAdminClient(cmd)
		if err != nil {
			return err
		}
		cmd.SilenceUsage = true
		return f(c, cmd, args)
	}
}

func str(cmd *cobra.Command, name string) string {
	v, _ := cmd.Flags().GetString(name)
	return v
}

func backupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backup <file>",
		Short: "Writes a backup of the whole store to a file",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(c *adminClient, _ *cobra.Command, args []string) error {
			data, err := c.do(http.MethodGet, "/fhirgate/backup", nil, "")
			if err != nil {
				return err
			}
			// Write to a temporary file first so a failed backup never
			// replaces a good one.
			tmp := args[0] + ".tmp"
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				return fmt.Errorf("writing backup: %w", err)
			}
			if err := os.Rename(tmp, args[0]); err != nil {
				return fmt.Errorf("writing backup: %w", err)
			}
			fmt.Fprintf(c.out, "wrote %d bytes to %s\n", len(data), filepath.Clean(args[0]))
			return nil
		}),
	}
}

func restoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore <file>",
		Short: "Loads a backup file into the store",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(c *adminClient, _ *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("opening backup: %w", err)
			}
			defer f.Close()
			resp, err := c.do(http.MethodPost, "/fhirgate/restore", f, "application/octet-stream")
			if err != nil {
				return err
			}
			return c.print(resp)
		}),
	}
}

func keysCommand() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manages token signing keys"}
	keys.AddCommand(&cobra.Command{
		Use:   "rotate",
		Short: "Starts signing with a new key; tokens signed with the old one stay valid until they expire",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, _ *cobra.Command, _ []string) error {
			return c.sendJSON(http.MethodPost, "/fhirgate/keys/rotate", nil)
		}),
	})
	return keys
}
