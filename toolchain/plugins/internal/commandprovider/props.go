package commandprovider

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"
)

// Property names of spark-remote:index:Step: those of @pulumi/command 1.2.1's command:remote:Command, which this
// provider started as, with the same meaning (so that a stack deployed with that type moves to this one by a state
// rewrite alone: scripts/migrate-provider.sh).
const (
	keyAddPreviousOutputInEnv resource.PropertyKey = "addPreviousOutputInEnv"
	keyConnection             resource.PropertyKey = "connection"
	keyCreate                 resource.PropertyKey = "create"
	keyDelete                 resource.PropertyKey = "delete"
	keyEnvironment            resource.PropertyKey = "environment"
	keyLogging                resource.PropertyKey = "logging"
	keyStdin                  resource.PropertyKey = "stdin"
	keyTriggers               resource.PropertyKey = "triggers"
	keyUpdate                 resource.PropertyKey = "update"
	keyStdout                 resource.PropertyKey = "stdout"
	keyStderr                 resource.PropertyKey = "stderr"
)

// Properties beyond @pulumi/command 1.2.1's (it has no read-back of a command).
const (
	// keyRead is a command that reports, one line per difference, how the host differs from what the last run of
	// `create`/`update` made; no output means no difference. It gets that run's stdout on stdin, must change
	// nothing, and runs on refresh only (see Provider.Read). Changing it alone is no diff.
	keyRead resource.PropertyKey = "read"
	// keyDrift is what a refresh found: the `read` command's lines, or why the host could not be read. Read adds
	// it to the inputs and outputs; the program never sets it, so the next `up` diffs it away by running the
	// command again, which repairs the host, and its outputs have no drift.
	keyDrift resource.PropertyKey = "drift"
	// keyUnreachableHint is a connection's text for an unreachable host (see connection.UnreachableHint).
	keyUnreachableHint resource.PropertyKey = "unreachableHint"
	// keySudoPassword is a connection's sudo password (see connection.SudoPassword).
	keySudoPassword resource.PropertyKey = "sudoPassword"
	// keyPresentedHostKey is an output: the public key the host presented in the SSH handshake of the connection the
	// step last ran a script on ("<type> <base64>"; through a proxy, the target's). A later run of the step whose
	// connection has no hostKey is pinned to it (pinRecordedHostKey, resource.go), so a step checks the host it runs on
	// from its second run on, and the program can pin its other steps to it.
	keyPresentedHostKey resource.PropertyKey = "presentedHostKey"
)

// Values of the Logging enum (types/enums/remote: Logging).
const (
	LoggingStdout          = "stdout"
	LoggingStderr          = "stderr"
	LoggingStdoutAndStderr = "stdoutAndStderr"
	LoggingNone            = "none"
)

// defaultAddPreviousOutputInEnv: the previous run's stdout and stderr are not exported to the next run unless asked
// for. (@pulumi/command's default is true; none of the program's scripts reads them, and an sshd that does not list
// PULUMI_COMMAND_STDOUT in AcceptEnv refuses them, which the provider warned about at every update and delete.)
const defaultAddPreviousOutputInEnv = false

// Connection defaults, as @pulumi/command 1.2.1's connectionArgsProvideDefaults has them (components/sparkRemote.ts
// applies them too).
const (
	defaultPort           = 22
	defaultUser           = "root"
	defaultDialErrorLimit = 10
	defaultPerDialTimeout = 15
)

func validLogging(s string) bool {
	switch s {
	case LoggingStdout, LoggingStderr, LoggingStdoutAndStderr, LoggingNone:
		return true
	}
	return false
}

// marshalOptions are used for everything this provider sends to or receives from the engine: secrets, unknowns and
// resource references are kept as they are (the provider announces AcceptSecrets and AcceptResources).
func marshalOptions(label string) plugin.MarshalOptions {
	return plugin.MarshalOptions{
		Label:         label,
		KeepUnknowns:  true,
		KeepSecrets:   true,
		KeepResources: true,
	}
}

func unmarshal(label string, s *structpb.Struct) (resource.PropertyMap, error) {
	if s == nil {
		return resource.PropertyMap{}, nil
	}
	m, err := plugin.UnmarshalProperties(s, marshalOptions(label))
	if err != nil {
		return nil, fmt.Errorf("unmarshaling %s: %w", label, err)
	}
	if m == nil {
		m = resource.PropertyMap{}
	}
	return m, nil
}

