package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// patientJSON is the backend's answer: a realistic Patient of about 1 KB,
// built once so the backend costs next to nothing per request.
var patientJSON = []byte(`{"resourceType":"Patient","id":"1","meta":{"versionId":"3","lastUpdated":"2026-01-15T09:30:00.000Z",` +
	`"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]},` +
	`"identifier":[{"use":"usual","type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MR","display":"Medical Record Number"}]},` +
	`"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345","period":{"start":"2001-05-06"},"assigner":{"display":"Acme Healthcare"}}],` +
	`"active":true,"name":[{"use":"official","family":"Chalmers","given":["Peter","James"]},{"use":"usual","given":["Jim"]}],` +
	`"telecom":[{"use":"home"},{"system":"phone","value":"(03) 5555 6473","use":"work","rank":1},{"system":"phone","value":"(03) 3410 5613","use":"mobile","rank":2}],` +
	`"gender":"male","birthDate":"1974-12-25","deceasedBoolean":false,` +
	`"address":[{"use":"home","type":"both","text":"534 Erewhon St PeasantVille, Rainbow, Vic  3999","line":["534 Erewhon St"],` +
	`"city":"PleasantVille","district":"Rainbow","state":"Vic","postalCode":"3999","period":{"start":"1974-12-25"}}],` +
	`"contact":[{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}]}],` +
	`"name":{"family":"du Marché","given":["Bénédicte"]},"telecom":[{"system":"phone","value":"+33 (237) 998327"}],` +
	`"gender":"female","period":{"start":"2012"}}],"managingOrganization":{"reference":"Organization/1"}}`)

// createdPatient is the backend's answer to a create: the fixed Patient
// under a new id, version 1, as a server answers with what it stored.
func createdPatient(id string) []byte {
	_, rest, _ := bytes.Cut(patientJSON, []byte(`"versionId":"3"`))
	return append([]byte(`{"resourceType":"Patient","id":"`+id+`","meta":{"versionId":"1"`), rest...)
}

// Subject tokens the identity-provider stand-in accepts look like
// "bt.<user>.<anything>": user <user> is user<user>@bench.test, and the tail
// makes tokens distinct without a table of issued tokens.
const (
	subjectTokenPrefix = "bt."
	emailDomain        = "bench.test"
)

// subjectToken returns a token for user n with a distinguishing tail.
func subjectToken(user int, tail string) string {
	return subjectTokenPrefix + strconv.Itoa(user) + "." + tail
}

// userEmail is the email of bench user n.
func userEmail(n int) string { return "user" + strconv.Itoa(n) + "@" + emailDomain }

// userFromToken decodes a subject token; ok is false for anything else.
func userFromToken(tok string) (user int, ok bool) {
	rest, found := strings.CutPrefix(tok, subjectTokenPrefix)
	if !found {
		return 0, false
	}
	num, _, found := strings.Cut(rest, ".")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// newBackend is the FHIR server stand-in: GET /fhir/R4/Patient/1 answers the
// fixed Patient, a MedicationRequest search a fixed searchset, POST
// /fhir/R4/Patient creates (createdPatient); anything else is a FHIR 404.
func newBackend() http.Handler {
	notFound := []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`)
	var created atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		if r.Method == http.MethodPost && r.URL.Path == "/fhir/R4/Patient" {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			id := "c" + strconv.FormatUint(created.Add(1), 10)
			body := createdPatient(id)
			w.Header().Set("Location", "/fhir/R4/Patient/"+id+"/_history/1")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/fhir/R4/Patient/1" {
			w.Header().Set("Content-Length", strconv.Itoa(len(patientJSON)))
			_, _ = w.Write(patientJSON)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/fhir/R4/MedicationRequest" {
			w.Header().Set("Content-Length", strconv.Itoa(len(medicationSearchJSON)))
			_, _ = w.Write(medicationSearchJSON)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(notFound)
	})
}

// newIdP is the identity-provider stand-in: GET /userinfo with a bench
// subject token answers that user's claims at once; other tokens get 401.
func newIdP() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/userinfo" {
			http.NotFound(w, r)
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		n, ok := userFromToken(tok)
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_token"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"sub":"bench|%d","email":"%s","email_verified":true}`, n, userEmail(n))
	})
}

// loopbackServer is an HTTP server on a free 127.0.0.1 port.
type loopbackServer struct {
	srv  *http.Server
	addr string
}

func startLoopback(h http.Handler) (*loopbackServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on loopback: %w", err)
	}
	s := &loopbackServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().String(),
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("stand-in server stopped:", err)
		}
	}()
	return s, nil
}

func (s *loopbackServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
