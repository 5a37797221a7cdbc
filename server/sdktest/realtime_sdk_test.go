package sdktest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/server"
)

// TestRealtimeSDKClients: the openai npm SDK's own realtime clients,
// unchanged (openai@6.49.0, `make deps`), against a server started with
// --tls-cert/--tls-key (they force wss:): the GA OpenAIRealtimeWS
// (session.update, type transcription), the beta OpenAIRealtimeWS
// (transcription_session.update) and the browser client
// OpenAIRealtimeWebSocket (the key as the openai-insecure-api-key.
// subprotocol). Each configures the session, has noise reduction refused
// with an error naming the field, streams a flite-spoken sentence and
// sees deltas, then the completed transcript with the sentence's words,
// and closes cleanly (CONTRACT.md live.ga-session-update,
// live.beta-session-update, live.subprotocol, live.transcribe).
func TestRealtimeSDKClients(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed: %v", err)
	}
	mods := nodeModules()
	for _, p := range []string{"openai", "ws"} {
		if _, err := os.Stat(filepath.Join(mods, p, "package.json")); err != nil {
			missing(t, "the %s npm package is not under %s: %v", p, mods, err)
		}
	}
	if err := flite.Available(); err != nil {
		missing(t, "engine library missing: %v", err)
	}
	dir := t.TempDir()
	pcmPath := filepath.Join(dir, "speech.pcm")
	if err := os.WriteFile(pcmPath, audio.PCM16Bytes(speech24k(t, "Turn on the kitchen lights.")), 0o644); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := selfSigned(t, dir)

	const key = "rt-sdk-key"
	addr := serveSluice(t, key, func(c *server.Config) { c.TLSCert, c.TLSKey = certPath, keyPath }, []string{catalogue.PocketsphinxEnUS}, []server.ModelEntry{
		{ID: "asr", Spec: server.ModelSpec{Engine: pocketsphinx.Name, Task: "asr", Checkpoint: catalogue.PocketsphinxEnUS, Slots: json.RawMessage("1"),
			Aliases: []string{"gpt-4o-transcribe"}}},
	})

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "realtime-sdk.mjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "SLUICE_SDK_API_KEY="+key, "SLUICE_RT_AUDIO="+pcmPath, "SLUICE_RT_PACE=4",
		"SLUICE_RT_MODEL=gpt-4o-transcribe", "SLUICE_SDK_BASE_URL=https://"+addr+"/v1", "NODE_EXTRA_CA_CERTS="+certPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node realtime-sdk.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, b, stderr.Bytes())
	}
	type result struct {
		Client, URL, Transcript string
		Protocol                *string
		Types, Deltas, Errors   []string
		Refusal                 *struct{ Code, Param, Message string }
		Close                   int
	}
	wantParam := map[string]string{"ga": "session.audio.input.noise_reduction", "beta": "session.input_audio_noise_reduction", "browser": "session.audio.input.noise_reduction"}
	wantCreated := map[string]string{"ga": "session.created", "beta": "transcription_session.created", "browser": "session.created"}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("realtime-sdk.mjs printed %q: %v", sc.Bytes(), err)
		}
		seen[r.Client] = true
		var failed []string // this client's failures: its rows of the SDK table
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf(format, args...)
			failed = append(failed, fmt.Sprintf(format, args...))
		}
		proto := "none"
		if r.Protocol != nil && *r.Protocol != "" {
			proto = *r.Protocol
		}
		t.Logf("%-7s %s (subprotocol %s): %d events, deltas %q, transcript %q, refusal %+v, close %d", r.Client, r.URL, proto, len(r.Types), r.Deltas, r.Transcript, r.Refusal, r.Close)
		if len(r.Errors) > 0 {
			fail("%s: errors %q", r.Client, r.Errors)
		}
		if !strings.HasPrefix(r.URL, "wss://") {
			fail("%s: url %s is not wss:", r.Client, r.URL)
		}
		if len(r.Types) == 0 || r.Types[0] != wantCreated[r.Client] {
			fail("%s: first events %v, want %s", r.Client, r.Types, wantCreated[r.Client])
		}
		refusalOK := r.Refusal != nil && r.Refusal.Param == wantParam[r.Client]
		if !refusalOK { // its own row of the table
			t.Errorf("%s: noise reduction answered %+v, want an error naming %s", r.Client, r.Refusal, wantParam[r.Client])
		}
		if r.Client == "browser" && proto != "realtime" {
			fail("browser: selected subprotocol %s, want realtime", proto)
		}
		firstDelta, completed := -1, -1
		for i, typ := range r.Types {
			switch typ {
			case "conversation.item.input_audio_transcription.delta":
				if firstDelta < 0 {
					firstDelta = i
				}
			case "conversation.item.input_audio_transcription.completed":
				completed = i
			}
		}
		if firstDelta < 0 || completed < firstDelta {
			fail("%s: want deltas before the completed event: %v", r.Client, r.Types)
		}
		for _, w := range []string{"turn", "kitchen", "lights"} {
			if !strings.Contains(r.Transcript, w) {
				fail("%s: transcript %q lacks %q", r.Client, r.Transcript, w)
			}
		}
		if r.Close != 1000 {
			fail("%s: close code %d, want 1000", r.Client, r.Close)
		}
		refusal := "no error event"
		if r.Refusal != nil {
			refusal = fmt.Sprintf("error event code=%s param=%s: %s", r.Refusal.Code, r.Refusal.Param, r.Refusal.Message)
		}
		result := fmt.Sprintf("%s, %d events (first %s), %d deltas, transcript %q, close %d", r.URL, len(r.Types), first(r.Types), len(r.Deltas), r.Transcript, r.Close)
		if len(failed) > 0 {
			result += "; " + strings.Join(failed, "; ")
		}
		calls.add("realtime."+r.Client, len(failed) == 0, sdkClients[r.Client]+": "+configureCall[r.Client]+", input_audio_buffer.append/commit", result)
		calls.add("realtime."+r.Client+".noise_reduction", refusalOK, sdkClients[r.Client]+": "+noisyCall[r.Client], refusal)
	}
	for _, c := range []string{"ga", "beta", "browser"} {
		if !seen[c] {
			t.Errorf("no result for the %s client; stderr:\n%s", c, stderr.Bytes())
		}
	}
}

