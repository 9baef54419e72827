package e2e

// Most suites run one project, alpha, whose client alpha-app exchanges
// tokens of the loopback identity provider, behind a site that serves the
// FHIR API under /fhir/R4 in front of the loopback backend. These build
// their Caddyfile templates (executed with a config that has Admin,
// Gateway, IdP and Backend) so that each suite states only what it adds.

// alphaCaddyfile is a Caddyfile template whose global options hold the
// admin endpoint, a Badger store in ./data, the issuer and project alpha
// with the client alpha-app; records are the project's other lines
// (clients, users, bots, indented three tabs), sites the site blocks.
func alphaCaddyfile(records, sites string) string {
	return alphaCaddyfileWith(records, "", sites)
}

// alphaCaddyfileWith is alphaCaddyfile with globals, more global option
// blocks (such as layer4, indented one tab), after fhirgate's.
func alphaCaddyfileWith(records, globals, sites string) string {
	return `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir ./data
		issuer http://localhost:{{.Gateway}}
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
` + records + `		}
	}
` + globals + `}

` + sites
}

// fhirSite is the site block of the gateway: fhirgate with fhir_base
// /fhir/R4 and handlerLines (indented two tabs), then reverse_proxy to the
// backend.
func fhirSite(handlerLines string) string {
	return `http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
` + handlerLines + `	}
	reverse_proxy {{.Backend}}
}
`
}

// aliceAdmin is the project line of alice, a practitioner and project
// administrator.
const aliceAdmin = `			user alice@example.com {
				profile Practitioner/alice
				admin
			}
`
