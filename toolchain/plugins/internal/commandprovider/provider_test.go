package commandprovider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"golang.org/x/crypto/ssh"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

const testURN = "urn:pulumi:dev::spark-cluster::spark-remote:index:Step::test"

type logEntry struct {
	severity  pulumirpc.LogSeverity
	urn       string
	message   string
	ephemeral bool
}

// captureLogger records what the provider would send to the engine.
type captureLogger struct {
	mu      sync.Mutex
	entries []logEntry
}

func (l *captureLogger) Log(_ context.Context, severity pulumirpc.LogSeverity, urn, message string, ephemeral bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, logEntry{severity, urn, message, ephemeral})
}

func (l *captureLogger) all() []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logEntry(nil), l.entries...)
}

func (l *captureLogger) messages(severity pulumirpc.LogSeverity) []string {
	var out []string
	for _, e := range l.all() {
		if e.severity == severity {
			out = append(out, e.message)
		}
	}
	return out
}

func (l *captureLogger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

func newTestProvider(t *testing.T) (*Provider, *captureLogger) {
	t.Helper()
	logs := &captureLogger{}
	p := New(logs)
	p.retryDelay = 20 * time.Millisecond
	p.maxRetryDelay = 100 * time.Millisecond
	t.Cleanup(p.Close)
	return p, logs
}

func str(s string) resource.PropertyValue { return resource.NewStringProperty(s) }

func secret(v resource.PropertyValue) resource.PropertyValue { return resource.MakeSecret(v) }

func unknown() resource.PropertyValue { return resource.MakeComputed(str("")) }

// connectionTo is the connection input for s, secret as the npm SDK sends it.
func connectionTo(s *testSSHServer, extra resource.PropertyMap) resource.PropertyValue {
	m := resource.PropertyMap{
		"host":           str("127.0.0.1"),
		"port":           resource.NewNumberProperty(float64(s.port)),
		"user":           str(s.user),
		"privateKey":     str(s.clientKeyPEM),
		"dialErrorLimit": resource.NewNumberProperty(2),
		"perDialTimeout": resource.NewNumberProperty(5),
	}
	for k, v := range extra {
		if v.IsNull() {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return secret(resource.NewObjectProperty(m))
}

func mustMarshal(t *testing.T, m resource.PropertyMap) *structpb.Struct {
	t.Helper()
	s, err := plugin.MarshalProperties(m, plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true,
		KeepResources: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustUnmarshal(t *testing.T, s *structpb.Struct) resource.PropertyMap {
	t.Helper()
	m, err := plugin.UnmarshalProperties(s, plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true,
		KeepResources: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// check runs Check like the engine does before Create/Update, failing the test on failures.
func check(t *testing.T, p *Provider, news resource.PropertyMap) resource.PropertyMap {
	t.Helper()
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn: testURN, Type: StepToken, Name: "test", News: mustMarshal(t, news),
	})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(resp.GetFailures()) > 0 {
		t.Fatalf("Check failures: %v", resp.GetFailures())
	}
	return mustUnmarshal(t, resp.GetInputs())
}

func create(t *testing.T, p *Provider, news resource.PropertyMap) (string, resource.PropertyMap, error) {
	t.Helper()
	inputs := check(t, p, news)
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs),
	})
	if err != nil {
		return "", nil, err
	}
	return resp.GetId(), mustUnmarshal(t, resp.GetProperties()), nil
}

func mustCreate(t *testing.T, p *Provider, news resource.PropertyMap) (string, resource.PropertyMap) {
	t.Helper()
	id, outs, err := create(t, p, news)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id, outs
}

func update(t *testing.T, p *Provider, id string, olds, news resource.PropertyMap) (resource.PropertyMap, error) {
	t.Helper()
	inputs := check(t, p, news)
	resp, err := p.Update(context.Background(), &pulumirpc.UpdateRequest{
		Id: id, Urn: testURN, Type: StepToken, Name: "test",
		Olds: mustMarshal(t, olds), News: mustMarshal(t, inputs),
	})
	if err != nil {
		return nil, err
	}
	return mustUnmarshal(t, resp.GetProperties()), nil
}

func diff(t *testing.T, p *Provider, olds, news resource.PropertyMap) *pulumirpc.DiffResponse {
	t.Helper()
	resp, err := p.Diff(context.Background(), &pulumirpc.DiffRequest{
		Id: "test-1234", Urn: testURN, Type: StepToken, Name: "test",
		Olds: mustMarshal(t, olds), OldInputs: mustMarshal(t, olds), News: mustMarshal(t, news),
	})
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	return resp
}

// plain returns the string value of v, failing when v is not a (possibly secret) string.
func plain(t *testing.T, v resource.PropertyValue) string {
	t.Helper()
	inner, _ := unwrapSecret(v)
	if !inner.IsString() {
		t.Fatalf("expected a string, got %v", v)
	}
	return inner.StringValue()
}

func TestPluginInfoAndProtocol(t *testing.T) {
	p, _ := newTestProvider(t)
	ctx := context.Background()
	info, err := p.GetPluginInfo(ctx, &emptypb.Empty{})
	if err != nil || info.GetVersion() != Version {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	hs, err := p.Handshake(ctx, &pulumirpc.ProviderHandshakeRequest{EngineAddress: "127.0.0.1:1"})
	if err != nil || !hs.GetAcceptSecrets() || !hs.GetAcceptResources() {
		t.Fatalf("Handshake = %v, %v", hs, err)
	}
	cfg, err := p.Configure(ctx, &pulumirpc.ConfigureRequest{})
	if err != nil || !cfg.GetAcceptSecrets() || !cfg.GetAcceptResources() || !cfg.GetSupportsPreview() {
		t.Fatalf("Configure = %v, %v", cfg, err)
	}
	sch, err := p.GetSchema(ctx, &pulumirpc.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Name      string                     `json:"name"`
		Version   string                     `json:"version"`
		Resources map[string]json.RawMessage `json:"resources"`
		Types     map[string]json.RawMessage `json:"types"`
	}
	if err := json.Unmarshal([]byte(sch.GetSchema()), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Name != "spark-remote" || schema.Version != Version || schema.Resources["spark-remote:index:Step"] == nil ||
		schema.Resources["spark-remote:index:RandomSecret"] == nil ||
		schema.Types["spark-remote:index:Connection"] == nil || schema.Types["spark-remote:index:Logging"] == nil ||
		len(schema.Resources) != 2 {
		t.Fatalf("unexpected schema %s", sch.GetSchema())
	}
	if strings.Contains(sch.GetSchema(), "command:") {
		t.Errorf("the schema names another package's type: %s", sch.GetSchema())
	}
	cc, err := p.CheckConfig(ctx, &pulumirpc.CheckRequest{News: mustMarshal(t, resource.PropertyMap{
		"version": str(Version),
	})})
	if err != nil || len(cc.GetFailures()) != 0 {
		t.Fatalf("CheckConfig = %v, %v", cc, err)
	}
	dc, err := p.DiffConfig(ctx, &pulumirpc.DiffRequest{
		Olds: mustMarshal(t, resource.PropertyMap{"version": str(Version)}),
		News: mustMarshal(t, resource.PropertyMap{"version": str(Version)}),
	})
	if err != nil || dc.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("DiffConfig = %v, %v", dc, err)
	}
}

func TestOtherTypesAreNotImplemented(t *testing.T) {
	p, _ := newTestProvider(t)
	const localURN = "urn:pulumi:dev::spark-cluster::command:local:Command::x"
	want := "command:local:Command is not implemented by the spark-remote provider (only spark-remote:index:Step and " +
		"spark-remote:index:RandomSecret)"
	_, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn: localURN, Type: "command:local:Command", News: mustMarshal(t, resource.PropertyMap{}),
	})
	if err == nil || err.Error() != want {
		t.Fatalf("Check error = %v, want %q", err, want)
	}
	// Without the Type field, the type comes from the URN.
	_, err = p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: localURN, Properties: mustMarshal(t, resource.PropertyMap{}),
	})
	if err == nil || err.Error() != want {
		t.Fatalf("Create error = %v, want %q", err, want)
	}
	_, err = p.Delete(context.Background(), &pulumirpc.DeleteRequest{Urn: localURN, Type: "command:local:Command"})
	if err == nil || err.Error() != want {
		t.Fatalf("Delete error = %v, want %q", err, want)
	}
}

