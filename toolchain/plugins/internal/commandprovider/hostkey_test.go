package commandprovider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"golang.org/x/crypto/ssh"
)

// The host key a step pins: what the host presented in the handshake on first contact (ed25519 first), recorded as
// the step's presentedHostKey and checked by its later runs, on a changed host, port or user as well; an explicit
// connection.hostKey wins, and an empty one is refused.

func newECDSAHostSigner(t *testing.T) ssh.Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func newRSAHostSigner(t *testing.T) ssh.Signer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// authorizedHostKeyOf is a host key as presentedHostKey has it.
func authorizedHostKeyOf(key ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// presented is a state's presentedHostKey ("" when absent).
func presented(t *testing.T, outs resource.PropertyMap) string {
	t.Helper()
	v := outs[keyPresentedHostKey]
	if v.IsNull() {
		return ""
	}
	return plain(t, v)
}

// commandsOn is what ran on s.
func commandsOn(s *testSSHServer) []string {
	_, _, cmds := s.stats()
	return cmds
}

func TestCreateRecordsTheKeyTheHandshakePresented(t *testing.T) {
	ed := newHostSigner(t)
	// sshd's three keys, the rsa one first in the server's list: the client's order decides.
	s := newTestSSHServerWithHostKeys(t, newRSAHostSigner(t), newECDSAHostSigner(t), ed)
	p, _ := newTestProvider(t)
	_, outs := mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo made")})
	if got, want := presented(t, outs), authorizedHostKeyOf(ed.PublicKey()); got != want {
		t.Errorf("presentedHostKey = %q, want the ed25519 key %q (the one the SSH step prints first)", got, want)
	}
	if outs[keyPresentedHostKey].IsSecret() {
		t.Errorf("presentedHostKey is a public key; it should not be secret")
	}
	// A second step on the shared connection reports the key that connection was opened with.
	_, outs = mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo again")})
	if conns, _, _ := s.stats(); conns != 1 {
		t.Fatalf("the second step did not share the connection (%d connections)", conns)
	}
	if got, want := presented(t, outs), authorizedHostKeyOf(ed.PublicKey()); got != want {
		t.Errorf("presentedHostKey on a shared connection = %q, want %q", got, want)
	}

	// A host without an ed25519 key presents the next one in the step's order.
	for _, signer := range []ssh.Signer{newECDSAHostSigner(t), newRSAHostSigner(t)} {
		other := newTestSSHServerWithHostKeys(t, signer)
		_, outs := mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(other, nil), "create": str("true")})
		if got, want := presented(t, outs), authorizedHostKeyOf(signer.PublicKey()); got != want {
			t.Errorf("presentedHostKey = %q, want %q", got, want)
		}
	}

	// No create script: nothing ran, no key.
	_, outs = mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil)})
	if _, ok := outs[keyPresentedHostKey]; ok {
		t.Errorf("a step that ran nothing recorded a key: %v", outs[keyPresentedHostKey])
	}
}

func TestPresentedHostKeyThroughAProxyIsTheTargets(t *testing.T) {
	target := newTestSSHServer(t)
	bastion := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	_, outs := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(target, resource.PropertyMap{"proxy": stripSecrets(connectionTo(bastion, nil))}),
		"create":     str("echo via-bastion"),
	})
	if got := presented(t, outs); got != target.authorizedHostKey() {
		t.Errorf("presentedHostKey = %q, want the target's %q (the bastion's is %q)", got, target.authorizedHostKey(),
			bastion.authorizedHostKey())
	}
}

