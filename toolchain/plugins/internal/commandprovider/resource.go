package commandprovider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil/rpcerror"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// typeOf is a request's resource type: its own field, or the type in its URN.
func typeOf(typ, urn string) string {
	if typ == "" && urn != "" {
		if u, err := resource.ParseURN(urn); err == nil {
			typ = string(u.Type())
		}
	}
	return typ
}

// checkType fails for every resource type but spark-remote:index:Step and spark-remote:index:RandomSecret.
func checkType(typ, urn string) error {
	if t := typeOf(typ, urn); t != StepToken && t != RandomSecretToken {
		return fmt.Errorf("%s is not implemented by the %s provider (only %s and %s)", t, PackageName, StepToken, RandomSecretToken)
	}
	return nil
}

// createInputs are a Create request's inputs and the new resource's ID (its name and a random suffix).
func createInputs(req *pulumirpc.CreateRequest) (resource.PropertyMap, string, error) {
	news, err := unmarshal("properties", req.GetProperties())
	if err != nil {
		return nil, "", err
	}
	id, err := resource.NewUniqueHex(resourceName(req.GetName(), req.GetUrn()), 8, 0)
	if err != nil {
		return nil, "", err
	}
	return news, id, nil
}

// isRandomSecret: the request is for a RandomSecret (randomsecret.go), not a Step.
func isRandomSecret(typ, urn string) bool { return typeOf(typ, urn) == RandomSecretToken }

func resourceName(name, urn string) string {
	if name != "" {
		return name
	}
	if u, err := resource.ParseURN(urn); err == nil {
		return u.Name()
	}
	return "command"
}

// Check validates the inputs and applies the defaults (the connection's, as the SDK does too, and
// addPreviousOutputInEnv's).
func (p *Provider) Check(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.checkRandomSecret(req)
	}
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	news = news.Copy()
	var failures checkFailures
	fail, failErr := failures.add, failures.addErr

	if conn, ok := news[keyConnection]; !ok || conn.IsNull() {
		fail(string(keyConnection), "missing required property 'connection'")
	} else {
		// The connection is secret (it holds the credentials), whatever the program marked.
		news[keyConnection] = ensureSecret(checkConnection(conn, string(keyConnection), true, fail))
	}

	for _, k := range []resource.PropertyKey{keyCreate, keyUpdate, keyDelete, keyStdin, keyRead} {
		if _, err := optString(news, k, string(k)); err != nil && !news[k].ContainsUnknowns() {
			failErr(err)
		}
	}
	if v, _ := unwrapSecret(news[keyLogging]); v.IsString() {
		if !validLogging(v.StringValue()) {
			fail(string(keyLogging), fmt.Sprintf("must be one of %q, %q, %q or %q",
				LoggingStdout, LoggingStderr, LoggingStdoutAndStderr, LoggingNone))
		}
	} else if !v.IsNull() && !v.IsComputed() {
		fail(string(keyLogging), "expected a string, got "+v.TypeString())
	}
	if v, _ := unwrapSecret(news[keyAddPreviousOutputInEnv]); v.IsNull() {
		news[keyAddPreviousOutputInEnv] = resource.NewBoolProperty(defaultAddPreviousOutputInEnv)
	} else if !v.IsBool() && !v.IsComputed() {
		fail(string(keyAddPreviousOutputInEnv), "expected a boolean, got "+v.TypeString())
	}
	if v, _ := unwrapSecret(news[keyEnvironment]); v.IsObject() {
		env := v.ObjectValue()
		for _, k := range env.StableKeys() {
			if e, _ := unwrapSecret(env[k]); !e.IsString() && !e.IsNull() && !e.IsComputed() {
				fail(fmt.Sprintf("%s.%s", keyEnvironment, k), "expected a string, got "+e.TypeString())
			}
		}
	} else if !v.IsNull() && !v.IsComputed() {
		fail(string(keyEnvironment), "expected a map of strings, got "+v.TypeString())
	}
	if v, _ := unwrapSecret(news[keyTriggers]); !v.IsNull() && !v.IsArray() && !v.IsComputed() {
		fail(string(keyTriggers), "expected an array, got "+v.TypeString())
	}

	inputs, err := marshal("inputs", news)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CheckResponse{Inputs: inputs, Failures: failures}, nil
}