func TestCheckDefaultsAndValidation(t *testing.T) {
	p, _ := newTestProvider(t)
	inputs := check(t, p, resource.PropertyMap{
		"connection": resource.NewObjectProperty(resource.PropertyMap{"host": str("10.0.0.5")}),
		"create":     str("true"),
	})
	if !inputs["connection"].IsSecret() {
		t.Errorf("connection should be secret after Check: %v", inputs["connection"])
	}
	conn := stripSecrets(inputs["connection"]).ObjectValue()
	want := resource.PropertyMap{
		"host":           str("10.0.0.5"),
		"port":           resource.NewNumberProperty(22),
		"user":           str("root"),
		"dialErrorLimit": resource.NewNumberProperty(10),
		"perDialTimeout": resource.NewNumberProperty(15),
	}
	if !conn.DeepEquals(want) {
		t.Errorf("connection defaults = %v, want %v", conn, want)
	}
	if v := inputs["addPreviousOutputInEnv"]; !v.IsBool() || v.BoolValue() {
		t.Errorf("addPreviousOutputInEnv = %v, want false (this package's default)", v)
	}

	// Proxy defaults.
	inputs = check(t, p, resource.PropertyMap{
		"connection": secret(resource.NewObjectProperty(resource.PropertyMap{
			"host":  str("10.0.0.5"),
			"proxy": resource.NewObjectProperty(resource.PropertyMap{"host": str("bastion")}),
		})),
	})
	proxy := stripSecrets(inputs["connection"]).ObjectValue()["proxy"].ObjectValue()
	if proxy["port"].NumberValue() != 22 || proxy["user"].StringValue() != "root" {
		t.Errorf("proxy defaults not applied: %v", proxy)
	}

	// An unknown host (preview) is fine.
	check(t, p, resource.PropertyMap{
		"connection": secret(resource.NewObjectProperty(resource.PropertyMap{"host": unknown()})),
	})
	check(t, p, resource.PropertyMap{"connection": unknown()})

	failures := func(news resource.PropertyMap) []string {
		resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
			Urn: testURN, Type: StepToken, News: mustMarshal(t, news),
		})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range resp.GetFailures() {
			out = append(out, f.GetProperty())
		}
		return out
	}
	if got := failures(resource.PropertyMap{"create": str("x")}); len(got) != 1 || got[0] != "connection" {
		t.Errorf("missing connection: failures %v", got)
	}
	if got := failures(resource.PropertyMap{
		"connection": secret(resource.NewObjectProperty(resource.PropertyMap{"port": resource.NewNumberProperty(22)})),
	}); len(got) != 1 || got[0] != "connection.host" {
		t.Errorf("missing host: failures %v", got)
	}
	if got := failures(resource.PropertyMap{
		"connection": secret(resource.NewObjectProperty(resource.PropertyMap{"host": str("h")})),
		"logging":    str("everything"),
	}); len(got) != 1 || got[0] != "logging" {
		t.Errorf("bad logging: failures %v", got)
	}
}

func TestCreateRunsCreateCommand(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	id, outs := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo hello; echo world; echo oops >&2"),
		"delete":     str("echo bye"),
	})
	if !strings.HasPrefix(id, "test") || len(id) != len("test")+8 {
		t.Errorf("id = %q", id)
	}
	if got := plain(t, outs["stdout"]); got != "hello\nworld" {
		t.Errorf("stdout = %q", got)
	}
	if got := plain(t, outs["stderr"]); got != "oops" {
		t.Errorf("stderr = %q", got)
	}
	if outs["stdout"].IsSecret() || outs["stderr"].IsSecret() {
		t.Errorf("stdout/stderr should not be secret without secret inputs")
	}
	// The scripts and the connection stay in the inputs only (notEchoedKeys); the other inputs are echoed as
	// upstream does.
	for _, k := range []resource.PropertyKey{"create", "delete", "update", "read", "connection"} {
		if _, ok := outs[k]; ok {
			t.Errorf("the outputs echo %s", k)
		}
	}
	if outs["addPreviousOutputInEnv"].IsNull() {
		t.Errorf("inputs missing from outputs: %v", outs)
	}
	if _, _, cmds := s.stats(); len(cmds) != 1 {
		t.Errorf("commands run = %v", cmds)
	}
	// stdout and stderr are streamed concurrently: only the order within a stream is fixed.
	info := logs.messages(pulumirpc.LogSeverity_INFO)
	var outLines []string
	for _, l := range info {
		if l != "oops" {
			outLines = append(outLines, l)
		}
	}
	if len(info) != 3 || strings.Join(outLines, "|") != "hello|world" {
		t.Errorf("logged lines = %q", info)
	}
	for _, e := range logs.all() {
		if e.urn != testURN || !e.ephemeral {
			t.Errorf("output lines must be ephemeral messages with the resource URN: %+v", e)
		}
	}

	// No create command: nothing is run, outputs are empty strings.
	_, outs = mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil)})
	if plain(t, outs["stdout"]) != "" || plain(t, outs["stderr"]) != "" {
		t.Errorf("outputs without a create command: %v", outs)
	}
	if conns, _, _ := s.stats(); conns != 1 {
		t.Errorf("a command without `create` connected anyway (%d connections)", conns)
	}
}

func TestPreviewCreateDoesNotConnect(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	for _, conn := range []resource.PropertyValue{
		connectionTo(s, nil),
		connectionTo(s, resource.PropertyMap{"host": unknown()}),
		unknown(),
	} {
		inputs := check(t, p, resource.PropertyMap{"connection": conn, "create": str("echo hi")})
		resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
			Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs), Preview: true,
		})
		if err != nil {
			t.Fatalf("preview Create: %v", err)
		}
		outs := mustUnmarshal(t, resp.GetProperties())
		if !outs["stdout"].IsComputed() || !outs["stderr"].IsComputed() {
			t.Errorf("preview stdout/stderr should be unknown: %v", outs)
		}
		if _, ok := outs["create"]; ok || !outs["connection"].IsNull() {
			t.Errorf("preview outputs: the inputs without the scripts and the connection, got %v", outs)
		}
	}
	if conns, sessions, _ := s.stats(); conns != 0 || sessions != 0 {
		t.Errorf("preview connected: %d connections, %d sessions", conns, sessions)
	}
}