func marshal(label string, m resource.PropertyMap) (*structpb.Struct, error) {
	s, err := plugin.MarshalProperties(m, marshalOptions(label))
	if err != nil {
		return nil, fmt.Errorf("marshaling %s: %w", label, err)
	}
	return s, nil
}

// unwrapSecret removes any secret (and known output) wrappers around v. It reports whether a secret wrapper was seen.
// An unknown output value is turned into a computed value.
func unwrapSecret(v resource.PropertyValue) (resource.PropertyValue, bool) {
	secret := false
	for {
		switch {
		case v.IsSecret():
			secret = true
			v = v.SecretValue().Element
		case v.IsOutput():
			o := v.OutputValue()
			if o.Secret {
				secret = true
			}
			if !o.Known {
				return resource.MakeComputed(resource.NewStringProperty("")), secret
			}
			v = o.Element
		default:
			return v, secret
		}
	}
}

// stripSecrets returns v with every secret wrapper removed, deeply.
func stripSecrets(v resource.PropertyValue) resource.PropertyValue {
	v, _ = unwrapSecret(v)
	switch {
	case v.IsArray():
		arr := v.ArrayValue()
		out := make([]resource.PropertyValue, len(arr))
		for i, e := range arr {
			out[i] = stripSecrets(e)
		}
		return resource.NewArrayProperty(out)
	case v.IsObject():
		return resource.NewObjectProperty(stripSecretsMap(v.ObjectValue()))
	default:
		return v
	}
}

func stripSecretsMap(m resource.PropertyMap) resource.PropertyMap {
	out := make(resource.PropertyMap, len(m))
	for k, e := range m {
		out[k] = stripSecrets(e)
	}
	return out
}

// ensureSecret wraps v in a secret unless it is null or already secret.
func ensureSecret(v resource.PropertyValue) resource.PropertyValue {
	if v.IsNull() || v.IsSecret() {
		return v
	}
	return resource.MakeSecret(v)
}

// checkFailures collects a Check's failures.
type checkFailures []*pulumirpc.CheckFailure

func (f *checkFailures) add(path, reason string) {
	*f = append(*f, &pulumirpc.CheckFailure{Property: path, Reason: reason})
}

// addErr adds err: a propertyError at its path, any other error at none; nil adds nothing.
func (f *checkFailures) addErr(err error) {
	var pe *propertyError
	if errors.As(err, &pe) {
		f.add(pe.path, pe.reason)
	} else if err != nil {
		f.add("", err.Error())
	}
}

// propertyError is an input validation problem, reported as a Check failure.
type propertyError struct {
	path   string
	reason string
}

func (e *propertyError) Error() string { return fmt.Sprintf("%s: %s", e.path, e.reason) }

func typeError(path, want string, got resource.PropertyValue) *propertyError {
	return &propertyError{path: path, reason: fmt.Sprintf("expected %s, got %s", want, got.TypeString())}
}

func unknownError(path string) *propertyError {
	return &propertyError{path: path, reason: "value is not known yet"}
}

func optString(m resource.PropertyMap, k resource.PropertyKey, path string) (*string, error) {
	v, _ := unwrapSecret(m[k])
	switch {
	case v.IsNull():
		return nil, nil
	case v.IsString():
		s := v.StringValue()
		return &s, nil
	case v.IsComputed():
		return nil, unknownError(path)
	default:
		return nil, typeError(path, "a string", v)
	}
}

func optInt(m resource.PropertyMap, k resource.PropertyKey, path string, def int) (int, error) {
	v, _ := unwrapSecret(m[k])
	switch {
	case v.IsNull():
		return def, nil
	case v.IsNumber():
		f := v.NumberValue()
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<31 {
			return 0, &propertyError{path: path, reason: "expected an integer"}
		}
		return int(f), nil
	case v.IsComputed():
		return 0, unknownError(path)
	default:
		return 0, typeError(path, "a number", v)
	}
}

func optBool(m resource.PropertyMap, k resource.PropertyKey, path string, def bool) (bool, error) {
	v, _ := unwrapSecret(m[k])
	switch {
	case v.IsNull():
		return def, nil
	case v.IsBool():
		return v.BoolValue(), nil
	case v.IsComputed():
		return false, unknownError(path)
	default:
		return false, typeError(path, "a boolean", v)
	}
}