// checkConnection validates a connection object and fills in its defaults, keeping secret wrappers.
func checkConnection(v resource.PropertyValue, path string, allowProxy bool,
	fail func(path, reason string),
) resource.PropertyValue {
	inner, secret := unwrapSecret(v)
	if inner.IsComputed() {
		return v
	}
	if !inner.IsObject() {
		fail(path, "expected an object, got "+inner.TypeString())
		return v
	}
	obj := inner.ObjectValue().Copy()
	host, _ := unwrapSecret(obj["host"])
	switch {
	case host.IsNull() || (host.IsString() && host.StringValue() == ""):
		fail(path+".host", "missing required property 'host'")
	case !host.IsString() && !host.IsComputed():
		fail(path+".host", "expected a string, got "+host.TypeString())
	}
	for _, d := range []struct {
		key resource.PropertyKey
		def resource.PropertyValue
	}{
		{"port", resource.NewNumberProperty(defaultPort)},
		{"user", resource.NewStringProperty(defaultUser)},
		{"dialErrorLimit", resource.NewNumberProperty(defaultDialErrorLimit)},
		{"perDialTimeout", resource.NewNumberProperty(defaultPerDialTimeout)},
	} {
		if cur, _ := unwrapSecret(obj[d.key]); cur.IsNull() {
			obj[d.key] = d.def
		}
	}
	for _, k := range []resource.PropertyKey{"port", "dialErrorLimit", "perDialTimeout"} {
		if _, err := optInt(obj, k, path+"."+string(k), 0); err != nil && !obj[k].ContainsUnknowns() {
			var pe *propertyError
			if errors.As(err, &pe) {
				fail(pe.path, pe.reason)
			}
		}
	}
	for _, k := range []resource.PropertyKey{
		"user", "password", "privateKey", "privateKeyPassword", "agentSocketPath", "hostKey", keyUnreachableHint, keySudoPassword,
	} {
		if _, err := optString(obj, k, path+"."+string(k)); err != nil && !obj[k].ContainsUnknowns() {
			var pe *propertyError
			if errors.As(err, &pe) {
				fail(pe.path, pe.reason)
			}
		}
	}
	// An empty pin is refused here, where the program learns of it at preview, and again at dial (newHostKeyCheck).
	if hostKey, _ := unwrapSecret(obj["hostKey"]); hostKey.IsString() && strings.TrimSpace(hostKey.StringValue()) == "" {
		fail(path+".hostKey", emptyHostKeyReason(path+".hostKey"))
	}
	if proxy, _ := unwrapSecret(obj["proxy"]); !proxy.IsNull() {
		if allowProxy {
			obj["proxy"] = checkConnection(obj["proxy"], path+".proxy", false, fail)
		} else {
			fail(path+".proxy", "a proxy connection cannot have a proxy itself")
		}
	}
	out := resource.NewObjectProperty(obj)
	if secret {
		out = resource.MakeSecret(out)
	}
	return out
}

// oldInputsOf returns the old inputs of a Diff: the recorded inputs when the engine sends them, else the old state
// without the outputs.
func oldInputsOf(req *pulumirpc.DiffRequest) (resource.PropertyMap, error) {
	if oi := req.GetOldInputs(); oi != nil && len(oi.GetFields()) > 0 {
		return unmarshal("oldInputs", oi)
	}
	olds, err := unmarshal("olds", req.GetOlds())
	if err != nil {
		return nil, err
	}
	olds = olds.Copy()
	delete(olds, keyStdout)
	delete(olds, keyStderr)
	delete(olds, keyPresentedHostKey)
	return olds, nil
}