func TestUpdateRunsUpdateOrCreate(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	id, olds := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo created"),
		"update":     str("echo updated"),
	})
	outs, err := update(t, p, id, olds, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo created"),
		"update":     str("echo updated v2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(t, outs["stdout"]); got != "updated v2" {
		t.Errorf("update stdout = %q", got)
	}
	outs2, err := update(t, p, id, outs, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo created again"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(t, outs2["stdout"]); got != "created again" {
		t.Errorf("update without `update` should run create; stdout = %q", got)
	}
	if _, _, cmds := s.stats(); strings.Join(cmds, "|") != "echo created|echo updated v2|echo created again" {
		t.Errorf("commands = %q", cmds)
	}
	if _, ok := outs2["update"]; ok && !outs2["update"].IsNull() {
		t.Errorf("removed input still in outputs: %v", outs2["update"])
	}

	// Preview: nothing runs and the outputs are unknown.
	inputs := check(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo x")})
	resp, err := p.Update(context.Background(), &pulumirpc.UpdateRequest{
		Id: id, Urn: testURN, Type: StepToken, Olds: mustMarshal(t, outs2), News: mustMarshal(t, inputs),
		Preview: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if pv := mustUnmarshal(t, resp.GetProperties()); !pv["stdout"].IsComputed() {
		t.Errorf("preview update stdout should be unknown: %v", pv["stdout"])
	}
	if _, _, cmds := s.stats(); len(cmds) != 3 {
		t.Errorf("preview update ran a command: %q", cmds)
	}

	// A failing update is an error.
	_, err = update(t, p, id, outs2, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo created again"),
		"update":     str("exit 4"),
	})
	if err == nil || !strings.Contains(err.Error(), "status 4") {
		t.Errorf("failing update: err = %v", err)
	}
}

func TestDeleteUsesOldConnection(t *testing.T) {
	oldServer := newTestSSHServer(t)
	newServer := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	made := resource.PropertyMap{
		"connection":             connectionTo(oldServer, nil),
		"create":                 str("echo made"),
		"delete":                 str(`echo "deleting after $PULUMI_COMMAND_STDOUT"`),
		"addPreviousOutputInEnv": resource.NewBoolProperty(true),
	}
	id, state := mustCreate(t, p, made)
	// The program now points elsewhere; Delete gets the old state and old inputs only, and must use their connection.
	_ = newServer
	_, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state),
		OldInputs: mustMarshal(t, check(t, p, made)),
	})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, cmds := oldServer.stats()
	if len(cmds) != 2 || cmds[1] != `echo "deleting after $PULUMI_COMMAND_STDOUT"` {
		t.Errorf("old server commands = %q", cmds)
	}
	if env := oldServer.lastEnv(); env["PULUMI_COMMAND_STDOUT"] != "made" {
		t.Errorf("delete env = %v", env)
	}
	if conns, _, _ := newServer.stats(); conns != 0 {
		t.Errorf("delete contacted the new server")
	}

	// Without a delete command, Delete does not connect.
	bare := resource.PropertyMap{"connection": connectionTo(newServer, nil)}
	id, state = mustCreate(t, p, bare)
	if _, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state),
		OldInputs: mustMarshal(t, check(t, p, bare)),
	}); err != nil {
		t.Fatal(err)
	}
	if conns, _, _ := newServer.stats(); conns != 0 {
		t.Errorf("delete without a command connected (%d)", conns)
	}

	// A failing delete is an error.
	failing := resource.PropertyMap{
		"connection": connectionTo(oldServer, nil),
		"delete":     str("echo cannot delete; exit 7"),
	}
	id, state = mustCreate(t, p, failing)
	_, err = p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state),
		OldInputs: mustMarshal(t, check(t, p, failing)),
	})
	if err == nil || !strings.Contains(err.Error(), "status 7") || !strings.Contains(err.Error(), "cannot delete") {
		t.Errorf("failing delete: err = %v", err)
	}
}

// withDial is connection c with the given dialErrorLimit and perDialTimeout.
func withDial(c resource.PropertyValue, limit, timeout float64) resource.PropertyValue {
	inner, _ := unwrapSecret(c)
	m := inner.ObjectValue().Copy()
	m["dialErrorLimit"] = resource.NewNumberProperty(limit)
	m["perDialTimeout"] = resource.NewNumberProperty(timeout)
	return secret(resource.NewObjectProperty(m))
}

// withHint is connection c with the given unreachableHint.
func withHint(c resource.PropertyValue, hint string) resource.PropertyValue {
	inner, _ := unwrapSecret(c)
	m := inner.ObjectValue().Copy()
	m["unreachableHint"] = str(hint)
	return secret(resource.NewObjectProperty(m))
}

// withProxy is connection c reached through proxy.
func withProxy(c, proxy resource.PropertyValue) resource.PropertyValue {
	inner, _ := unwrapSecret(c)
	m := inner.ObjectValue().Copy()
	m["proxy"] = proxy
	return secret(resource.NewObjectProperty(m))
}

