package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// recordCommand builds "<noun> create" and "<noun> list" for one type.
func recordCommand(noun, typ string, create *cobra.Command, listFilters ...string) *cobra.Command {
	parent := &cobra.Command{Use: noun, Short: "Manages " + typ + " records"}
	list := &cobra.Command{
		Use:   "list",
		Short: "Lists " + typ + " records",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for _, f := range listFilters {
				if v := str(cmd, f); v != "" {
					q.Set(f, v)
				}
			}
			return c.list(typ, q)
		}),
	}
	for _, f := range listFilters {
		list.Flags().String(f, "", "only records with this "+f)
	}
	parent.AddCommand(create, list)
	return parent
}

func projectCommand() *cobra.Command {
	create := &cobra.Command{
		Use:   "create",
		Short: "Creates or replaces a project",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			return c.createOrPut("Project", str(cmd, "id"), map[string]any{"name": str(cmd, "name")})
		}),
	}
	create.Flags().String("id", "", "project id (default: a new UUID)")
	create.Flags().String("name", "", "project name (required)")
	_ = create.MarkFlagRequired("name")
	return recordCommand("project", "Project", create, "name")
}

func clientCommand() *cobra.Command {
	create := &cobra.Command{
		Use:   "create",
		Short: "Creates or replaces a client application that exchanges identity provider tokens",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			useSubject, _ := cmd.Flags().GetBool("use-subject")
			record := map[string]any{
				"name": str(cmd, "name"),
				"meta": map[string]any{"project": str(cmd, "project")},
				"identityProvider": map[string]any{
					"userInfoUrl": str(cmd, "userinfo-url"),
					"useSubject":  useSubject,
				},
			}
			if record["name"] == "" {
				record["name"] = str(cmd, "id")
			}
			if scope := str(cmd, "scope"); scope != "" {
				record["scope"] = scope
			}
			return c.createOrPut("ClientApplication", str(cmd, "id"), record)
		}),
	}
	create.Flags().String("id", "", "client id, the client_id applications send (default: a new UUID)")
	create.Flags().String("name", "", "display name")
	create.Flags().String("project", "", "project id (required)")
	create.Flags().String("userinfo-url", "", "identity provider's userinfo endpoint (required)")
	create.Flags().Bool("use-subject", false, "match people by the provider's sub instead of email")
	create.Flags().String("scope", "", "space-separated scopes the client may be granted, e.g. \"openid offline_access patient/*.rs\" (default: full access, user/*.cruds)")
	_ = create.MarkFlagRequired("project")
	_ = create.MarkFlagRequired("userinfo-url")
	return recordCommand("client", "ClientApplication", create, "project", "name")
}

func userCommand() *cobra.Command {
	create := &cobra.Command{
		Use:   "create",
		Short: "Creates a user",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			return c.createOrPut("User", str(cmd, "id"), map[string]any{
				"email":     str(cmd, "email"),
				"firstName": str(cmd, "first-name"),
				"lastName":  str(cmd, "last-name"),
			})
		}),
	}
	create.Flags().String("id", "", "user id (default: a new UUID)")
	create.Flags().String("email", "", "email address (required, unique)")
	create.Flags().String("first-name", "", "first name")
	create.Flags().String("last-name", "", "last name")
	_ = create.MarkFlagRequired("email")
	return recordCommand("user", "User", create, "email")
}

func membershipCommand() *cobra.Command {
	create := &cobra.Command{
		Use:   "create",
		Short: "Gives a user a membership (and a profile) in a project",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			userID := str(cmd, "user")
			if email := str(cmd, "email"); email != "" {
				id, err := c.userIDByEmail(email)
				if err != nil {
					return err
				}
				userID = id
			}
			if userID == "" {
				return fmt.Errorf("give the user with --user <id> or --email <address>")
			}
			admin, _ := cmd.Flags().GetBool("admin")
			record := map[string]any{
				"project": map[string]string{"reference": "Project/" + str(cmd, "project")},
				"user":    map[string]string{"reference": "User/" + userID},
				"profile": map[string]string{"reference": str(cmd, "profile")},
				"admin":   admin,
			}
			if ext := str(cmd, "external-id"); ext != "" {
				record["externalId"] = ext
			}
			return c.createOrPut("ProjectMembership", str(cmd, "id"), record)
		}),
	}
	create.Flags().String("id", "", "membership id (default: a new UUID)")
	create.Flags().String("project", "", "project id (required)")
	create.Flags().String("user", "", "user id")
	create.Flags().String("email", "", "user email, instead of --user")
	create.Flags().String("profile", "", "FHIR profile reference such as Practitioner/123 (required)")
	create.Flags().String("external-id", "", "the user's sub at the identity provider")
	create.Flags().Bool("admin", false, "make the user a project admin")
	_ = create.MarkFlagRequired("project")
	_ = create.MarkFlagRequired("profile")
	return recordCommand("membership", "ProjectMembership", create, "project", "user")
}

func botCommand() *cobra.Command {
	create := &cobra.Command{
		Use:   "create",
		Short: "Creates or replaces a bot (deploy its code with 'bot deploy')",
		Args:  cobra.NoArgs,
		RunE: run(func(c *adminClient, cmd *cobra.Command, _ []string) error {
			idents, _ := cmd.Flags().GetStringArray("identifier")
			var identifiers []map[string]string
			for _, ident := range idents {
				system, value, ok := strings.Cut(ident, "|")
				if !ok {
					system, value = "", ident
				}
				identifiers = append(identifiers, map[string]string{"system": system, "value": value})
			}
			return c.createOrPut("Bot", str(cmd, "id"), map[string]any{
				"name":       str(cmd, "name"),
				"meta":       map[string]any{"project": str(cmd, "project")},
				"identifier": identifiers,
			})
		}),
	}
	create.Flags().String("id", "", "bot id (default: a new UUID)")
	create.Flags().String("project", "", "project id (required)")
	create.Flags().String("name", "", "bot name (required)")
	create.Flags().StringArray("identifier", nil, "system|value identifier (repeatable)")
	_ = create.MarkFlagRequired("project")
	_ = create.MarkFlagRequired("name")

	deployCmd := &cobra.Command{
		Use:   "deploy <bot-id> <file>",
		Short: "Compiles and deploys a TypeScript or JavaScript file as the bot's code",
		Args:  cobra.ExactArgs(2),
		RunE: run(func(c *adminClient, _ *cobra.Command, args []string) error {
			code, err := os.ReadFile(args[1])
			if err != nil {
				return fmt.Errorf("reading bot source: %w", err)
			}
			return c.sendJSON(http.MethodPost, "/fhirgate/Bot/"+url.PathEscape(args[0])+"/$deploy",
				map[string]string{"code": string(code), "filename": filepath.Base(args[1])})
		}),
	}
	bot := recordCommand("bot", "Bot", create, "project", "name", "identifier")
	bot.AddCommand(deployCmd)
	return bot
}