// runSettings are the inputs that only say how the provider runs a command, not what runs on the host: how it dials
// (connection.dialErrorLimit, connection.perDialTimeout, and the proxy's), whether the previous output is exported
// to the next run (addPreviousOutputInEnv), and what a refresh runs to read the host back (read). Changing them is
// no diff (upstream re-runs the command for it): a program can tighten how long a step waits for a node that is
// gone, stop asking for PULUMI_COMMAND_STDOUT, or get read-backs, without running every command of a deployed
// stack again. The engine records the new inputs all the same, and Delete reads
// these settings from them (see deleteSettings).
var dialSettingKeys = []resource.PropertyKey{"dialErrorLimit", "perDialTimeout", keyUnreachableHint, keySudoPassword}

// withoutDialSettings is a connection without its dial settings (and its proxy's), for comparison.
func withoutDialSettings(v resource.PropertyValue) resource.PropertyValue {
	inner, _ := unwrapSecret(v)
	if !inner.IsObject() {
		return v
	}
	m := inner.ObjectValue().Copy()
	for _, k := range dialSettingKeys {
		delete(m, k)
	}
	if proxy, ok := m["proxy"]; ok {
		m["proxy"] = withoutDialSettings(proxy)
	}
	return resource.NewObjectProperty(m)
}

// Diff: a change of `triggers` replaces the command, a change of any other input updates it (running `update`, or
// `create` again), except a change of the run settings alone (see dialSettingKeys). Secret wrappers are ignored in
// the comparison; an unknown new value counts as a change.
func (p *Provider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.diffRandomSecret(req)
	}
	olds, err := oldInputsOf(req)
	if err != nil {
		return nil, err
	}
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	for _, k := range req.GetIgnoreChanges() {
		ignored[k] = true
	}

	keys := map[resource.PropertyKey]bool{}
	for k := range olds {
		keys[k] = true
	}
	for k := range news {
		keys[k] = true
	}
	delete(keys, keyStdout)
	delete(keys, keyStderr)
	delete(keys, keyPresentedHostKey)
	delete(keys, keyAddPreviousOutputInEnv)
	delete(keys, keyRead)
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, string(k))
	}
	sort.Strings(sorted)

	resp := &pulumirpc.DiffResponse{
		Changes:         pulumirpc.DiffResponse_DIFF_NONE,
		DetailedDiff:    map[string]*pulumirpc.PropertyDiff{},
		HasDetailedDiff: true,
	}
	for _, name := range sorted {
		if ignored[name] {
			continue
		}
		k := resource.PropertyKey(name)
		o, n := olds[k], news[k]
		if k == keyConnection && !n.ContainsUnknowns() {
			o, n = withoutDialSettings(o), withoutDialSettings(n)
		}
		oldNull := stripSecrets(o).IsNull()
		newNull := stripSecrets(n).IsNull()
		if !n.ContainsUnknowns() && stripSecrets(o).DeepEquals(stripSecrets(n)) {
			continue
		}
		if oldNull && newNull {
			continue
		}
		kind := pulumirpc.PropertyDiff_UPDATE
		switch {
		case oldNull:
			kind = pulumirpc.PropertyDiff_ADD
		case newNull:
			kind = pulumirpc.PropertyDiff_DELETE
		}
		if k == keyTriggers {
			kind = map[pulumirpc.PropertyDiff_Kind]pulumirpc.PropertyDiff_Kind{
				pulumirpc.PropertyDiff_ADD:    pulumirpc.PropertyDiff_ADD_REPLACE,
				pulumirpc.PropertyDiff_DELETE: pulumirpc.PropertyDiff_DELETE_REPLACE,
				pulumirpc.PropertyDiff_UPDATE: pulumirpc.PropertyDiff_UPDATE_REPLACE,
			}[kind]
			resp.Replaces = append(resp.Replaces, name)
		}
		resp.DetailedDiff[name] = &pulumirpc.PropertyDiff{Kind: kind, InputDiff: true}
		resp.Diffs = append(resp.Diffs, name)
		resp.Changes = pulumirpc.DiffResponse_DIFF_SOME
	}
	return resp, nil
}