func TestDiff(t *testing.T) {
	p, _ := newTestProvider(t)
	conn := func(host string) resource.PropertyValue {
		return secret(resource.NewObjectProperty(resource.PropertyMap{
			"host": str(host), "port": resource.NewNumberProperty(22), "user": str("root"),
			"privateKey": secret(str("KEY")),
		}))
	}
	base := func() resource.PropertyMap {
		return resource.PropertyMap{
			"connection":             conn("10.0.0.1"),
			"create":                 str("echo a"),
			"triggers":               resource.NewArrayProperty([]resource.PropertyValue{str("t1")}),
			"environment":            resource.NewObjectProperty(resource.PropertyMap{"A": secret(str("s"))}),
			"addPreviousOutputInEnv": resource.NewBoolProperty(true),
		}
	}
	with := func(k resource.PropertyKey, v resource.PropertyValue) resource.PropertyMap {
		m := base()
		if v.IsNull() {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name     string
		olds     resource.PropertyMap
		news     resource.PropertyMap
		changes  pulumirpc.DiffResponse_DiffChanges
		replaces []string
		diffs    []string
		kind     pulumirpc.PropertyDiff_Kind
	}{
		{name: "identical", olds: base(), news: base(), changes: pulumirpc.DiffResponse_DIFF_NONE},
		{
			name: "identical, secretness differs", olds: base(),
			news: with("create", secret(str("echo a"))), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "identical, connection not wrapped", olds: base(),
			news: with("connection", stripSecrets(conn("10.0.0.1"))), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "create changed", olds: base(), news: with("create", str("echo b")),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"create"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name: "secret create changed", olds: with("create", secret(str("echo a"))),
			news:    with("create", secret(str("echo b"))),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"create"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name: "host changed", olds: base(), news: with("connection", conn("10.0.0.2")),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"connection"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name: "update added", olds: base(), news: with("update", str("echo u")),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"update"}, kind: pulumirpc.PropertyDiff_ADD,
		},
		{
			name: "create removed", olds: base(), news: with("create", resource.NewNullProperty()),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"create"}, kind: pulumirpc.PropertyDiff_DELETE,
		},
		{
			name: "triggers changed", olds: base(),
			news:    with("triggers", resource.NewArrayProperty([]resource.PropertyValue{str("t2")})),
			changes: pulumirpc.DiffResponse_DIFF_SOME, replaces: []string{"triggers"}, diffs: []string{"triggers"},
			kind: pulumirpc.PropertyDiff_UPDATE_REPLACE,
		},
		{
			name: "unknown trigger", olds: base(),
			news:    with("triggers", resource.NewArrayProperty([]resource.PropertyValue{unknown()})),
			changes: pulumirpc.DiffResponse_DIFF_SOME, replaces: []string{"triggers"}, diffs: []string{"triggers"},
			kind: pulumirpc.PropertyDiff_UPDATE_REPLACE,
		},
		{
			name: "unknown create", olds: base(), news: with("create", unknown()),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"create"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name: "unknown host inside the secret connection", olds: base(),
			news: with("connection", secret(resource.NewObjectProperty(resource.PropertyMap{
				"host": unknown(), "port": resource.NewNumberProperty(22), "user": str("root"),
				"privateKey": secret(str("KEY")),
			}))),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"connection"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name: "unknown connection", olds: base(), news: with("connection", secret(unknown())),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"connection"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		// Run settings alone are no diff: they change how the provider runs, not what runs on the host.
		{
			name: "dial settings changed", olds: with("connection", withDial(conn("10.0.0.1"), 20, 10)),
			news: with("connection", withDial(conn("10.0.0.1"), 10, 5)), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "dial settings added", olds: base(),
			news: with("connection", withDial(conn("10.0.0.1"), 10, 5)), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name:    "proxy dial settings changed",
			olds:    with("connection", withProxy(conn("10.0.0.1"), withDial(conn("10.0.0.9"), 20, 10))),
			news:    with("connection", withProxy(conn("10.0.0.1"), withDial(conn("10.0.0.9"), 3, 4))),
			changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "unreachableHint added", olds: base(),
			news: with("connection", withHint(conn("10.0.0.1"), "spark-b could not be reached")), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "addPreviousOutputInEnv changed", olds: base(),
			news: with("addPreviousOutputInEnv", resource.NewBoolProperty(false)), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "addPreviousOutputInEnv removed", olds: base(),
			news: with("addPreviousOutputInEnv", resource.NewNullProperty()), changes: pulumirpc.DiffResponse_DIFF_NONE,
		},
		{
			name: "host and dial settings changed", olds: with("connection", withDial(conn("10.0.0.1"), 20, 10)),
			news:    with("connection", withDial(conn("10.0.0.2"), 10, 5)),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"connection"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
		{
			name:    "proxy host changed",
			olds:    with("connection", withProxy(conn("10.0.0.1"), conn("10.0.0.9"))),
			news:    with("connection", withProxy(conn("10.0.0.1"), conn("10.0.0.8"))),
			changes: pulumirpc.DiffResponse_DIFF_SOME, diffs: []string{"connection"}, kind: pulumirpc.PropertyDiff_UPDATE,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := diff(t, p, c.olds, c.news)
			if resp.GetChanges() != c.changes {
				t.Fatalf("changes = %v, want %v (%v)", resp.GetChanges(), c.changes, resp)
			}
			if fmt.Sprint(resp.GetReplaces()) != fmt.Sprint(c.replaces) {
				t.Errorf("replaces = %v, want %v", resp.GetReplaces(), c.replaces)
			}
			if fmt.Sprint(resp.GetDiffs()) != fmt.Sprint(c.diffs) {
				t.Errorf("diffs = %v, want %v", resp.GetDiffs(), c.diffs)
			}
			if !resp.GetHasDetailedDiff() {
				t.Errorf("no detailed diff")
			}
			if len(c.diffs) == 1 {
				d := resp.GetDetailedDiff()[c.diffs[0]]
				if d == nil || d.GetKind() != c.kind || !d.GetInputDiff() {
					t.Errorf("detailed diff = %v, want kind %v", resp.GetDetailedDiff(), c.kind)
				}
			}
			if len(resp.GetDetailedDiff()) != len(c.diffs) {
				t.Errorf("detailed diff = %v", resp.GetDetailedDiff())
			}
		})
	}

	// The old state's outputs are not inputs: a Diff against a state (no old inputs) ignores stdout/stderr.
	state := base()
	state["stdout"] = str("out")
	state["stderr"] = str("")
	resp, err := p.Diff(context.Background(), &pulumirpc.DiffRequest{
		Urn: testURN, Type: StepToken, Olds: mustMarshal(t, state), News: mustMarshal(t, base()),
	})
	if err != nil || resp.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Errorf("diff against state = %v, %v", resp, err)
	}
}

func TestEnvironmentAndPreviousOutput(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	id, outs := mustCreate(t, p, resource.PropertyMap{
		"connection":  connectionTo(s, nil),
		"create":      str(`echo "$FOO-$BAR"; echo "prev=[$PULUMI_COMMAND_STDOUT]"`),
		"environment": resource.NewObjectProperty(resource.PropertyMap{"FOO": str("foo"), "BAR": str("bar")}),
	})
	if got := plain(t, outs["stdout"]); got != "foo-bar\nprev=[]" {
		t.Errorf("stdout = %q", got)
	}
	news := resource.PropertyMap{
		"connection":             connectionTo(s, nil),
		"create":                 str("true"),
		"update":                 str(`echo "prev-out=[$PULUMI_COMMAND_STDOUT] prev-err=[$PULUMI_COMMAND_STDERR]"`),
		"addPreviousOutputInEnv": resource.NewBoolProperty(true),
	}
	outs2, err := update(t, p, id, outs, news)
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(t, outs2["stdout"]); got != "prev-out=[foo-bar\nprev=[]] prev-err=[]" {
		t.Errorf("update stdout = %q", got)
	}

	// addPreviousOutputInEnv false, or left out (this package's default), leaves the variables unset.
	news["addPreviousOutputInEnv"] = resource.NewBoolProperty(false)
	outs3, err := update(t, p, id, outs2, news)
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(t, outs3["stdout"]); got != "prev-out=[] prev-err=[]" {
		t.Errorf("update stdout without previous output = %q", got)
	}
	delete(news, "addPreviousOutputInEnv")
	outs3, err = update(t, p, id, outs2, news)
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(t, outs3["stdout"]); got != "prev-out=[] prev-err=[]" {
		t.Errorf("update stdout with the default addPreviousOutputInEnv = %q", got)
	}

	// A server that refuses the previous-output variables: a warning, and the command still runs.
	s.refuseEnv["PULUMI_COMMAND_STDOUT"] = true
	logs.reset()
	news["addPreviousOutputInEnv"] = resource.NewBoolProperty(true)
	outs4, err := update(t, p, id, outs2, news)
	if err != nil {
		t.Fatalf("refused PULUMI_COMMAND_STDOUT should only warn: %v", err)
	}
	if got := plain(t, outs4["stdout"]); got != "prev-out=[] prev-err=[]" {
		t.Errorf("stdout = %q", got)
	}
	if w := logs.messages(pulumirpc.LogSeverity_WARNING); len(w) != 1 || !strings.Contains(w[0], "AcceptEnv") ||
		strings.Contains(w[0], "prev-out") {
		t.Errorf("warnings = %q", w)
	}

	// A refused user variable is an error mentioning AcceptEnv, without the value.
	s.refuseEnv["SECRET_TOKEN"] = true
	_, _, err = create(t, p, resource.PropertyMap{
		"connection":  connectionTo(s, nil),
		"create":      str("true"),
		"environment": resource.NewObjectProperty(resource.PropertyMap{"SECRET_TOKEN": secret(str("hunter2-value"))}),
	})
	if err == nil || !strings.Contains(err.Error(), "AcceptEnv") || !strings.Contains(err.Error(), "SECRET_TOKEN") ||
		strings.Contains(err.Error(), "hunter2-value") {
		t.Errorf("refused env: err = %v", err)
	}
}