// connection holds the parsed `connection` (or `connection.proxy`) input.
type connection struct {
	Host               string
	Port               int
	User               string
	Password           *string
	PrivateKey         *string
	PrivateKeyPassword *string
	AgentSocketPath    *string
	HostKey            *string
	DialErrorLimit     int
	PerDialTimeout     int
	// UnreachableHint is this build's own: text added to the error when the host cannot be reached, saying
	// what to do next (the program names the node and its config keys). A run setting: no diff.
	UnreachableHint *string
	// SudoPassword is this build's own: the login user's sudo password, for a program whose scripts become root with
	// `sudo -S` (it reads one line of stdin for the password). When set, every script run on the connection (create,
	// update, delete, read) gets the password and a line SudoStdinMarker before its own stdin, so the password is
	// never in argv, the environment or a file on the host; the program's root wrapper skips to the marker, which
	// keeps a script's own stdin intact whether sudo read the password or asked for none. A run setting: no diff.
	SudoPassword *string
	Proxy        *connection
	// hostKeyRecorded: HostKey is not the program's but the key the step recorded when it last ran (its state's
	// presentedHostKey, see pinRecordedHostKey); only a mismatch's error says so.
	hostKeyRecorded bool
}

// SudoStdinMarker is the line after the sudo password in a script's stdin (see connection.SudoPassword).
const SudoStdinMarker = "SPARK_CLUSTER_STDIN"

// stdinFor is what a script gets on stdin on this connection: its own, after the sudo password and the marker line
// when the connection has a sudo password (nil stays nil otherwise).
func (c *connection) stdinFor(own *string) *string {
	if c == nil || c.SudoPassword == nil || *c.SudoPassword == "" {
		return own
	}
	s := *c.SudoPassword + "\n" + SudoStdinMarker + "\n"
	if own != nil {
		s += *own
	}
	return &s
}

// target is user@host:port, used in messages. It contains no credentials.
func (c *connection) target() string {
	return fmt.Sprintf("%s@%s", c.User, c.address())
}

func (c *connection) address() string {
	host := c.Host
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, c.Port)
}