// outputsTainted reports whether stdout/stderr must be secret: the command, its stdin or its environment contain a
// secret.
func outputsTainted(inputs resource.PropertyMap) bool {
	for _, k := range []resource.PropertyKey{keyCreate, keyUpdate, keyStdin, keyEnvironment} {
		if inputs[k].ContainsSecrets() {
			return true
		}
	}
	return false
}

// buildOutputs is the state of a command: its inputs but the ones kept in the inputs only (notEchoedKeys), keeping
// their secretness, plus stdout, stderr and the host's key (presentedHostKey; left out when null: the step never
// ran on a host). The key is public, and not secret even when the outputs are.
func buildOutputs(inputs resource.PropertyMap, stdout, stderr, hostKey resource.PropertyValue) resource.PropertyMap {
	outs := inputs.Copy()
	delete(outs, keyStdout)
	delete(outs, keyStderr)
	delete(outs, keyPresentedHostKey)
	for _, k := range notEchoedKeys {
		delete(outs, k)
	}
	if outputsTainted(inputs) {
		stdout, stderr = ensureSecret(stdout), ensureSecret(stderr)
	}
	outs[keyStdout] = stdout
	outs[keyStderr] = stderr
	if !hostKey.IsNull() {
		outs[keyPresentedHostKey] = hostKey
	}
	return outs
}

// presentedHostKeyOf is the host key a run reported, as the presentedHostKey output: null when it reported none.
func presentedHostKeyOf(r runResult) resource.PropertyValue {
	if r.hostKey == "" {
		return resource.NewNullProperty()
	}
	return resource.NewStringProperty(r.hostKey)
}

// pinRecordedHostKey pins a connection without a hostKey to the key its step recorded when it last ran on a host
// (the state's presentedHostKey): the step checks its host from its second run on, and a changed host, port or user
// must present the same key (the same machine at a new address); a host replaced on purpose is pinned explicitly in
// the connection's hostKey, which always wins. A state without one (a step that never ran, or one recorded by an
// earlier build) leaves the connection on first contact.
func pinRecordedHostKey(c *connection, state resource.PropertyMap) {
	if c == nil || c.HostKey != nil {
		return
	}
	if v, _ := unwrapSecret(state[keyPresentedHostKey]); v.IsString() && strings.TrimSpace(v.StringValue()) != "" {
		key := v.StringValue()
		c.HostKey, c.hostKeyRecorded = &key, true
	}
}

func computedString() resource.PropertyValue {
	return resource.MakeComputed(resource.NewStringProperty(""))
}

func (p *Provider) resourceLogger(ctx context.Context, urn string, in *commandInputs,
	props resource.PropertyMap,
) *resourceLogger {
	return &resourceLogger{
		ctx:     ctx,
		logger:  p.logger,
		urn:     urn,
		logging: in.Logging,
		scrub:   newScrubber(props, in.Connection),
	}
}

func inputError(what string, err error) error {
	return fmt.Errorf("invalid %s of %s: %w", what, StepToken, err)
}

// Create runs the `create` command. In a preview nothing is run and stdout/stderr are unknown.
//
// A `create` that started on the host and failed may have changed it (a unit enabled, then its check failed), so the
// step is returned all the same, as a resource that was created but failed to initialize (initFailed): the engine
// keeps it in the state with its inputs, so `destroy` runs its `delete`, and the next `up` runs `create` again (an
// update, since the engine updates a resource with initialization errors even when nothing changed). A host that
// could not be reached, or a session that was refused, ran nothing: that error is returned alone, and nothing is
// recorded.
func (p *Provider) Create(ctx context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.createRandomSecret(req)
	}
	news, id, err := createInputs(req)
	if err != nil {
		return nil, err
	}
	if req.GetPreview() {
		hostKey := resource.NewNullProperty()
		if v, _ := unwrapSecret(news[keyCreate]); v.IsComputed() || (v.IsString() && v.StringValue() != "") {
			hostKey = computedString()
		}
		props, err := marshal("properties", buildOutputs(news, computedString(), computedString(), hostKey))
		if err != nil {
			return nil, err
		}
		return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
	}

	in, err := parseInputs(news)
	if err != nil {
		return nil, inputError("inputs", err)
	}
	var ran runResult
	if in.Create != nil && *in.Create != "" {
		ctx, cancel := p.operationContext(ctx, req.GetTimeout())
		defer cancel()
		ran, err = p.run(ctx, runSpec{
			conn:    in.Connection,
			command: *in.Create,
			env:     in.Environment,
			stdin:   in.Stdin,
			log:     p.resourceLogger(ctx, req.GetUrn(), in, news),
		})
		if err != nil && !started(err) {
			return nil, err
		}
	}
	props, perr := marshal("properties", buildOutputs(news, resource.NewStringProperty(ran.stdout),
		resource.NewStringProperty(ran.stderr), presentedHostKeyOf(ran)))
	if perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, initFailed(id, props, req.GetProperties(), err)
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
}