func TestStdin(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	_, outs := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("tr a-z A-Z"),
		"stdin":      str("line one\nline two\n"),
	})
	if got := plain(t, outs["stdout"]); got != "LINE ONE\nLINE TWO" {
		t.Errorf("stdout = %q", got)
	}
	if got := s.lastStdin(); got != "line one\nline two\n" {
		t.Errorf("server stdin = %q", got)
	}
	// Without stdin, a command reading it sees EOF at once.
	_, outs = mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("cat; echo done")})
	if got := plain(t, outs["stdout"]); got != "done" {
		t.Errorf("stdout = %q", got)
	}
}

// A connection's sudoPassword goes before every script's own stdin (create, read, delete), with the marker line,
// never into the command line; changing it alone is no diff.
func TestSudoPasswordOnStdin(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	conn := func(pw string) resource.PropertyValue {
		return connectionTo(s, resource.PropertyMap{"sudoPassword": secret(str(pw))})
	}
	made := check(t, p, resource.PropertyMap{
		"connection": conn("pass word 1"),
		"create":     str("cat >/dev/null; echo made"),
		"stdin":      str("own input\n"),
		"read":       str("cat >/dev/null"),
		"delete":     str("cat >/dev/null"),
	})
	id, state := mustCreate(t, p, made)
	want := "pass word 1\n" + SudoStdinMarker + "\nown input\n"
	if got := s.lastStdin(); got != want {
		t.Errorf("create's stdin = %q, want %q", got, want)
	}
	_, _, cmds := s.stats()
	for _, cmd := range cmds {
		if strings.Contains(cmd, "pass word") {
			t.Errorf("the password is in a command line: %q", cmd)
		}
	}
	read(t, p, made, state)
	if got := s.lastStdin(); got != "pass word 1\n"+SudoStdinMarker+"\nmade" {
		t.Errorf("read's stdin = %q", got)
	}
	// A new password alone: no diff (nothing runs again).
	changed := made.Copy()
	changed["connection"] = conn("pass word 2")
	if d := diff(t, p, made, check(t, p, changed)); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Errorf("a changed sudoPassword is a diff: %v", d.GetDiffs())
	}
	// Delete runs with the latest inputs' password.
	if _, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state),
		OldInputs: mustMarshal(t, check(t, p, changed)),
	}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := s.lastStdin(); !strings.HasPrefix(got, "pass word 2\n"+SudoStdinMarker+"\n") {
		t.Errorf("delete's stdin = %q", got)
	}
	// Without one, stdin is the script's own.
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("cat"), "stdin": str("x")})
	if got := s.lastStdin(); got != "x" {
		t.Errorf("stdin without a sudo password = %q", got)
	}
}

func TestLoggingModes(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	cmd := str("echo to-stdout; echo to-stderr >&2")
	for _, c := range []struct {
		mode string
		want []string
	}{
		{"none", nil},
		{"stdout", []string{"to-stdout"}},
		{"stderr", []string{"to-stderr"}},
		{"stdoutAndStderr", []string{"to-stdout", "to-stderr"}},
	} {
		logs.reset()
		_, outs := mustCreate(t, p, resource.PropertyMap{
			"connection": connectionTo(s, nil), "create": cmd, "logging": str(c.mode),
		})
		if plain(t, outs["stdout"]) != "to-stdout" || plain(t, outs["stderr"]) != "to-stderr" {
			t.Errorf("%s: outputs not captured: %v", c.mode, outs)
		}
		got := logs.all()
		if c.mode == "none" {
			if len(got) != 0 {
				t.Errorf("logging none produced log calls: %+v", got)
			}
			continue
		}
		var msgs []string
		for _, e := range got {
			msgs = append(msgs, e.message)
		}
		if len(msgs) != len(c.want) {
			t.Errorf("%s: logged %q, want %q", c.mode, msgs, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(strings.Join(msgs, "\n"), w) {
				t.Errorf("%s: logged %q, want %q", c.mode, msgs, c.want)
			}
		}
	}

	// logging none also covers dial retries and failures.
	logs.reset()
	_, _, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{"port": resource.NewNumberProperty(float64(closedPort(t)))}),
		"create":     str("true"),
		"logging":    str("none"),
	})
	if err == nil {
		t.Fatal("expected a dial error")
	}
	if got := logs.all(); len(got) != 0 {
		t.Errorf("logging none produced log calls: %+v", got)
	}
}

func TestFailingCommand(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	start := time.Now()
	_, _, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str(`echo visible-output; echo "token=$TOKEN"; echo error-output >&2; exit 3`),
		"environment": resource.NewObjectProperty(resource.PropertyMap{
			"TOKEN": secret(str("s3cr3t-token-value")),
		}),
	})
	if err == nil {
		t.Fatal("expected an error")
	}
	msg := err.Error()
	for _, want := range []string{"status 3", "visible-output", "error-output", "token=[secret]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	for _, leak := range append(strings.Split(strings.TrimSpace(s.clientKeyPEM), "\n")[1:3], "s3cr3t-token-value") {
		if strings.Contains(msg, leak) {
			t.Errorf("error leaks a secret: %q", msg)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("failing command took %s", time.Since(start))
	}

	// With logging "none" the output is left out of the error.
	_, _, err = create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str(`echo private-output; exit 5`),
		"logging":    str("none"),
	})
	if err == nil || !strings.Contains(err.Error(), "status 5") || strings.Contains(err.Error(), "private-output") {
		t.Errorf("logging none: err = %v", err)
	}
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func TestDialErrorLimit(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	port := closedPort(t)
	start := time.Now()
	_, _, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{
			"port":           resource.NewNumberProperty(float64(port)),
			"dialErrorLimit": resource.NewNumberProperty(3),
		}),
		"create": str("true"),
	})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("expected a dial error")
	}
	if !strings.Contains(err.Error(), "after 3 attempt(s) in ") || !strings.Contains(err.Error(), "refused") ||
		!strings.Contains(err.Error(), "(connection.dialErrorLimit 3, perDialTimeout 5s)") {
		t.Errorf("err = %v", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("dialing took %s", elapsed)
	}
	if d := logs.messages(pulumirpc.LogSeverity_DEBUG); len(d) != 2 || !strings.Contains(d[0], "attempt 1/3") {
		t.Errorf("debug logs = %q", d)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("error leaks the key: %v", err)
	}
}