// The SDK's realtime clients and the calls realtime-sdk.mjs makes with
// them, for the SDK table.
var (
	sdkClients = map[string]string{
		"ga":      "new OpenAIRealtimeWS({model:'gpt-4o-transcribe'}) (openai/realtime/ws)",
		"beta":    "new OpenAIRealtimeWS({model:'gpt-4o-transcribe'}) (openai/beta/realtime/ws)",
		"browser": "new OpenAIRealtimeWebSocket({model:'gpt-4o-transcribe'}) (openai/realtime/websocket)",
	}
	configureCall = map[string]string{
		"ga":      "send session.update {type:'transcription', audio.input.transcription.model}",
		"beta":    "send transcription_session.update {input_audio_transcription.model}",
		"browser": "send session.update {type:'transcription', audio.input.transcription.model}",
	}
	noisyCall = map[string]string{
		"ga":      "send session.update {audio.input.noise_reduction:{type:'near_field'}}",
		"beta":    "send transcription_session.update {input_audio_noise_reduction:{type:'near_field'}}",
		"browser": "send session.update {audio.input.noise_reduction:{type:'near_field'}}",
	}
)

// first is the first of types, or "none".
func first(types []string) string {
	if len(types) == 0 {
		return "none"
	}
	return types[0]
}

// selfSigned writes a self-signed certificate for 127.0.0.1 (its own CA,
// so NODE_EXTRA_CA_CERTS can trust it) and its key into dir.
func selfSigned(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