// initFailed is the error of a step that was created but failed to initialize: Pulumi's ErrorResourceInitFailed
// detail carries its id, state and inputs, and the engine records it (with the error as its initialization error)
// instead of forgetting it.
func initFailed(id string, props, inputs *structpb.Struct, err error) error {
	return rpcerror.WithDetails(rpcerror.New(codes.Unknown, err.Error()), &pulumirpc.ErrorResourceInitFailed{
		Id:         id,
		Properties: props,
		Inputs:     inputs,
		Reasons:    []string{err.Error()},
	})
}

// Read reads the host back when the command has a `read` input (this build's own; see keyRead); without one it
// returns the recorded state unchanged, as upstream does. The read runs with the latest inputs' connection and gets
// the last run's stdout on stdin. Differences it reports, a failing read, or a host that does not answer within the
// connection's dial budget become the `drift` property of the returned inputs and outputs (and a warning naming the
// resource and host): the refresh shows it, and the next `up` runs the command again. A host that reads back clean
// returns the state unchanged, minus any drift an earlier refresh recorded.
func (p *Provider) Read(ctx context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.readRandomSecret(req)
	}
	unchanged := &pulumirpc.ReadResponse{Id: req.GetId(), Properties: req.GetProperties(), Inputs: req.GetInputs()}
	if req.GetInputs() == nil || len(req.GetInputs().GetFields()) == 0 {
		return unchanged, nil
	}
	inputs, err := unmarshal("inputs", req.GetInputs())
	if err != nil {
		return nil, err
	}
	if v, _ := unwrapSecret(inputs[keyRead]); !v.IsString() || v.StringValue() == "" {
		return unchanged, nil
	}
	state, err := unmarshal("properties", req.GetProperties())
	if err != nil {
		return nil, err
	}
	in, err := parseInputs(inputs)
	if err != nil {
		return nil, inputError("inputs", err)
	}
	pinRecordedHostKey(in.Connection, state)
	spec := runSpec{conn: in.Connection, command: *in.Read, stdin: previousOutput(state, keyStdout)}
	if spec.stdin == nil {
		empty := ""
		spec.stdin = &empty
	}
	ctx, cancel := p.operationContext(ctx, req.GetTimeout())
	defer cancel()
	// The read's own output is not streamed: what it found comes back as `drift`, and as one warning.
	spec.quiet = true
	spec.log = p.resourceLogger(ctx, req.GetUrn(), in, inputs)
	ran, err := p.run(ctx, spec)
	drift := strings.TrimSpace(ran.stdout)
	if err != nil {
		drift = fmt.Sprintf("not read: %v", err)
	}
	// The key of the host the read ran on: another than the recorded one only where the connection's hostKey
	// pins a new one. A state without one (recorded by an earlier build) is left without: a refresh of a stack
	// deployed before changes nothing, and the step's next create or update records it.
	recorded, _ := unwrapSecret(state[keyPresentedHostKey])
	newKey := ran.hostKey != "" && recorded.IsString() && recorded.StringValue() != ran.hostKey
	if newKey {
		state[keyPresentedHostKey] = resource.NewStringProperty(ran.hostKey)
	}
	if drift == "" {
		_, hadDrift := inputs[keyDrift]
		if !hadDrift && !newKey {
			return unchanged, nil
		}
		delete(inputs, keyDrift)
		delete(state, keyDrift)
	} else {
		if err != nil {
			spec.log.warnAlways("%s on %s was not read back: %v", resourceName("", req.GetUrn()), in.Connection.target(), err)
		} else {
			spec.log.warnAlways("%s on %s differs from what pulumi up made:\n%s", resourceName("", req.GetUrn()),
				in.Connection.target(), drift)
		}
		inputs[keyDrift] = resource.NewStringProperty(drift)
		state[keyDrift] = resource.NewStringProperty(drift)
	}
	ins, err := marshal("inputs", inputs)
	if err != nil {
		return nil, err
	}
	props, err := marshal("properties", state)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.ReadResponse{Id: req.GetId(), Properties: props, Inputs: ins}, nil
}