// A connection's unreachableHint ends the error of a host that cannot be reached, and nothing else's.
func TestUnreachableHint(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	hint := "spark-b (nodes[1]) could not be reached: set nodes[1].retired: true"
	_, _, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{
			"port":            resource.NewNumberProperty(float64(closedPort(t))),
			"dialErrorLimit":  resource.NewNumberProperty(1),
			"unreachableHint": str(hint),
		}),
		"create": str("true"),
	})
	if err == nil || !strings.HasSuffix(err.Error(), "refused\n"+hint) || !strings.Contains(err.Error(), "after 1 attempt(s)") {
		t.Errorf("err = %v", err)
	}
	// A host that answers: the hint is in no output.
	_, state := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{"unreachableHint": str(hint)}),
		"create":     str("echo made"),
	})
	if out, _ := unwrapSecret(state["stdout"]); out.StringValue() != "made" {
		t.Errorf("stdout = %v", state["stdout"])
	}
	// A wrong type is refused by Check.
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn: testURN, Type: StepToken, Name: "test", News: mustMarshal(t, resource.PropertyMap{
			"connection": connectionTo(s, resource.PropertyMap{"unreachableHint": resource.NewNumberProperty(1)}),
			"create":     str("true"),
		}),
	})
	if err != nil || len(resp.GetFailures()) != 1 || resp.GetFailures()[0].GetProperty() != "connection.unreachableHint" {
		t.Errorf("check: %v, failures = %v", err, resp.GetFailures())
	}
}

func TestPerDialTimeout(t *testing.T) {
	// A server that accepts TCP connections and never speaks SSH.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	p, _ := newTestProvider(t)
	start := time.Now()
	_, _, err = create(t, p, resource.PropertyMap{
		"connection": secret(resource.NewObjectProperty(resource.PropertyMap{
			"host":           str("127.0.0.1"),
			"port":           resource.NewNumberProperty(float64(l.Addr().(*net.TCPAddr).Port)),
			"password":       str("pw-not-used"),
			"dialErrorLimit": resource.NewNumberProperty(2),
			"perDialTimeout": resource.NewNumberProperty(1),
		})),
		"create": str("true"),
	})
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "after 2 attempt(s)") {
		t.Fatalf("err = %v", err)
	}
	if elapsed < 2*time.Second || elapsed > 8*time.Second {
		t.Errorf("2 attempts of 1s took %s", elapsed)
	}
	mu.Lock()
	n := len(held)
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d connection attempts, want 2", n)
	}
}

func TestSecretOutputs(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	cases := []struct {
		name       string
		inputs     resource.PropertyMap
		wantSecret bool
	}{
		{"plain", resource.PropertyMap{"create": str("cat"), "stdin": str("x")}, false},
		{"secret stdin", resource.PropertyMap{"create": str("cat"), "stdin": secret(str("sekrit"))}, true},
		{"secret command", resource.PropertyMap{"create": secret(str("echo sekrit"))}, true},
		{"secret env", resource.PropertyMap{
			"create":      str(`echo "$V"`),
			"environment": resource.NewObjectProperty(resource.PropertyMap{"V": secret(str("sekrit"))}),
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs.Copy()
			in["connection"] = connectionTo(s, nil)
			_, outs := mustCreate(t, p, in)
			if plain(t, outs["stdout"]) == "" {
				t.Errorf("no stdout")
			}
			if outs["stdout"].IsSecret() != c.wantSecret || outs["stderr"].IsSecret() != c.wantSecret {
				t.Errorf("stdout secret = %v, stderr secret = %v, want %v",
					outs["stdout"].IsSecret(), outs["stderr"].IsSecret(), c.wantSecret)
			}
			for k, v := range c.inputs {
				if slices.Contains(notEchoedKeys, k) {
					continue // not in the outputs at all
				}
				if v.ContainsSecrets() && !outs[k].ContainsSecrets() {
					t.Errorf("input %s lost its secretness in outputs", k)
				}
			}
		})
	}

	// The connection is secret in the checked inputs even when the program did not wrap it, and the outputs
	// leave it out.
	in := check(t, p, resource.PropertyMap{"connection": stripSecrets(connectionTo(s, nil)), "create": str("echo hi")})
	if !in["connection"].IsSecret() {
		t.Errorf("connection not secret in the checked inputs: %v", in["connection"])
	}
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, in),
	})
	if err != nil {
		t.Fatal(err)
	}
	if outs := mustUnmarshal(t, resp.GetProperties()); !outs["connection"].IsNull() {
		t.Errorf("the outputs echo the connection: %v", outs["connection"])
	}
}

func TestAuthenticationAndHostKey(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	run := func(extra resource.PropertyMap) error {
		_, _, err := create(t, p, resource.PropertyMap{
			"connection": connectionTo(s, extra),
			"create":     str("echo ok"),
		})
		return err
	}
	// Password authentication.
	if err := run(resource.PropertyMap{
		"privateKey": resource.NewNullProperty(), "password": secret(str(s.password)),
	}); err != nil {
		t.Errorf("password auth: %v", err)
	}
	// Wrong password: an error that does not contain the password.
	err := run(resource.PropertyMap{
		"privateKey": resource.NewNullProperty(), "password": str("wrong-password-123"),
		"dialErrorLimit": resource.NewNumberProperty(1),
	})
	if err == nil || strings.Contains(err.Error(), "wrong-password-123") {
		t.Errorf("wrong password: err = %v", err)
	}
	if err := run(resource.PropertyMap{"hostKey": str(s.authorizedHostKey())}); err != nil {
		t.Errorf("matching host key: %v", err)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ssh.NewPublicKey(other)
	err = run(resource.PropertyMap{
		"hostKey":        str(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(otherKey)))),
		"dialErrorLimit": resource.NewNumberProperty(1),
	})
	if err == nil || !strings.Contains(err.Error(), "host key") {
		t.Errorf("mismatching host key: err = %v", err)
	}
	// A changed host key is not retried (retrying cannot help), and the error names both fingerprints.
	start := time.Now()
	err = run(resource.PropertyMap{
		"hostKey":        str(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(otherKey)))),
		"dialErrorLimit": resource.NewNumberProperty(20),
	})
	if err == nil || !strings.Contains(err.Error(), "has changed: expected "+ssh.FingerprintSHA256(otherKey)) || !strings.Contains(err.Error(), "Nothing was run there") {
		t.Errorf("changed host key: err = %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("a changed host key was retried for %s", elapsed)
	}
	// A private key that cannot be parsed: the error does not quote it.
	err = run(resource.PropertyMap{"privateKey": str("-----BEGIN GARBAGE-----\nnot-a-key-material\n")})
	if err == nil || strings.Contains(err.Error(), "not-a-key-material") {
		t.Errorf("bad key: err = %v", err)
	}
}

func TestEncryptedPrivateKey(t *testing.T) {
	s2 := newTestSSHServer(t)
	// An additional client key, stored encrypted.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	s2.authorize(pub)
	encrypted := marshalEd25519PEM(t, priv, "pass phrase")
	p, _ := newTestProvider(t)
	_, outs, err := create(t, p, resource.PropertyMap{
		"connection": connectionTo(s2, resource.PropertyMap{
			"privateKey": str(encrypted), "privateKeyPassword": str("pass phrase"),
		}),
		"create": str("echo encrypted-ok"),
	})
	if err != nil {
		t.Fatalf("encrypted key: %v", err)
	}
	if plain(t, outs["stdout"]) != "encrypted-ok" {
		t.Errorf("stdout = %v", outs["stdout"])
	}
	_, _, err = create(t, p, resource.PropertyMap{
		"connection": connectionTo(s2, resource.PropertyMap{"privateKey": str(encrypted)}),
		"create":     str("true"),
	})
	if err == nil || !strings.Contains(err.Error(), "privateKeyPassword") {
		t.Errorf("encrypted key without passphrase: err = %v", err)
	}
}

