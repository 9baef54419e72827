package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

// deployBot deploys code to a bot through fhirgate's admin API.
func (p *caddyProc) deployBot(ctx context.Context, id, filename, code string) error {
	body, _ := json.Marshal(map[string]string{"code": code, "filename": filename})
	u := "http://" + p.sites.admin + "/fhirgate/Bot/" + id + "/$deploy"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("deploying bot %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("deploying bot %s: %w", id, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("deploying bot %s: HTTP %d: %s", id, resp.StatusCode, msg)
	}
	return nil
}

// cpuProfile fetches a CPU profile of Caddy from its admin API's pprof
// endpoint, covering the next secs seconds, into path.
func (p *caddyProc) cpuProfile(ctx context.Context, secs int, path string) error {
	return p.fetchProfile(ctx, fmt.Sprintf("profile?seconds=%d", secs), path)
}

// heapProfile saves Caddy's heap profile (in use and allocated) into path.
func (p *caddyProc) heapProfile(ctx context.Context, path string) error {
	return p.fetchProfile(ctx, "heap?gc=1", path)
}

func (p *caddyProc) fetchProfile(ctx context.Context, query, path string) error {
	u := "http://" + p.sites.admin + "/debug/pprof/" + query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("profiling caddy: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling caddy: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling caddy: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("saving profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("saving profile: %w", err)
	}
	return f.Close()
}

// botID finds the id of the bench project's bot with identifier
// "system|value" through fhirgate's admin API.
func (p *caddyProc) botID(ctx context.Context, identifier string) (string, error) {
	q := url.Values{"project": {benchProject}, "identifier": {identifier}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.sites.admin+"/fhirgate/Bot?"+q.Encode(), nil)
	if err != nil {
		return "", fmt.Errorf("finding bot %s: %w", identifier, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("finding bot %s: %w", identifier, err)
	}
	defer resp.Body.Close()
	var b struct {
		Entry []struct {
			Resource struct {
				ID string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("finding bot %s: HTTP %d", identifier, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&b); err != nil || len(b.Entry) != 1 || b.Entry[0].Resource.ID == "" {
		return "", fmt.Errorf("finding bot %s: not one bot in the answer", identifier)
	}
	return b.Entry[0].Resource.ID, nil
}