func parseConnection(v resource.PropertyValue, path string, allowProxy bool) (*connection, error) {
	v, _ = unwrapSecret(v)
	switch {
	case v.IsNull():
		return nil, &propertyError{path: path, reason: "missing required property"}
	case v.IsComputed():
		return nil, unknownError(path)
	case !v.IsObject():
		return nil, typeError(path, "an object", v)
	}
	m := v.ObjectValue()
	c := &connection{}
	var err error
	host, err := optString(m, "host", path+".host")
	if err != nil {
		return nil, err
	}
	if host == nil || *host == "" {
		return nil, &propertyError{path: path + ".host", reason: "missing required property"}
	}
	c.Host = *host
	if c.Port, err = optInt(m, "port", path+".port", defaultPort); err != nil {
		return nil, err
	}
	user, err := optString(m, "user", path+".user")
	if err != nil {
		return nil, err
	}
	c.User = defaultUser
	if user != nil && *user != "" {
		c.User = *user
	}
	for _, f := range []struct {
		key resource.PropertyKey
		dst **string
	}{
		{"password", &c.Password},
		{"privateKey", &c.PrivateKey},
		{"privateKeyPassword", &c.PrivateKeyPassword},
		{"agentSocketPath", &c.AgentSocketPath},
		{"hostKey", &c.HostKey},
		{keyUnreachableHint, &c.UnreachableHint},
		{keySudoPassword, &c.SudoPassword},
	} {
		if *f.dst, err = optString(m, f.key, path+"."+string(f.key)); err != nil {
			return nil, err
		}
	}
	if c.DialErrorLimit, err = optInt(m, "dialErrorLimit", path+".dialErrorLimit", defaultDialErrorLimit); err != nil {
		return nil, err
	}
	if c.PerDialTimeout, err = optInt(m, "perDialTimeout", path+".perDialTimeout", defaultPerDialTimeout); err != nil {
		return nil, err
	}
	if c.PerDialTimeout < 0 {
		return nil, &propertyError{path: path + ".perDialTimeout", reason: "must not be negative"}
	}
	if c.Port <= 0 || c.Port > 65535 {
		return nil, &propertyError{path: path + ".port", reason: "must be between 1 and 65535"}
	}
	if allowProxy {
		if pv, _ := unwrapSecret(m["proxy"]); !pv.IsNull() {
			if c.Proxy, err = parseConnection(pv, path+".proxy", false); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// commandInputs holds the parsed inputs of a step (from inputs or from a stored state).
type commandInputs struct {
	Connection             *connection
	Create                 *string
	Update                 *string
	Delete                 *string
	Stdin                  *string
	Read                   *string
	Environment            map[string]string
	Logging                string
	AddPreviousOutputInEnv bool
}

func parseInputs(m resource.PropertyMap) (*commandInputs, error) {
	in := &commandInputs{}
	var err error
	if in.Connection, err = parseConnection(m[keyConnection], string(keyConnection), true); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key resource.PropertyKey
		dst **string
	}{
		{keyCreate, &in.Create},
		{keyUpdate, &in.Update},
		{keyDelete, &in.Delete},
		{keyStdin, &in.Stdin},
		{keyRead, &in.Read},
	} {
		if *f.dst, err = optString(m, f.key, string(f.key)); err != nil {
			return nil, err
		}
	}
	logging, err := optString(m, keyLogging, string(keyLogging))
	if err != nil {
		return nil, err
	}
	in.Logging = LoggingStdoutAndStderr
	if logging != nil && *logging != "" {
		if !validLogging(*logging) {
			return nil, &propertyError{path: string(keyLogging), reason: fmt.Sprintf(
				"must be one of %q, %q, %q or %q", LoggingStdout, LoggingStderr, LoggingStdoutAndStderr, LoggingNone)}
		}
		in.Logging = *logging
	}
	if in.AddPreviousOutputInEnv, err = optBool(m, keyAddPreviousOutputInEnv, string(keyAddPreviousOutputInEnv),
		defaultAddPreviousOutputInEnv); err != nil {
		return nil, err
	}
	env, _ := unwrapSecret(m[keyEnvironment])
	switch {
	case env.IsNull():
	case env.IsComputed():
		return nil, unknownError(string(keyEnvironment))
	case env.IsObject():
		in.Environment = map[string]string{}
		em := env.ObjectValue()
		for _, k := range em.StableKeys() {
			s, err := optString(em, k, fmt.Sprintf("%s.%s", keyEnvironment, k))
			if err != nil {
				return nil, err
			}
			if s != nil {
				in.Environment[string(k)] = *s
			}
		}
	default:
		return nil, typeError(string(keyEnvironment), "a map of strings", env)
	}
	return in, nil
}

// sortedKeys returns the keys of a string map in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scrubber replaces secret values by "[secret]" in text that leaves the provider (errors, log lines).
type scrubber struct {
	secrets []string
}

// minScrubLen avoids replacing trivially short values (a one-letter secret would mangle every message).
const minScrubLen = 4

func (s *scrubber) add(v string) {
	v = strings.TrimSpace(v)
	if len(v) < minScrubLen {
		return
	}
	s.secrets = append(s.secrets, v)
	// A multi-line secret (a private key) may be echoed partially: scrub its long lines as well.
	if strings.Contains(v, "\n") {
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 {
				s.secrets = append(s.secrets, line)
			}
		}
	}
}

// addSecretStrings adds every string found inside a secret wrapper of v.
func (s *scrubber) addSecretStrings(v resource.PropertyValue, inSecret bool) {
	inner, secret := unwrapSecret(v)
	inSecret = inSecret || secret
	switch {
	case inner.IsString():
		if inSecret {
			s.add(inner.StringValue())
		}
	case inner.IsArray():
		for _, e := range inner.ArrayValue() {
			s.addSecretStrings(e, inSecret)
		}
	case inner.IsObject():
		for _, e := range inner.ObjectValue() {
			s.addSecretStrings(e, inSecret)
		}
	}
}

func (s *scrubber) addConnection(c *connection) {
	for c != nil {
		for _, p := range []*string{c.Password, c.PrivateKey, c.PrivateKeyPassword} {
			if p != nil {
				s.add(*p)
			}
		}
		c = c.Proxy
	}
}

// newScrubber collects the credentials of the connection and every secret value of the other inputs. The
// connection as a whole is always secret (Check marks it so), but its host, user and port are not worth hiding.
func newScrubber(m resource.PropertyMap, c *connection) *scrubber {
	s := &scrubber{}
	s.addConnection(c)
	for k, v := range m {
		if k == keyConnection {
			continue
		}
		s.addSecretStrings(v, false)
	}
	// Replace longer values first so that a secret containing another one is hidden completely.
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	return s
}

func (s *scrubber) scrub(text string) string {
	if s == nil {
		return text
	}
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, "[secret]")
	}
	return text
}