func TestProxyConnection(t *testing.T) {
	target := newTestSSHServer(t)
	bastion := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	proxy := stripSecrets(connectionTo(bastion, nil))
	_, outs := mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(target, resource.PropertyMap{"proxy": proxy}),
		"create":     str("echo via-bastion"),
	})
	if plain(t, outs["stdout"]) != "via-bastion" {
		t.Errorf("stdout = %v", outs["stdout"])
	}
	bastion.mu.Lock()
	forwards := append([]string(nil), bastion.forwards...)
	bastion.mu.Unlock()
	if len(forwards) != 1 || forwards[0] != target.addr {
		t.Errorf("bastion forwards = %v, want [%s]", forwards, target.addr)
	}
	if _, _, cmds := bastion.stats(); len(cmds) != 0 {
		t.Errorf("command ran on the bastion: %v", cmds)
	}
}

func TestReadReturnsState(t *testing.T) {
	p, _ := newTestProvider(t)
	state := mustMarshal(t, resource.PropertyMap{"stdout": str("x"), "connection": secret(str("c"))})
	inputs := mustMarshal(t, resource.PropertyMap{"connection": secret(str("c"))})
	resp, err := p.Read(context.Background(), &pulumirpc.ReadRequest{
		Id: "abc", Urn: testURN, Type: StepToken, Properties: state, Inputs: inputs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != "abc" || !mustUnmarshal(t, resp.GetProperties()).DeepEquals(mustUnmarshal(t, state)) ||
		!mustUnmarshal(t, resp.GetInputs()).DeepEquals(mustUnmarshal(t, inputs)) {
		t.Errorf("Read = %v", resp)
	}
}

// read runs Read like a refresh does, with the state and inputs a create recorded.
func read(t *testing.T, p *Provider, inputs, state resource.PropertyMap) (resource.PropertyMap, resource.PropertyMap) {
	t.Helper()
	resp, err := p.Read(context.Background(), &pulumirpc.ReadRequest{
		Id: "test-1234", Urn: testURN, Type: StepToken,
		Properties: mustMarshal(t, state), Inputs: mustMarshal(t, inputs),
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return mustUnmarshal(t, resp.GetInputs()), mustUnmarshal(t, resp.GetProperties())
}

func TestReadReportsDrift(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	dir := t.TempDir()
	marker := dir + "/drifted"
	inputs := check(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo made; rm -f " + marker),
		// Reports what differs; gets the last run's stdout on stdin.
		"read": str("in=$(cat); [ \"$in\" = made ] || echo \"stdin was $in\"; " +
			"if [ -e " + marker + " ]; then echo \"$(cat " + marker + ")\"; fi"),
	})
	_, state := mustCreate(t, p, inputs)

	// Clean: the state comes back as it is (a refresh of a clean host is a no-op).
	gotIn, gotState := read(t, p, inputs, state)
	if !gotIn.DeepEquals(inputs) || !gotState.DeepEquals(state) {
		t.Fatalf("clean read changed the state: %v / %v", gotIn, gotState)
	}
	if n := len(s.stdins); n == 0 || s.stdins[n-1] != "made" {
		t.Errorf("read's stdin = %q, want the last run's stdout", s.stdins)
	}

	// Drifted: the read's lines become `drift`, in inputs and outputs, and one warning names resource and host.
	if err := os.WriteFile(marker, []byte("/etc/x: edited\nunit y: stopped"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.reset()
	gotIn, gotState = read(t, p, inputs, state)
	if plain(t, gotIn["drift"]) != "/etc/x: edited\nunit y: stopped" || plain(t, gotState["drift"]) != plain(t, gotIn["drift"]) {
		t.Errorf("drift = %v / %v", gotIn["drift"], gotState["drift"])
	}
	warns := logs.messages(pulumirpc.LogSeverity_WARNING)
	if len(warns) != 1 || !strings.Contains(warns[0], "test on tester@127.0.0.1:") || !strings.Contains(warns[0], "/etc/x: edited") {
		t.Errorf("warnings = %q", warns)
	}
	if info := logs.messages(pulumirpc.LogSeverity_INFO); len(info) != 0 {
		t.Errorf("the read's output was streamed: %q", info)
	}

	// The next up: the program's inputs have no drift, so the diff updates the command, which runs create again.
	d := diff(t, p, gotIn, inputs)
	if d.GetChanges() != pulumirpc.DiffResponse_DIFF_SOME || len(d.GetDiffs()) != 1 || d.GetDiffs()[0] != "drift" ||
		d.GetDetailedDiff()["drift"].GetKind() != pulumirpc.PropertyDiff_DELETE {
		t.Errorf("diff after drift = %v", d)
	}
	repaired, err := update(t, p, "test-1234", gotState, inputs)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := repaired["drift"]; ok {
		t.Errorf("outputs after the repair keep drift: %v", repaired)
	}
	gotIn, gotState = read(t, p, inputs, repaired)
	if !gotIn.DeepEquals(inputs) || !gotState.DeepEquals(repaired) {
		t.Errorf("read after the repair: %v / %v", gotIn, gotState)
	}

	// A refresh of a drifted state that reads back clean drops the recorded drift.
	drifted := inputs.Copy()
	drifted["drift"] = str("old finding")
	driftedState := repaired.Copy()
	driftedState["drift"] = str("old finding")
	gotIn, gotState = read(t, p, drifted, driftedState)
	if _, ok := gotIn["drift"]; ok || !gotState.DeepEquals(repaired) {
		t.Errorf("clean read kept the old drift: %v / %v", gotIn, gotState)
	}

	// A failing read is drift too, with its exit status and output.
	failing := inputs.Copy()
	failing["read"] = str("echo broken >&2; exit 3")
	gotIn, _ = read(t, p, failing, state)
	if v := plain(t, gotIn["drift"]); !strings.HasPrefix(v, "not read: remote command failed on tester@127.0.0.1:") ||
		!strings.Contains(v, "exited with status 3") || !strings.Contains(v, "broken") {
		t.Errorf("failing read drift = %q", v)
	}
}

// A step with logging "none" (a secrets file's) still says what its read found: the state holds it in plain text anyway.
func TestReadOfAStepThatLogsNothingStillWarnsOfDrift(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	inputs := check(t, p, resource.PropertyMap{
		"connection": connectionTo(s, nil),
		"create":     str("echo made"),
		"read":       str("echo '/etc/spark-cluster/vllm.env: mode 644, want 600'"),
		"logging":    str("none"),
	})
	_, state := mustCreate(t, p, inputs)
	logs.reset()
	gotIn, _ := read(t, p, inputs, state)
	if plain(t, gotIn["drift"]) != "/etc/spark-cluster/vllm.env: mode 644, want 600" {
		t.Errorf("drift = %v", gotIn["drift"])
	}
	warns := logs.messages(pulumirpc.LogSeverity_WARNING)
	if len(warns) != 1 || !strings.Contains(warns[0], "vllm.env: mode 644, want 600") {
		t.Errorf("warnings = %q", warns)
	}
	if got := logs.all(); len(got) != 1 {
		t.Errorf("logging none logged more than the drift: %+v", got)
	}
}

func TestReadOfAnUnreachableHostIsDrift(t *testing.T) {
	s := newTestSSHServer(t)
	p, logs := newTestProvider(t)
	port := closedPort(t)
	inputs := check(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{"port": resource.NewNumberProperty(float64(port))}),
		"create":     str("true"),
		"read":       str("true"),
	})
	state := buildOutputs(inputs, str(""), str(""), resource.NewNullProperty())
	start := time.Now()
	gotIn, gotState := read(t, p, inputs, state)
	if time.Since(start) > 5*time.Second {
		t.Errorf("the read took %s", time.Since(start))
	}
	want := fmt.Sprintf("not read: failed to connect to host tester@127.0.0.1:%d after 2 attempt(s)", port)
	for _, v := range []resource.PropertyValue{gotIn["drift"], gotState["drift"]} {
		if got := plain(t, v); !strings.Contains(got, want) || !strings.Contains(got, "refused") {
			t.Errorf("drift = %q, want it to contain %q", got, want)
		}
	}
	if w := logs.messages(pulumirpc.LogSeverity_WARNING); len(w) != 1 || !strings.HasPrefix(w[0], "test on tester@127.0.0.1:") ||
		!strings.Contains(w[0], " was not read back: failed to connect") || strings.Contains(w[0], "PRIVATE KEY") {
		t.Errorf("warnings = %q", w)
	}
}

func TestReadOnlyIsNoDiff(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	olds := check(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")})
	news := olds.Copy()
	news["read"] = str("true")
	if d := diff(t, p, olds, news); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Errorf("adding read: %v", d)
	}
	if d := diff(t, p, news, olds); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Errorf("removing read: %v", d)
	}
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn: testURN, Type: StepToken, Name: "test",
		News: mustMarshal(t, resource.PropertyMap{"connection": connectionTo(s, nil), "read": resource.NewNumberProperty(1)}),
	})
	if err != nil || len(resp.GetFailures()) != 1 || resp.GetFailures()[0].GetProperty() != "read" {
		t.Errorf("Check of a numeric read: %v %v", resp.GetFailures(), err)
	}
}

