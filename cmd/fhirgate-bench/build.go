package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// repoRoot finds the module root (where go.mod is) from the working
// directory, so the harness runs from anywhere inside the checkout.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("running go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the fhirgate module: run from the repository checkout")
	}
	root := filepath.Dir(mod)
	if _, err := os.Stat(filepath.Join(root, "cmd", "caddy")); err != nil {
		return "", fmt.Errorf("finding cmd/caddy in %s: %w", root, err)
	}
	return root, nil
}

// buildCaddy builds the real Caddy with the plugin from cmd/caddy.
func buildCaddy(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/caddy")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building caddy: %w\n%s", err, stderr.String())
	}
	return nil
}