func TestPreviewPresentedHostKey(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	inputs := check(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo hi")})
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs), Preview: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if outs := mustUnmarshal(t, resp.GetProperties()); !outs[keyPresentedHostKey].IsComputed() {
		t.Errorf("a preview of a create that will run: presentedHostKey = %v, want unknown", outs[keyPresentedHostKey])
	}

	id, olds := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil), "create": str("echo hi"), "logging": str("stdout"),
	})
	previewUpdate := func(news resource.PropertyMap) resource.PropertyMap {
		resp, err := p.Update(context.Background(), &pulumirpc.UpdateRequest{
			Id: id, Urn: testURN, Type: StepToken, Olds: mustMarshal(t, olds), News: mustMarshal(t, check(t, p, news)),
			Preview: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return mustUnmarshal(t, resp.GetProperties())
	}
	outs := previewUpdate(resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo v2")})
	if !outs[keyPresentedHostKey].IsComputed() {
		t.Errorf("a preview of an update that will run: presentedHostKey = %v, want unknown", outs[keyPresentedHostKey])
	}
	// An update with no script runs nothing: the recorded key stays.
	outs = previewUpdate(resource.PropertyMap{"connection": connectionTo(s, nil)})
	if presented(t, outs) != s.authorizedHostKey() {
		t.Errorf("a preview of an update that runs nothing: presentedHostKey = %v, want the recorded one", outs[keyPresentedHostKey])
	}
}

func TestChangedAddressMustPresentTheRecordedKey(t *testing.T) {
	machine := newHostSigner(t)
	first := newTestSSHServerWithHostKeys(t, machine)
	moved := newTestSSHServerWithHostKeys(t, machine) // the same machine on another port
	impostor := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	id, olds := mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(first, nil), "create": str("echo made")})
	recorded := presented(t, olds)
	if recorded != first.authorizedHostKey() {
		t.Fatalf("presentedHostKey = %q, want %q", recorded, first.authorizedHostKey())
	}

	// The same key at a new port: it runs there, and the key stays recorded.
	outs, err := update(t, p, id, olds, resource.PropertyMap{"connection": connectionTo(moved, nil), "create": str("echo moved")})
	if err != nil {
		t.Fatalf("update to the same machine on another port: %v", err)
	}
	if got := commandsOn(moved); len(got) != 1 || got[0] != "echo moved" {
		t.Errorf("commands on the moved host = %q", got)
	}
	if got := presented(t, outs); got != recorded {
		t.Errorf("presentedHostKey after the move = %q, want %q", got, recorded)
	}

	// Another key at a new port (a changed user too): refused at once, naming both keys and the fix, nothing run.
	start := time.Now()
	_, err = update(t, p, id, outs, resource.PropertyMap{
		"connection": connectionTo(impostor, resource.PropertyMap{"dialErrorLimit": resource.NewNumberProperty(20)}),
		"create":     str("echo impostor"),
	})
	if err == nil {
		t.Fatal("an update to a host with another key ran")
	}
	for _, want := range []string{
		ssh.FingerprintSHA256(first.hostKey), ssh.FingerprintSHA256(impostor.hostKey), "Nothing was run there",
		"pin its new key explicitly in the connection's hostKey",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("a mismatching key was retried for %s", elapsed)
	}
	if got := commandsOn(impostor); len(got) != 0 {
		t.Errorf("commands ran on the host with another key: %q", got)
	}
}

func TestExplicitHostKeyWinsOverTheRecordedOne(t *testing.T) {
	old := newTestSSHServer(t)
	replacement := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	id, olds := mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(old, nil), "create": str("echo made")})

	// The replacement, pinned explicitly: it runs, and its key is recorded.
	outs, err := update(t, p, id, olds, resource.PropertyMap{
		"connection": connectionTo(replacement, resource.PropertyMap{"hostKey": str(replacement.authorizedHostKey())}),
		"create":     str("echo replaced"),
	})
	if err != nil {
		t.Fatalf("update to an explicitly pinned host: %v", err)
	}
	if got := presented(t, outs); got != replacement.authorizedHostKey() {
		t.Errorf("presentedHostKey = %q, want the replacement's", got)
	}

	// An explicit pin is checked even where the recorded key would pass: the old host, pinned to another key.
	_, err = update(t, p, id, olds, resource.PropertyMap{
		"connection": connectionTo(old, resource.PropertyMap{"hostKey": str(replacement.authorizedHostKey())}),
		"create":     str("echo wrong"),
	})
	if err == nil || !strings.Contains(err.Error(), "has changed: expected "+ssh.FingerprintSHA256(replacement.hostKey)) {
		t.Errorf("an explicit pin that the host does not present: err = %v", err)
	}
	if got := commandsOn(old); len(got) != 1 {
		t.Errorf("commands on the old host = %q, want only the create", got)
	}
}

func TestEmptyHostKeyIsRefused(t *testing.T) {
	s := newTestSSHServer(t)
	bastion := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	for _, blank := range []string{"", "  \n"} {
		for _, tc := range []struct {
			path string
			conn resource.PropertyValue
		}{
			{"connection.hostKey", connectionTo(s, resource.PropertyMap{"hostKey": str(blank)})},
			{"connection.proxy.hostKey", connectionTo(s, resource.PropertyMap{"proxy": resource.NewObjectProperty(
				stripSecrets(connectionTo(bastion, resource.PropertyMap{"hostKey": str(blank)})).ObjectValue())})},
		} {
			news := resource.PropertyMap{"connection": tc.conn, "create": str("echo never")}
			// Check, at preview.
			resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
				Urn: testURN, Type: StepToken, News: mustMarshal(t, news),
			})
			if err != nil {
				t.Fatal(err)
			}
			if f := resp.GetFailures(); len(f) != 1 || f[0].GetProperty() != tc.path ||
				!strings.Contains(f[0].GetReason(), tc.path+" is empty") || !strings.Contains(f[0].GetReason(), "ssh_host_ed25519_key.pub") {
				t.Errorf("%s %q: Check failures %v", tc.path, blank, f)
			}
			// At dial, for a request that skipped Check: nothing is dialled.
			_, err = p.Create(context.Background(), &pulumirpc.CreateRequest{
				Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, news),
			})
			if err == nil || !strings.Contains(err.Error(), tc.path+" is empty") {
				t.Errorf("%s %q: Create err = %v", tc.path, blank, err)
			}
		}
	}
	// An empty pin is not "no pin": a step with a recorded key is refused too, not pinned to the recorded key.
	id, olds := mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo made")})
	_, err := p.Update(context.Background(), &pulumirpc.UpdateRequest{
		Id: id, Urn: testURN, Type: StepToken, Olds: mustMarshal(t, olds),
		News: mustMarshal(t, resource.PropertyMap{
			"connection": connectionTo(s, resource.PropertyMap{"hostKey": str("")}), "create": str("echo never"),
		}),
	})
	if err == nil || !strings.Contains(err.Error(), "connection.hostKey is empty") {
		t.Errorf("update with an empty hostKey: err = %v", err)
	}
	if conns, _, cmds := s.stats(); conns != 1 || len(cmds) != 1 {
		t.Errorf("an empty hostKey dialled or ran: %d connections, commands %q", conns, cmds)
	}
	if conns, _, _ := bastion.stats(); conns != 0 {
		t.Errorf("an empty proxy hostKey dialled the bastion (%d connections)", conns)
	}
}

