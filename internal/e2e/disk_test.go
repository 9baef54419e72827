package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The disk trouble suite: the store directory becomes read-only, or its
// filesystem fills up, while the gateway runs. Writes (an admin create, a
// token exchange, which records a Login) must fail promptly with a clear
// 5xx error body; reads and bearer validation of tokens issued before must
// keep working; the gateway must stay up; and writes must work again once
// the disk is writable.
//
// How each condition is made, for real:
//   - read-only, not root: chmod -R a-w on the store directory.
//   - read-only, root (permission bits do not stop root): chattr -R +i, the
//     immutable attribute, which stops root too (ext4, xfs, btrfs; the
//     case is skipped where the filesystem does not support it).
//   - full: a small tmpfs mounted for the store (needs CAP_SYS_ADMIN; the
//     case is skipped without it), then filled with a file.

const diskCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir {{.Storage}}
		issuer http://localhost:{{.Gateway}}
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
				admin
			}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
	}
	reverse_proxy {{.Backend}}
}
`

// diskStack is a gateway whose store lives in dir, with one user and one
// token made while the disk was fine.
type diskStack struct {
	*stack
	admin  string
	userID string
	token  string
}

func startDiskStack(t *testing.T, dir string) *diskStack {
	t.Helper()
	idp := newIdP(t, map[string]string{"alice-token": aliceUserinfo})
	be := newBackend(t)
	s := startStackFrom(t, diskCaddyfile, faultConfig{stackConfig: stackConfig{IdP: idp.URL, Backend: be.URL}, Storage: dir})
	d := &diskStack{stack: s, admin: "http://" + s.adminAddr + "/fhirgate"}
	r := do(t, "POST", d.admin+"/User", "application/json", `{"email":"before@example.com"}`)
	if r.status != 201 {
		t.Fatalf("creating a user: %d %s", r.status, r.body)
	}
	d.userID = r.json(t)["id"].(string)
	d.token = s.token(t, "alpha-app", "alice-token")
	return d
}

// exited tells whether Caddy has exited or does so within d: a crash
// closes the connection a moment before the process is reaped.
func (d *diskStack) exited(wait time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(wait):
		return false
	}
}

// diskClient gives up on a request after 10 s: a write the disk refuses
// must be answered well before that, or the gateway hangs.
var diskClient = &http.Client{Timeout: 10 * time.Second}

// checkWritesFailReadsWork is the behaviour every disk trouble must show.
// mustRefuse is false for chmod, which leaves the files Badger already
// has open writable: there a write may still succeed, but then it must be
// stored and readable.
func (d *diskStack) checkWritesFailReadsWork(t *testing.T, mustRefuse bool) {
	t.Helper()
	reads := func(when string) {
		t.Helper()
		if !d.alive() {
			t.Fatalf("the gateway died %s:\n%s", when, crashReport(d.logs()))
		}
		if r, err := tryWith(diskClient, "GET", d.admin+"/User/"+d.userID, "", ""); err != nil || r.status != 200 {
			t.Errorf("admin read %s: %v %d %s", when, err, r.status, r.body)
		}
		if r, err := tryWith(diskClient, "GET", d.gateway+"/fhir/R4/Patient/disk", "", "", "Authorization", "Bearer "+d.token); err != nil || r.status != 200 {
			t.Errorf("proxied read with an existing token %s: %v %d %s", when, err, r.status, r.body)
		}
	}
	reads("before any write")

	// Small writes may still land in space Badger already holds; keep
	// writing until one is refused, each answered promptly and clearly.
	refused := false
	var accepted []string
	for i := 0; i < 200 && !refused; i++ {
		start := time.Now()
		r, err := tryWith(diskClient, "POST", d.admin+"/User", "application/json", fmt.Sprintf(`{"email":"during-%d@example.com"}`, i))
		switch {
		case err != nil && d.exited(2*time.Second):
			t.Fatalf("admin create %d: %v; the gateway died:\n%s", i, err, crashReport(d.logs()))
		case err != nil:
			t.Fatalf("admin create %d: %v after %v", i, err, time.Since(start))
		case r.status == 201:
			accepted = append(accepted, jsonField(r.body, "id"))
		case r.status >= 500 && strings.Contains(string(r.body), `"resourceType":"OperationOutcome"`):
			refused = true
			t.Logf("admin create refused after %d accepted writes: %d %s", i, r.status, r.body)
		default:
			t.Fatalf("admin create %d: %d %s, want 201 or a 5xx OperationOutcome", i, r.status, r.body)
		}
	}
	switch {
	case !refused && mustRefuse:
		t.Fatalf("200 admin creates were all accepted on a store that cannot be written")
	case !refused:
		t.Logf("all 200 admin creates were accepted: the store's open files stay writable")
		for _, id := range accepted {
			if r, err := tryWith(diskClient, "GET", d.admin+"/User/"+id, "", ""); err != nil || r.status != 200 {
				t.Fatalf("accepted User/%s cannot be read back: %v %d %s", id, err, r.status, r.body)
			}
		}
	}

	r, err := tryWith(diskClient, "POST", d.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token"))
	switch {
	case err != nil && d.exited(2*time.Second):
		t.Fatalf("exchange: %v; the gateway died:\n%s", err, crashReport(d.logs()))
	case err != nil:
		t.Fatalf("exchange: %v", err)
	case r.status == 200 && !mustRefuse:
		t.Logf("exchange accepted: the store's open files stay writable")
	case r.status < 500 || jsonField(r.body, "error") == "":
		// The body is not shown: a 200 carries tokens.
		t.Errorf("exchange on a store that cannot be written: %d (error %q), want a 5xx OAuth error", r.status, jsonField(r.body, "error"))
	default:
		t.Logf("exchange refused: %d %s", r.status, r.body)
	}
	reads("after the writes")
}

// checkWritesWorkAgain is recovery once the disk is fine again.
func (d *diskStack) checkWritesWorkAgain(t *testing.T) {
	t.Helper()
	if r, err := tryWith(diskClient, "POST", d.admin+"/User", "application/json", `{"email":"after@example.com"}`); err != nil || r.status != 201 {
		t.Fatalf("admin create after the disk recovered: %v %d %s", err, r.status, r.body)
	}
	if r, err := tryWith(diskClient, "POST", d.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token")); err != nil || r.status != 200 {
		t.Fatalf("exchange after the disk recovered: %v %d %s", err, r.status, r.body)
	}
}

func TestDiskReadOnlyStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	var protect, unprotect func() error
	// chmod leaves the files Badger already has open writable, so there a
	// write may still succeed; the immutable attribute stops them all.
	mustRefuse := os.Geteuid() == 0
	if !mustRefuse {
		protect = func() error { return chmodTree(dir, 0o222, false) }
		unprotect = func() error { return chmodTree(dir, 0o200, true) }
	} else {
		if _, err := exec.LookPath("chattr"); err != nil {
			t.Skip("running as root, where permission bits do not stop writes, and chattr (the immutable attribute) is not installed: no way to make the store read-only")
		}
		protect = func() error { return chattr(dir, "+i") }
		unprotect = func() error { return chattr(dir, "-i") }
	}
	d := startDiskStack(t, dir)
	if err := protect(); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) || strings.Contains(err.Error(), "not supported") {
			t.Skipf("the filesystem of %s does not support the immutable attribute: %v", dir, err)
		}
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = unprotect()
		}
	})
	d.checkWritesFailReadsWork(t, mustRefuse)
	if err := unprotect(); err != nil {
		t.Fatal(err)
	}
	restored = true
	d.checkWritesWorkAgain(t)
}

func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the store (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	d := startDiskStack(t, filepath.Join(dir, "store"))

	filler := filepath.Join(dir, "filler")
	if err := fillDisk(filler); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		t.Logf("store filesystem: %d bytes free", st.Bavail*uint64(st.Bsize))
	}
	d.checkWritesFailReadsWork(t, true)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.checkWritesWorkAgain(t)
}

// fillDisk writes path until the filesystem has no space left.
func fillDisk(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for _, size := range []int{1 << 20, 4 << 10, 1} {
		for {
			if _, err := f.Write(chunk[:size]); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				return fmt.Errorf("filling %s: %w", path, err)
			}
		}
	}
	return f.Sync()
}

// chattr sets or clears an attribute on a directory tree.
func chattr(dir, attr string) error {
	out, err := exec.Command("chattr", "-R", attr, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr -R %s %s: %v: %s", attr, dir, err, out)
	}
	return nil
}

// chmodTree clears (or, with add, sets) permission bits on a tree.
func chmodTree(dir string, bits fs.FileMode, add bool) error {
	return filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		mode := info.Mode().Perm() &^ bits
		if add {
			mode = info.Mode().Perm() | bits
		}
		return os.Chmod(path, mode)
	})
}

// crashReport is the start of a Go crash in a log (the fault and the
// faulting goroutine), or the end of the log when there is none.
func crashReport(logs string) string {
	const n = 4000
	for _, marker := range []string{"unexpected fault address", "fatal error:", "panic:", "SIGBUS", "SIGSEGV"} {
		if i := strings.Index(logs, marker); i >= 0 {
			return logs[i:min(len(logs), i+n)]
		}
	}
	return logs[max(0, len(logs)-n):]
}
