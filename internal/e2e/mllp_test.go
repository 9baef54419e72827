package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"
)

// mllpConfig is the template data of mllpCaddyfile.
type mllpConfig struct {
	Admin, Gateway, MLLP, TLS, Denied, Site int
	Backend, Testdata, Cert, Key            string
}

// mllpCaddyfile: an MLLP listener into the mllp bot (and, by MSH-3, into
// echo), the same behind caddy-l4's tls handler, one refused by a
// remote_ip matcher, and the HTTP gateway beside them.
const mllpCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	auto_https disable_redirects
	fhirgate {
		storage_dir ./data
		issuer http://localhost:{{.Gateway}}
		project alpha {
			bot mllp {
				identifier https://example.com/bots|mllp
				source {{.Testdata}}/mllp.ts
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
			}
		}
	}
	layer4 {
		127.0.0.1:{{.MLLP}} {
			route {
				fhirgate_mllp {
					project alpha
					bot https://example.com/bots|mllp
					route {
						sending_application ECHO
						bot echo
					}
					max_message 64KiB
					idle_timeout 2s
					max_concurrent 8
				}
			}
		}
		127.0.0.1:{{.TLS}} {
			route {
				tls
				fhirgate_mllp {
					project alpha
					bot https://example.com/bots|mllp
				}
			}
		}
		127.0.0.1:{{.Denied}} {
			@lan remote_ip 10.0.0.0/8
			route @lan {
				fhirgate_mllp {
					project alpha
					bot https://example.com/bots|mllp
				}
			}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate
	reverse_proxy {{.Backend}}
}

# Loads the certificate the layer4 tls handler serves.
https://localhost:{{.Site}} {
	tls {{.Cert}} {{.Key}}
	respond "site"
}
`

type mllpStack struct {
	*caddyProc
	cfg     mllpConfig
	gateway string
}

func startMLLPStack(t *testing.T) *mllpStack {
	t.Helper()
	be := newBackend(t)
	dir := t.TempDir()
	cfg := mllpConfig{Admin: freePort(t), Gateway: freePort(t), MLLP: freePort(t), TLS: freePort(t), Denied: freePort(t),
		Site: freePort(t), Backend: be.URL, Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	cfg.Testdata, _ = filepath.Abs("testdata")
	writeSelfSigned(t, cfg.Cert, cfg.Key)
	path := filepath.Join(dir, "Caddyfile")
	var b bytes.Buffer
	if err := template.Must(template.New("mllp").Parse(mllpCaddyfile)).Execute(&b, cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return &mllpStack{caddyProc: startCaddy(t, path, cfg.Admin), cfg: cfg, gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway)}
}

// writeSelfSigned writes a certificate for localhost and 127.0.0.1.
func writeSelfSigned(t *testing.T, certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// hl7Message is an ADT in original acknowledgment mode with the given
// sender and control id.
func hl7Message(sender, id, family string) string {
	return "MSH|^~\\&|" + sender + "|NORTH|GW|CLINIC|20260101120000||ADT^A01^ADT_A01|" + id + "|P|2.5.1\r" +
		"EVN|A01|20260101120000\rPID|1||123^^^MRN||" + family + "^Jane"
}

func mllpFrame(msg string) []byte { return []byte("\x0b" + msg + "\x1c\r") }

// readAck reads one frame (with a deadline) and returns its message.
func readAck(t *testing.T, br *bufio.Reader, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	start, err := br.ReadByte()
	if err != nil || start != 0x0b {
		t.Fatalf("reading an ACK: %v (first byte %#x)", err, start)
	}
	msg, err := br.ReadString(0x1c)
	if err != nil {
		t.Fatalf("reading an ACK: %v", err)
	}
	if cr, err := br.ReadByte(); err != nil || cr != '\r' {
		t.Fatalf("no CR after the end block: %v", err)
	}
	return strings.TrimSuffix(msg, "\x1c")
}

var msaRe = regexp.MustCompile(`(?m)MSA\|([A-Z]{2})\|([^|\r]*)\|([^|\r]*)`)

func msa(t *testing.T, ack string) (code, controlID, text string) {
	t.Helper()
	m := msaRe.FindStringSubmatch(ack)
	if m == nil {
		t.Fatalf("no MSA in %q", ack)
	}
	return m[1], m[2], m[3]
}

// TestMLLPWithMedplumHl7Client is issue 19's client test: @medplum/hl7's
// Hl7Client, which no one here wrote, sends the HL7 corpus and a throwing
// and a resent message; every ACK is checked by the script.
func TestMLLPWithMedplumHl7Client(t *testing.T) {
	needMedplumClient(t)
	s := startMLLPStack(t)
	node, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", "node-22", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	corpus, _ := filepath.Abs("../hl7/testdata")
	runNode(t, node, "mllp.mjs", []string{"MLLP_PORT=" + strconv.Itoa(s.cfg.MLLP), "CORPUS=" + corpus})
	metrics := getMetrics(t, s.adminAddr)
	if !strings.Contains(metrics, `caddy_fhirgate_mllp_messages_total{ack="duplicate"} 1`) {
		t.Errorf("the resent message was not answered from memory:\n%s", grepLines(metrics, "mllp_messages"))
	}
}

func getMetrics(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMLLPRawSockets is issue 19's socket table: whatever arrives on the
// socket, the listener answers what it can, closes what it must, and the
// gateway keeps serving HTTP throughout without a panic.
func TestMLLPRawSockets(t *testing.T) {
	s := startMLLPStack(t)
	addr := "127.0.0.1:" + strconv.Itoa(s.cfg.MLLP)
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// HTTP keeps answering while the table runs.
	stopProbe := make(chan struct{})
	var probeFailures []string
	var probeMu sync.Mutex
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for {
			select {
			case <-stopProbe:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, err := http.Get(s.gateway + "/.well-known/jwks.json")
			if err == nil {
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != 200 {
				probeMu.Lock()
				probeFailures = append(probeFailures, fmt.Sprint(err, resp))
				probeMu.Unlock()
			}
		}
	}()

	t.Run("a frame split over many writes", func(t *testing.T) {
		c, br := dial(t)
		frame := mllpFrame(hl7Message("LAB", "SPLIT1", "Split"))
		for i := range frame {
			if _, err := c.Write(frame[i : i+1]); err != nil {
				t.Fatal(err)
			}
			if i%40 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if code, id, text := msa(t, readAck(t, br, c)); code != "AA" || id != "SPLIT1" || text != "Received Split" {
			t.Fatalf("got %s %s %q", code, id, text)
		}
	})
	t.Run("several frames in one write are answered in order", func(t *testing.T) {
		c, br := dial(t)
		var all []byte
		for i := range 5 {
			all = append(all, mllpFrame(hl7Message("LAB", fmt.Sprint("MANY", i), fmt.Sprint("P", i)))...)
		}
		if _, err := c.Write(all); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if code, id, _ := msa(t, readAck(t, br, c)); code != "AA" || id != fmt.Sprint("MANY", i) {
				t.Fatalf("answer %d: %s %s", i, code, id)
			}
		}
	})
	t.Run("garbage before the start block is skipped", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write(append([]byte("GET / HTTP/1.1\r\n\r\n"), mllpFrame(hl7Message("LAB", "GARB1", "Garb"))...))
		if code, id, _ := msa(t, readAck(t, br, c)); code != "AA" || id != "GARB1" {
			t.Fatalf("got %s %s", code, id)
		}
	})
	t.Run("a frame missing its end block is dropped at the next start", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write(append([]byte("\x0b"+hl7Message("LAB", "LOST", "Lost")), mllpFrame(hl7Message("LAB", "FOUND", "Found"))...))
		if code, id, _ := msa(t, readAck(t, br, c)); code != "AA" || id != "FOUND" {
			t.Fatalf("got %s %s", code, id)
		}
	})
	t.Run("not HL7 is answered AR", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write(mllpFrame("hello, world"))
		if code, _, _ := msa(t, readAck(t, br, c)); code != "AR" {
			t.Fatalf("got %s", code)
		}
	})
	t.Run("a route by MSH-3 runs another bot", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write(mllpFrame(hl7Message("ECHO", "ROUTE1", "Routed")))
		// echo returns its input: the message itself comes back, no MSA.
		if ack := readAck(t, br, c); !strings.Contains(ack, "|ROUTE1|") || strings.Contains(ack, "MSA|") {
			t.Fatalf("got %q", ack)
		}
	})
	t.Run("an oversized frame closes the connection", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write([]byte("\x0b" + hl7Message("LAB", "BIG", strings.Repeat("X", 70<<10))))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the connection stayed open and answered")
		}
	})
	t.Run("a slow sender is closed at the idle timeout", func(t *testing.T) {
		c, br := dial(t)
		_, _ = c.Write([]byte("\x0bMSH|^~\\&|LAB"))
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := br.ReadByte(); err == nil || time.Since(start) > 12*time.Second {
			t.Fatalf("not closed by the 2s idle timeout: %v after %v", err, time.Since(start))
		}
	})
	t.Run("a reset mid-frame", func(t *testing.T) {
		c, _ := dial(t)
		_, _ = c.Write([]byte("\x0bMSH|^~\\&|LAB|NORTH"))
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST on close
		}
		c.Close()
	})
	t.Run("200 concurrent connections", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				id := fmt.Sprint("CONC", i)
				if _, err := c.Write(mllpFrame(hl7Message("LAB", id, "Conc"))); err != nil {
					errs <- err
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
				b, err := bufio.NewReader(c).ReadString(0x1c)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
					return
				}
				if m := msaRe.FindStringSubmatch(b); m == nil || m[1] != "AA" || m[2] != id {
					errs <- fmt.Errorf("%s: %q", id, b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	close(stopProbe)
	<-probeDone
	if len(probeFailures) > 0 {
		t.Errorf("HTTP failed %d times during the table: %v", len(probeFailures), probeFailures[0])
	}
	if logs := s.logs(); strings.Contains(logs, "panic") {
		t.Errorf("a panic in the log:\n%s", logs)
	}
}

// TestMLLPBehindTLSAndRemoteIP: TLS and IP allow-lists are caddy-l4's own
// handlers and matchers in front of fhirgate_mllp.
func TestMLLPBehindTLSAndRemoteIP(t *testing.T) {
	s := startMLLPStack(t)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.TLS),
		&tls.Config{ServerName: "localhost", InsecureSkipVerify: true}) //nolint:gosec // a self-signed test certificate
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write(mllpFrame(hl7Message("LAB", "TLS1", "Secure"))); err != nil {
		t.Fatal(err)
	}
	if code, id, _ := msa(t, readAck(t, bufio.NewReader(conn), conn)); code != "AA" || id != "TLS1" {
		t.Fatalf("over TLS: %s %s", code, id)
	}
	if !strings.Contains(conn.ConnectionState().PeerCertificates[0].Subject.CommonName, "localhost") {
		t.Fatal("not the configured certificate")
	}

	plain, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Denied))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, _ = plain.Write(mllpFrame(hl7Message("LAB", "DENIED", "Denied")))
	_ = plain.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(plain); len(b) > 0 {
		t.Fatalf("a refused address was answered: %q (%v)", b, err)
	}
}
