package commandprovider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil/rpcerror"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// initFailure returns the ErrorResourceInitFailed detail of a Create error, as the engine reads it
// (plugin.parseError), or nil when there is none.
func initFailure(t *testing.T, err error) *pulumirpc.ErrorResourceInitFailed {
	t.Helper()
	// What the engine receives has been through gRPC's status encoding: round-trip it the same way.
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range rpcerror.Convert(st.Err()).Details() {
		if f, ok := d.(*pulumirpc.ErrorResourceInitFailed); ok {
			return f
		}
	}
	return nil
}

// A create that started on the host and failed is returned as a step that was created but failed to initialize:
// the engine records it with its inputs, so destroy runs its delete and the next up runs its create again.
func TestFailedCreateIsRecorded(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	dir := t.TempDir()
	made := filepath.Join(dir, "unit-enabled")
	news := resource.PropertyMap{
		"connection": connectionTo(s, nil),
		// Like a unit step whose readiness check fails: the unit is enabled, then the check fails.
		"create": str("touch " + made + "; echo enabled; echo 'not ready' >&2; exit 4"),
		"delete": str("rm -f " + made + "; echo removed"),
		"stdin":  secret(str("key=s3cr3t-value")),
	}
	inputs := check(t, p, news)
	_, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs),
	})
	if err == nil {
		t.Fatal("expected the create to fail")
	}
	if _, statErr := os.Stat(made); statErr != nil {
		t.Fatalf("the script did not run: %v", statErr)
	}
	if st, ok := status.FromError(err); !ok || st.Code() != codes.Unknown {
		t.Fatalf("err = %v, want a gRPC status of code Unknown (the engine's partial-failure path)", err)
	}
	failed := initFailure(t, err)
	if failed == nil {
		t.Fatalf("no ErrorResourceInitFailed detail in %v", err)
	}
	if !strings.HasPrefix(failed.GetId(), "test") {
		t.Errorf("id = %q", failed.GetId())
	}
	if len(failed.GetReasons()) != 1 || !strings.Contains(failed.GetReasons()[0], "status 4") ||
		!strings.Contains(failed.GetReasons()[0], "not ready") {
		t.Errorf("reasons = %q", failed.GetReasons())
	}
	state := mustUnmarshal(t, failed.GetProperties())
	if got := plain(t, state["stdout"]); got != "enabled" {
		t.Errorf("stdout = %q", got)
	}
	if !state["stdout"].IsSecret() {
		t.Errorf("stdout of a step with a secret stdin should be secret: %v", state["stdout"])
	}
	// The script ran on a host: its key is recorded, so the next run (the update that retries it) checks it.
	if got := presented(t, state); got != s.authorizedHostKey() {
		t.Errorf("presentedHostKey = %q, want %q", got, s.authorizedHostKey())
	}
	for _, k := range notEchoedKeys {
		if _, ok := state[k]; ok {
			t.Errorf("the partial state echoes %s", k)
		}
	}
	if got := mustUnmarshal(t, failed.GetInputs()); !got.DeepEquals(inputs) {
		t.Errorf("inputs = %v, want %v", got, inputs)
	}

	// The next up: the engine updates a step with initialization errors, though nothing changed; create runs again.
	if err := os.Remove(made); err != nil {
		t.Fatal(err)
	}
	if _, err := update(t, p, failed.GetId(), state, news); err == nil {
		t.Error("the create should fail again")
	}
	if _, statErr := os.Stat(made); statErr != nil {
		t.Errorf("the update did not run create again: %v", statErr)
	}

	// destroy: the delete of the recorded step runs, with the recorded inputs.
	if _, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: failed.GetId(), Urn: testURN, Type: StepToken,
		Properties: failed.GetProperties(), OldInputs: failed.GetInputs(),
	}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, statErr := os.Stat(made); !os.IsNotExist(statErr) {
		t.Errorf("the delete did not remove what the create left: %v", statErr)
	}
}

// A create that never started (the host not reached) ran nothing: nothing is recorded.
func TestCreateThatDidNotStartIsNotRecorded(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	_, _, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{
			"port":           resource.NewNumberProperty(float64(closedPort(t))),
			"dialErrorLimit": resource.NewNumberProperty(1),
		}),
		"create": str("true"),
		"delete": str("true"),
	})
	if err == nil {
		t.Fatal("expected a dial error")
	}
	if f := initFailure(t, err); f != nil {
		t.Errorf("a create that never reached the host was recorded: %v", f)
	}

	// A refused environment variable: the session never ran the script either.
	s.refuseEnv["FOO"] = true
	_, _, err = create(t, p, resource.PropertyMap{
		"connection":  connectionTo(s, nil),
		"create":      str("true"),
		"environment": resource.NewObjectProperty(resource.PropertyMap{"FOO": str("x")}),
	})
	if err == nil || !strings.Contains(err.Error(), "AcceptEnv") {
		t.Fatalf("err = %v", err)
	}
	if f := initFailure(t, err); f != nil {
		t.Errorf("a create whose session was refused was recorded: %v", f)
	}
	if _, _, cmds := s.stats(); len(cmds) != 0 {
		t.Errorf("commands ran: %q", cmds)
	}
}