// previousOutput returns the stored stdout or stderr of a state, unwrapped.
func previousOutput(state resource.PropertyMap, k resource.PropertyKey) *string {
	if v, _ := unwrapSecret(state[k]); v.IsString() {
		s := v.StringValue()
		return &s
	}
	return nil
}

// Update runs `update`, or `create` when there is no `update` command.
func (p *Provider) Update(ctx context.Context, req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.updateRandomSecret(req)
	}
	olds, err := unmarshal("olds", req.GetOlds())
	if err != nil {
		return nil, err
	}
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	pick := func(m resource.PropertyMap) (resource.PropertyValue, bool) {
		for _, k := range []resource.PropertyKey{keyUpdate, keyCreate} {
			if v, _ := unwrapSecret(m[k]); !v.IsNull() && !(v.IsString() && v.StringValue() == "") {
				return v, true
			}
		}
		return resource.PropertyValue{}, false
	}
	_, willRun := pick(news)

	oldStdout, oldStderr := olds[keyStdout], olds[keyStderr]
	if oldStdout.IsNull() {
		oldStdout = resource.NewStringProperty("")
	}
	if oldStderr.IsNull() {
		oldStderr = resource.NewStringProperty("")
	}

	oldHostKey := olds[keyPresentedHostKey]

	if req.GetPreview() {
		stdout, stderr, hostKey := oldStdout, oldStderr, oldHostKey
		if willRun {
			stdout, stderr, hostKey = computedString(), computedString(), computedString()
		}
		props, err := marshal("properties", buildOutputs(news, stdout, stderr, hostKey))
		if err != nil {
			return nil, err
		}
		return &pulumirpc.UpdateResponse{Properties: props}, nil
	}

	in, err := parseInputs(news)
	if err != nil {
		return nil, inputError("inputs", err)
	}
	pinRecordedHostKey(in.Connection, olds)
	stdout, stderr, hostKey := oldStdout, oldStderr, oldHostKey
	if willRun {
		command := in.Update
		if command == nil || *command == "" {
			command = in.Create
		}
		spec := runSpec{
			conn:    in.Connection,
			command: *command,
			env:     in.Environment,
			stdin:   in.Stdin,
		}
		if in.AddPreviousOutputInEnv {
			spec.prevStdout, spec.prevStderr = previousOutput(olds, keyStdout), previousOutput(olds, keyStderr)
		}
		ctx, cancel := p.operationContext(ctx, req.GetTimeout())
		defer cancel()
		spec.log = p.resourceLogger(ctx, req.GetUrn(), in, news)
		ran, err := p.run(ctx, spec)
		if err != nil {
			return nil, err
		}
		stdout, stderr = resource.NewStringProperty(ran.stdout), resource.NewStringProperty(ran.stderr)
		hostKey = presentedHostKeyOf(ran)
	}
	props, err := marshal("properties", buildOutputs(news, stdout, stderr, hostKey))
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: props}, nil
}