func TestCancelAbortsRunningCommand(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := create(t, p, resource.PropertyMap{
			"connection": connectionTo(s, nil), "create": str("sleep 30"),
		})
		done <- err
	}()
	for i := 0; ; i++ {
		if _, sessions, _ := s.stats(); sessions > 0 {
			break
		}
		if i > 200 {
			t.Fatal("command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := p.Cancel(context.Background(), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cancel") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Cancel did not abort the command")
	}
}

// A Delete runs with the stored connection and command, but with the run settings of the resource's latest inputs:
// an `up` that changed only those (no diff, nothing ran) recorded them in the inputs alone.
func TestDeleteTakesRunSettingsFromLatestInputs(t *testing.T) {
	s := newTestSSHServer(t)
	s.refuseEnv["PULUMI_COMMAND_STDOUT"] = true
	p, logs := newTestProvider(t)
	deleteCmd := `echo "prev=[$PULUMI_COMMAND_STDOUT]"`
	made := resource.PropertyMap{
		"connection":             connectionTo(s, nil),
		"create":                 str("echo made"),
		"delete":                 str(deleteCmd),
		"addPreviousOutputInEnv": resource.NewBoolProperty(true),
	}
	id, state := mustCreate(t, p, made)
	madeInputs := check(t, p, made)
	if v, _ := unwrapSecret(state["addPreviousOutputInEnv"]); !v.IsBool() || !v.BoolValue() {
		t.Fatalf("the state records addPreviousOutputInEnv: true, got %v", state["addPreviousOutputInEnv"])
	}
	runDelete := func(state, inputs resource.PropertyMap) error {
		req := &pulumirpc.DeleteRequest{Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, state)}
		if inputs != nil {
			req.OldInputs = mustMarshal(t, inputs)
		}
		_, err := p.Delete(context.Background(), req)
		return err
	}

	// With the inputs it was made with: the stored setting, so the refused variable is a warning (upstream behaviour).
	if err := runDelete(state, madeInputs); err != nil {
		t.Fatal(err)
	}
	if w := logs.messages(pulumirpc.LogSeverity_WARNING); len(w) != 1 || !strings.Contains(w[0], "AcceptEnv") {
		t.Errorf("warnings = %q", w)
	}

	// The latest inputs say addPreviousOutputInEnv: false: nothing is asked of sshd, no warning.
	logs.reset()
	latest := check(t, p, resource.PropertyMap{
		"connection":             connectionTo(s, nil),
		"create":                 str("echo made"),
		"delete":                 str(deleteCmd),
		"addPreviousOutputInEnv": resource.NewBoolProperty(false),
	})
	if err := runDelete(state, latest); err != nil {
		t.Fatal(err)
	}
	if w := logs.messages(pulumirpc.LogSeverity_WARNING); len(w) != 0 {
		t.Errorf("warnings with addPreviousOutputInEnv false = %q", w)
	}
	if env := s.lastEnv(); len(env) != 0 {
		t.Errorf("delete env = %v", env)
	}
	if _, _, cmds := s.stats(); cmds[len(cmds)-1] != deleteCmd {
		t.Errorf("the stored delete command ran? %q", cmds)
	}

	// Dial settings come from the latest inputs too: the stored state allows 4 attempts, the inputs 1.
	port := closedPort(t)
	dead := func(limit float64) resource.PropertyValue {
		return connectionTo(s, resource.PropertyMap{
			"port":           resource.NewNumberProperty(float64(port)),
			"dialErrorLimit": resource.NewNumberProperty(limit),
		})
	}
	stored := state.Copy() // as an earlier build wrote it, with the connection of the last run in the outputs
	stored["connection"] = dead(4)
	inputs := madeInputs.Copy()
	inputs["connection"] = withHint(dead(1), "what to do next")
	err := runDelete(stored, inputs)
	if err == nil || !strings.Contains(err.Error(), "after 1 attempt(s)") || !strings.HasSuffix(err.Error(), "\nwhat to do next") {
		t.Errorf("delete with the latest dial settings and hint: err = %v", err)
	}
	// Inputs for another host are not taken: the stored connection is what Delete uses.
	inputs["connection"] = connectionTo(s, resource.PropertyMap{"dialErrorLimit": resource.NewNumberProperty(1)})
	err = runDelete(stored, inputs)
	if err == nil || !strings.Contains(err.Error(), "after 4 attempt(s)") {
		t.Errorf("delete with inputs for another address: err = %v", err)
	}
}

// A state written by an earlier build echoes the scripts and the connection in its outputs; its Delete runs the same.
func TestDeleteOfAStateThatEchoesItsScripts(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	made := resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo made"), "delete": str("echo gone")}
	id, outs := mustCreate(t, p, made)
	inputs := check(t, p, made)
	old := outs.Copy()
	old["create"], old["delete"], old["connection"] = inputs["create"], inputs["delete"], inputs["connection"]
	for _, oldInputs := range []resource.PropertyMap{inputs, nil} {
		req := &pulumirpc.DeleteRequest{Id: id, Urn: testURN, Type: StepToken, Properties: mustMarshal(t, old)}
		if oldInputs != nil {
			req.OldInputs = mustMarshal(t, oldInputs)
		}
		if _, err := p.Delete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if _, _, cmds := s.stats(); cmds[len(cmds)-1] != "echo gone" {
			t.Errorf("commands = %q", cmds)
		}
	}
}
