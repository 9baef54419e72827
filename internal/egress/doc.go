// Package egress is the one way fhirgate reaches hosts on the internet for a project: webhooks
// and bots' fetch. Each project has an allow-list (Policy) of the hosts, and ports, its requests
// may reach; everything else is refused (default deny).
//
// # Use
//
//	e := egress.New(egress.Options{Lookup: policyOfProject}) // once
//	client, err := e.For(projectID) // an *http.Client bound to the project's Policy
//	resp, err := client.Do(req)     // *RefusedError (in a *url.Error) when refused
//
// # What is checked
//
// Before every request, redirects included, the URL's scheme, host and port must match an entry
// of the Policy: https to an Allow or AllowHTTP entry, http only to an AllowHTTP entry. The
// dialer then resolves the host itself and checks every address: loopback, private, link-local,
// unique-local, carrier-grade NAT, multicast, the cloud metadata addresses (169.254.169.254,
// fd00:ec2::254, …) and other special ranges are refused unless the operator listed that address
// (an IP-literal entry, or an AllowPrivate range; a metadata address only by itself). A name
// with one refused address is refused whole. The connection goes to an address that was checked
// (never resolved a second time, so DNS rebinding cannot swap it), and the socket's peer is
// checked once more before connecting. No proxy from the environment is used.
//
// Bounds: redirects (MaxRedirects), the whole request's time (Timeout, and the caller's context),
// dialing and TLS handshakes, response headers, and the bytes of a request body
// (MaxRequestBytes) and of a response body (MaxResponseBytes): reading past it is an error.
package egress