// Delete runs `delete`, if set, with the connection of the stored state.
func (p *Provider) Delete(ctx context.Context, req *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	if err := checkType(req.GetType(), req.GetUrn()); err != nil {
		return nil, err
	}
	if isRandomSecret(req.GetType(), req.GetUrn()) {
		return p.deleteRandomSecret(req)
	}
	state, err := unmarshal("properties", req.GetProperties())
	if err != nil {
		return nil, err
	}
	var oldInputs resource.PropertyMap
	if oi := req.GetOldInputs(); oi != nil && len(oi.GetFields()) > 0 {
		if oldInputs, err = unmarshal("oldInputs", oi); err != nil {
			return nil, err
		}
		state = withNotEchoed(state, oldInputs)
	}
	if v, _ := unwrapSecret(state[keyDelete]); !v.IsString() || v.StringValue() == "" {
		return &emptypb.Empty{}, nil
	}
	in, err := parseInputs(state)
	if err != nil {
		return nil, inputError("state", err)
	}
	if oldInputs != nil {
		deleteSettings(in, oldInputs)
	}
	pinRecordedHostKey(in.Connection, state)
	spec := runSpec{
		conn:    in.Connection,
		command: *in.Delete,
		env:     in.Environment,
		stdin:   in.Stdin,
	}
	if in.AddPreviousOutputInEnv {
		spec.prevStdout, spec.prevStderr = previousOutput(state, keyStdout), previousOutput(state, keyStderr)
	}
	ctx, cancel := p.operationContext(ctx, req.GetTimeout())
	defer cancel()
	spec.log = p.resourceLogger(ctx, req.GetUrn(), in, state)
	if _, err := p.run(ctx, spec); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// notEchoedKeys are the inputs that are not echoed in the outputs: the scripts and the connection. The engine keeps
// them in the resource's inputs, and it writes the whole state (inputs and outputs of every resource) after each step
// starts and ends, so an echo made every one of those writes longer: the scripts were a third of an 8-node stack's
// state, and the connection, a secret whose ciphertext is about 1.1 KB per command, an eighth. A Delete takes them
// from the old inputs (withNotEchoed). States written before this build have them in the outputs as well, and those
// are used as they are.
var notEchoedKeys = []resource.PropertyKey{keyCreate, keyUpdate, keyDelete, keyRead, keyConnection}

// withNotEchoed is a state with the not-echoed inputs (notEchoedKeys) of its resource's inputs where the state has
// none. The inputs' scripts and connection are the ones the command last ran with: a change of any of them (but the
// connection's dial settings, see deleteSettings) is a diff, so an `up` that records new ones runs the command with
// them (Update) or fails and keeps the old inputs.
func withNotEchoed(state, inputs resource.PropertyMap) resource.PropertyMap {
	out := state.Copy()
	for _, k := range notEchoedKeys {
		if _, ok := out[k]; !ok {
			if v, ok := inputs[k]; ok {
				out[k] = v
			}
		}
	}
	return out
}

// deleteSettings takes the run settings of a Delete from the resource's latest inputs. In a state written by an
// earlier build, the outputs hold the inputs of the command's last run, connection included, and a later `up` that
// changed only run settings (no diff, so nothing ran) recorded them in the inputs alone. Everything else (host,
// credentials, the delete command) stays the stored one. In a state of this build the connection comes from the
// inputs already (withNotEchoed), and the address check compares it with itself.
func deleteSettings(in *commandInputs, inputs resource.PropertyMap) {
	if v, _ := unwrapSecret(inputs[keyAddPreviousOutputInEnv]); v.IsBool() {
		in.AddPreviousOutputInEnv = v.BoolValue()
	}
	latest, err := parseConnection(inputs[keyConnection], string(keyConnection), true)
	if err != nil || latest.address() != in.Connection.address() {
		return
	}
	in.Connection.DialErrorLimit, in.Connection.PerDialTimeout = latest.DialErrorLimit, latest.PerDialTimeout
	in.Connection.UnreachableHint = latest.UnreachableHint
	in.Connection.SudoPassword = latest.SudoPassword
	if in.Connection.Proxy != nil && latest.Proxy != nil && latest.Proxy.address() == in.Connection.Proxy.address() {
		in.Connection.Proxy.DialErrorLimit = latest.Proxy.DialErrorLimit
		in.Connection.Proxy.PerDialTimeout = latest.Proxy.PerDialTimeout
	}
}