func TestReadAndDeleteUseTheRecordedKey(t *testing.T) {
	machine := newHostSigner(t)
	first := newTestSSHServerWithHostKeys(t, machine)
	moved := newTestSSHServerWithHostKeys(t, machine)
	impostor := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	made := resource.PropertyMap{
		"connection": connectionTo(first, nil),
		"create":     str("echo made"),
		"read":       str("true"),
		"delete":     str("echo deleted"),
	}
	_, state := mustCreate(t, p, made)
	at := func(s *testSSHServer) resource.PropertyMap {
		m := made.Copy()
		m["connection"] = connectionTo(s, nil)
		return check(t, p, m)
	}

	// Read: the same machine elsewhere reads back clean; another key is drift, and nothing ran there.
	if gotIn, gotState := read(t, p, at(moved), state); !gotIn["drift"].IsNull() || !gotState["drift"].IsNull() {
		t.Errorf("read of the same machine on another port: drift %v", gotState["drift"])
	}
	if got := commandsOn(moved); len(got) != 1 {
		t.Errorf("the read did not run on the moved host: %q", got)
	}
	_, gotState := read(t, p, at(impostor), state)
	if d := plain(t, gotState["drift"]); !strings.Contains(d, "not read: ") ||
		!strings.Contains(d, ssh.FingerprintSHA256(machine.PublicKey())) {
		t.Errorf("read of a host with another key: drift %q", d)
	}
	if presented(t, gotState) != authorizedHostKeyOf(machine.PublicKey()) {
		t.Errorf("a refused read changed presentedHostKey: %v", gotState[keyPresentedHostKey])
	}
	if got := commandsOn(impostor); len(got) != 0 {
		t.Errorf("the read ran on the host with another key: %q", got)
	}
	logs.reset()

	// Delete, with the state's connection: the same machine elsewhere deletes; another key is refused.
	del := func(s *testSSHServer) error {
		_, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
			Id: "test-1234", Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state), OldInputs: mustMarshal(t, at(s)),
		})
		return err
	}
	if err := del(impostor); err == nil || !strings.Contains(err.Error(), ssh.FingerprintSHA256(impostor.hostKey)) {
		t.Errorf("delete on a host with another key: err = %v", err)
	}
	if got := commandsOn(impostor); len(got) != 0 {
		t.Errorf("the delete ran on the host with another key: %q", got)
	}
	if err := del(moved); err != nil {
		t.Errorf("delete on the same machine on another port: %v", err)
	}
	if got := commandsOn(moved); len(got) != 2 || got[1] != "echo deleted" {
		t.Errorf("commands on the moved host = %q", got)
	}

	// A state recorded by an earlier build has no key: a clean read leaves it so (a refresh of a stack deployed
	// before changes nothing).
	old := state.Copy()
	delete(old, keyPresentedHostKey)
	if _, gotState := read(t, p, at(first), old); !gotState.DeepEquals(old) {
		t.Errorf("a clean read of a state without presentedHostKey changed it: %v", gotState)
	}

	// An explicit pin wins on a read as well, and the read records the key it ran with.
	pinned := made.Copy()
	pinned["connection"] = connectionTo(impostor, resource.PropertyMap{"hostKey": str(impostor.authorizedHostKey())})
	_, gotState = read(t, p, check(t, p, pinned), state)
	if !gotState["drift"].IsNull() || presented(t, gotState) != impostor.authorizedHostKey() {
		t.Errorf("read with an explicit pin: drift %v, presentedHostKey %v", gotState["drift"], gotState[keyPresentedHostKey])
	}
}
