package commandprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Environment variables carrying the previous run's outputs (upstream names).
const (
	envPreviousStdout = "PULUMI_COMMAND_STDOUT"
	envPreviousStderr = "PULUMI_COMMAND_STDERR"
)

// Dial retry delays, as in the upstream provider (Pulumi's retry.Until defaults): 100ms, growing 1.5x, at most 5s.
const (
	defaultRetryDelay    = 100 * time.Millisecond
	retryBackoff         = 1.5
	defaultMaxRetryDelay = 5 * time.Second
)

// sessionCloseWait: how long a cancelled step waits for the server to close its session before it
// closes the whole connection.
const sessionCloseWait = 2 * time.Second

// maxErrorOutput bounds the command output quoted in an error.
const maxErrorOutput = 32 * 1024

// runSpec describes one remote command execution.
type runSpec struct {
	conn    *connection
	command string
	env     map[string]string
	stdin   *string
	// previous outputs to export as PULUMI_COMMAND_STDOUT/STDERR; nil when they must not be set.
	prevStdout, prevStderr *string
	log                    *resourceLogger
	// quiet: the output is returned only, not logged line by line (a refresh's read).
	quiet bool
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// sshClient is an SSH client plus whatever has to be closed with it (a proxy client).
type sshClient struct {
	*ssh.Client
	// hostKey is the key the host presented in the handshake that opened the client (a step on a shared
	// connection reports it as its presentedHostKey).
	hostKey ssh.PublicKey
	closers []func() error
}

func (c *sshClient) Close() error {
	err := c.Client.Close()
	for i := len(c.closers) - 1; i >= 0; i-- {
		_ = c.closers[i]()
	}
	return err
}

// authMethods builds the SSH client auth for c. The returned cleanup closes the agent connection, if any.
func authMethods(c *connection) ([]ssh.AuthMethod, func(), error) {
	var methods []ssh.AuthMethod
	cleanup := func() {}
	if c.PrivateKey != nil && *c.PrivateKey != "" {
		var signer ssh.Signer
		var err error
		if c.PrivateKeyPassword != nil && *c.PrivateKeyPassword != "" {
			signer, err = ssh.ParsePrivateKeyWithPassphrase([]byte(*c.PrivateKey), []byte(*c.PrivateKeyPassword))
		} else {
			signer, err = ssh.ParsePrivateKey([]byte(*c.PrivateKey))
		}
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return nil, cleanup, fmt.Errorf("the connection's privateKey is encrypted: set privateKeyPassword")
			}
			// The parser's errors describe the format problem; they never quote the key.
			return nil, cleanup, fmt.Errorf("cannot parse the connection's privateKey: %v", err)
		}
		methods = append(methods, ssh.PublicKeys(signer))
	}
	if c.Password != nil && *c.Password != "" {
		password := *c.Password
		methods = append(methods,
			ssh.Password(password),
			ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = password
				}
				return answers, nil
			}))
	}
	socket := os.Getenv("SSH_AUTH_SOCK")
	if c.AgentSocketPath != nil && *c.AgentSocketPath != "" {
		socket = *c.AgentSocketPath
	}
	if socket != "" {
		if conn, err := net.Dial("unix", socket); err == nil {
			methods = append(methods, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
			cleanup = func() { _ = conn.Close() }
		} else if c.AgentSocketPath != nil && *c.AgentSocketPath != "" {
			return nil, cleanup, fmt.Errorf("cannot connect to the SSH agent at %s: %v", socket, err)
		}
	}
	return methods, cleanup, nil
}

// hostKeyMismatchError is a host presenting another key than the one the step is pinned to: retrying cannot help
// (it is not a network error), and the message says what to check.
type hostKeyMismatchError struct {
	addr, want, got string
	// recorded: the pin is the key the step's host presented when it last ran (its state's presentedHostKey), not
	// the connection's hostKey.
	recorded bool
}

func (e *hostKeyMismatchError) Error() string {
	if e.recorded {
		return fmt.Sprintf("the SSH host key of %s is not the one this step's host presented when the step last "+
			"ran: expected %s, the host presented %s. Nothing was run there. The connection has no hostKey, so the "+
			"step is pinned to the key it recorded (its presentedHostKey): a new host, port or user must present the "+
			"same key. If the host was replaced or reinstalled on purpose, pin its new key explicitly in the "+
			"connection's hostKey (read it on the host's console, or ssh-keyscan it over a trusted network and "+
			"compare fingerprints); otherwise someone may be impersonating it", e.addr, e.want, e.got)
	}
	return fmt.Sprintf("the SSH host key of %s has changed: expected %s, the host presented %s. "+
		"Nothing was run there. If the host was reinstalled on purpose, pin its new key "+
		"(ssh-keyscan it over a trusted network); otherwise someone may be impersonating it", e.addr, e.want, e.got)
}

// firstContactHostKeyAlgorithms are the host key algorithms a connection without a pinned key negotiates, in the
// order the program's SSH step prints the host's keys (components/hostKey.ts: ed25519, ecdsa, rsa), so that a host
// with several keys presents the one the step prints first. (x/crypto's own default puts ed25519 last.) The
// certificate algorithms and SHA-1 ssh-rsa are left out: a key pinned from a certificate would not verify the next
// time, and ssh-rsa is for servers older than any this project supports.
var firstContactHostKeyAlgorithms = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// hostKeyCheck is how a connection checks its host's key: against the pinned key (the connection's hostKey, or the
// one the step recorded), or, on first contact (no pin), not at all but for the connection's own key exchanges,
// which must all present the key of the first one.
type hostKeyCheck struct {
	want       ssh.PublicKey // nil: first contact
	recorded   bool          // want is the step's recorded key (hostKeyMismatchError.recorded)
	algorithms []string      // the host key algorithms to negotiate
}

// newHostKeyCheck reads the connection's hostKey. path names it in errors (connection.hostKey, or the proxy's).
// A hostKey that is given but empty is refused: it used to mean "no check", which a program could send by accident
// (a key it had not learned yet) and so run every later command on whatever host answered.
func newHostKeyCheck(c *connection, path string) (*hostKeyCheck, error) {
	if c.HostKey == nil {
		return &hostKeyCheck{algorithms: firstContactHostKeyAlgorithms}, nil
	}
	if strings.TrimSpace(*c.HostKey) == "" {
		return nil, errors.New(emptyHostKeyReason(path))
	}
	text := []byte(strings.TrimSpace(*c.HostKey))
	var want ssh.PublicKey
	if key, _, _, _, err := ssh.ParseAuthorizedKey(text); err == nil {
		want = key
	} else if _, _, key, _, _, err := ssh.ParseKnownHosts(text); err == nil {
		want = key
	} else {
		// The value is not quoted: it is part of the (secret) connection and might be a misplaced private key.
		return nil, fmt.Errorf("cannot parse the connection's hostKey: expected a public key such as " +
			"\"ssh-ed25519 AAAA...\" (authorized_keys or known_hosts format)")
	}
	// The pinned key's algorithms, so that a host with several keys presents that one.
	algorithms := []string{want.Type()}
	if want.Type() == ssh.KeyAlgoRSA {
		algorithms = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return &hostKeyCheck{want: want, recorded: c.hostKeyRecorded, algorithms: algorithms}, nil
}

// emptyHostKeyReason is the error of an empty or blank hostKey at path, with the fix.
func emptyHostKeyReason(path string) string {
	return path + " is empty: an empty host key would check nothing, so it is refused. Set it to the host's " +
		"public key (\"ssh-ed25519 AAAA...\": on the host's console, cat /etc/ssh/ssh_host_ed25519_key.pub), or leave " +
		"it out to pin the key the host presents on first contact"
}

// callback is the HostKeyCallback of one connection attempt, and what the host presented once its handshake
// passed. Every key exchange of the connection (the first, and any re-key) must present the same key.
func (h *hostKeyCheck) callback() (ssh.HostKeyCallback, func() ssh.PublicKey) {
	var mu sync.Mutex
	var presented ssh.PublicKey
	check := func(addr string, _ net.Addr, got ssh.PublicKey) error {
		mu.Lock()
		defer mu.Unlock()
		want, recorded := h.want, h.recorded
		if presented != nil {
			want, recorded = presented, false
		}
		if want != nil && !bytes.Equal(got.Marshal(), want.Marshal()) {
			return &hostKeyMismatchError{addr: addr, want: ssh.FingerprintSHA256(want), got: ssh.FingerprintSHA256(got),
				recorded: recorded}
		}
		presented = got
		return nil
	}
	return check, func() ssh.PublicKey {
		mu.Lock()
		defer mu.Unlock()
		return presented
	}
}

// authorizedKey is key in authorized_keys form without a comment ("ssh-ed25519 AAAA..."), the form of a pin.
func authorizedKey(key ssh.PublicKey) string {
	if key == nil {
		return ""
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// dialOnce makes one connection attempt, bounded by timeout (TCP connect and SSH handshake together).
func dialOnce(ctx context.Context, dial dialFunc, addr string, config *ssh.ClientConfig,
	timeout time.Duration,
) (*ssh.Client, error) {
	dctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	conn, err := dial(dctx, "tcp", addr)
	if err != nil {
		if timeout > 0 && errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("dial tcp %s: timed out after %s", addr, timeout)
		}
		return nil, err
	}
	// Close the connection when the attempt times out or the operation is cancelled: this unblocks the handshake
	// for every kind of net.Conn (deadlines are not supported by connections tunnelled through a proxy).
	var timedOut atomic.Bool
	stop := context.AfterFunc(dctx, func() {
		timedOut.Store(true)
		_ = conn.Close()
	})
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, config)
	stopped := stop()
	if err != nil {
		_ = conn.Close()
		if !stopped && timedOut.Load() && ctx.Err() == nil {
			return nil, fmt.Errorf("ssh handshake with %s timed out after %s", addr, timeout)
		}
		return nil, err
	}
	if !stopped {
		// The timer fired right after a successful handshake; the connection is unusable.
		_ = c.Close()
		return nil, fmt.Errorf("ssh handshake with %s timed out after %s", addr, timeout)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// dialWithRetry connects to c, retrying up to c.DialErrorLimit attempts (-1: until cancelled). It returns the client
// and the key the host presented in its handshake. path names c in errors (connection, or connection.proxy).
func (p *Provider) dialWithRetry(ctx context.Context, c *connection, dial dialFunc, what, path string,
	log *resourceLogger,
) (*ssh.Client, ssh.PublicKey, error) {
	hostKey, err := newHostKeyCheck(c, path+".hostKey")
	if err != nil {
		return nil, nil, err
	}
	auth, cleanup, err := authMethods(c)
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	timeout := time.Duration(c.PerDialTimeout) * time.Second
	config := ssh.ClientConfig{
		User:              c.User,
		Auth:              auth,
		HostKeyAlgorithms: hostKey.algorithms,
		Timeout:           timeout,
	}
	addr := c.address()
	limit := c.DialErrorLimit
	if limit == 0 {
		limit = 1
	}
	delay := p.retryDelay
	if delay <= 0 {
		delay = defaultRetryDelay
	}
	maxDelay := p.maxRetryDelay
	if maxDelay <= 0 {
		maxDelay = defaultMaxRetryDelay
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		// Each attempt has its own callback: the key it records is the one this connection's handshake presented.
		attemptConfig := config
		var presented func() ssh.PublicKey
		attemptConfig.HostKeyCallback, presented = hostKey.callback()
		client, err := dialOnce(ctx, dial, addr, &attemptConfig, timeout)
		if err == nil {
			return client, presented(), nil
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("connecting to %s %s: %w", what, c.target(), ctx.Err())
		}
		var mismatch *hostKeyMismatchError
		if errors.As(err, &mismatch) {
			return nil, nil, mismatch
		}
		if limit > 0 && attempt >= limit {
			hint := ""
			if c.UnreachableHint != nil && *c.UnreachableHint != "" {
				hint = "\n" + *c.UnreachableHint
			}
			return nil, nil, fmt.Errorf("failed to connect to %s %s after %d attempt(s) in %s "+
				"(connection.dialErrorLimit %d, perDialTimeout %ds): %w%s",
				what, c.target(), attempt, time.Since(start).Round(100*time.Millisecond), limit, c.PerDialTimeout, err, hint)
		}
		limitText := "unlimited"
		if limit > 0 {
			limitText = fmt.Sprint(limit)
		}
		log.debugf("ssh: attempt %d/%s to connect to %s %s failed: %v; retrying in %s",
			attempt, limitText, what, c.target(), err, delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("connecting to %s %s: %w", what, c.target(), ctx.Err())
		}
		delay = time.Duration(float64(delay) * retryBackoff)
		if delay > maxDelay {
			delay = maxDelay
		}
	}
}

// connect dials the remote host, through the bastion host when connection.proxy is set. The client carries the key
// the remote host presented (the target's, not the proxy's).
func (p *Provider) connect(ctx context.Context, c *connection, log *resourceLogger) (*sshClient, error) {
	var d net.Dialer
	if c.Proxy == nil {
		client, key, err := p.dialWithRetry(ctx, c, d.DialContext, "host", string(keyConnection), log)
		if err != nil {
			return nil, err
		}
		return &sshClient{Client: client, hostKey: key}, nil
	}
	proxy, _, err := p.dialWithRetry(ctx, c.Proxy, d.DialContext, "proxy host", string(keyConnection)+".proxy", log)
	if err != nil {
		return nil, err
	}
	client, key, err := p.dialWithRetry(ctx, c, proxy.DialContext, "host", string(keyConnection), log)
	if err != nil {
		_ = proxy.Close()
		return nil, err
	}
	return &sshClient{Client: client, hostKey: key, closers: []func() error{proxy.Close}}, nil
}

// outputWriter captures one output stream, feeds the combined buffer and logs complete lines.
type outputWriter struct {
	mu       *sync.Mutex
	own      *bytes.Buffer
	combined *bytes.Buffer
	partial  []byte
	emit     func(line string) // nil: the stream is not logged
}

func (w *outputWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.own.Write(p)
	w.combined.Write(p)
	w.mu.Unlock()
	if w.emit != nil {
		w.partial = append(w.partial, p...)
		for {
			i := bytes.IndexByte(w.partial, '\n')
			if i < 0 {
				break
			}
			line := string(w.partial[:i])
			w.partial = w.partial[i+1:]
			w.emit(strings.TrimSuffix(line, "\r"))
		}
	}
	return len(p), nil
}

func (w *outputWriter) flush() {
	if w.emit != nil && len(w.partial) > 0 {
		w.emit(strings.TrimSuffix(string(w.partial), "\r"))
		w.partial = nil
	}
}

// runResult is what a run of a script reports.
type runResult struct {
	// stdout and stderr, each without its trailing newline.
	stdout, stderr string
	// hostKey is the key the host presented in the handshake of the connection the script ran on, in
	// authorized_keys form without a comment; empty when no session was opened (then nothing ran).
	hostKey string
}

// run executes spec.command on the remote host and returns its output and the host's key. The key is returned with
// the error of a script that started (startedError) as well.
func (p *Provider) run(ctx context.Context, spec runSpec) (runResult, error) {
	log := spec.log
	dialAt := time.Now()
	conn, session, err := p.newSession(ctx, spec.conn, log)
	if err != nil {
		return runResult{}, err
	}
	defer conn.release()
	defer session.Close()
	result := runResult{hostKey: authorizedKey(conn.hostKey())}

	for _, k := range sortedKeys(spec.env) {
		if err := session.Setenv(k, spec.env[k]); err != nil {
			return runResult{}, fmt.Errorf("unable to set the environment variable %q on %s: %v. Does the SSH server "+
				"permit it? It must be listed in AcceptEnv in the server's sshd_config; alternatively prefix the "+
				"command with the variable, as in 'VAR=value command'", k, spec.conn.target(), err)
		}
	}
	for _, prev := range []struct {
		name  string
		value *string
	}{{envPreviousStdout, spec.prevStdout}, {envPreviousStderr, spec.prevStderr}} {
		if prev.value == nil || *prev.value == "" {
			continue
		}
		if err := session.Setenv(prev.name, *prev.value); err != nil {
			log.warnf("unable to set %s on %s (%v): the SSH server must list it in AcceptEnv in sshd_config; "+
				"set addPreviousOutputInEnv to false to silence this warning", prev.name, spec.conn.target(), err)
		}
	}

	var mu sync.Mutex
	var stdout, stderr, combined bytes.Buffer
	outW := &outputWriter{mu: &mu, own: &stdout, combined: &combined}
	errW := &outputWriter{mu: &mu, own: &stderr, combined: &combined}
	if log.logsStdout() && !spec.quiet {
		outW.emit = log.output
	}
	if log.logsStderr() && !spec.quiet {
		errW.emit = log.output
	}
	session.Stdout = outW
	session.Stderr = errW
	if stdin := spec.conn.stdinFor(spec.stdin); stdin != nil {
		session.Stdin = strings.NewReader(*stdin)
	}

	startAt := time.Now()
	if err := session.Start(spec.command); err != nil {
		return runResult{}, fmt.Errorf("starting the command on %s: %w", spec.conn.target(), err)
	}
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Kill the command and close its session; the connection stays for the other steps on it,
		// unless it does not answer the close (then it is closed, as a dead one).
		_ = session.Signal(ssh.SIGKILL)
		_ = session.Close()
		select {
		case <-done:
		case <-time.After(sessionCloseWait):
			conn.discard()
			<-done
		}
		err = fmt.Errorf("cancelled: %w", ctx.Err())
	}
	recordTiming(log.urn, dialAt, startAt, time.Now(), err != nil)
	outW.flush()
	errW.flush()

	result.stdout = strings.TrimSuffix(stdout.String(), "\n")
	result.stderr = strings.TrimSuffix(stderr.String(), "\n")
	if err != nil {
		return result, &startedError{err: p.commandError(spec, err, combined.String())}
	}
	return result, nil
}

// startedError is the error of a script that started on the host and then failed (or was cancelled): it may have
// changed the host. Any other error of run (the host not reached, a session refused) means it did not start.
type startedError struct{ err error }

func (e *startedError) Error() string { return e.err.Error() }
func (e *startedError) Unwrap() error { return e.err }

// started reports whether err is the error of a script that started on the host.
func started(err error) bool {
	var s *startedError
	return errors.As(err, &s)
}

func (p *Provider) commandError(spec runSpec, err error, output string) error {
	var detail string
	switch {
	case spec.log != nil && spec.log.logging == LoggingNone:
		detail = "\n(the command's output is not shown because logging is \"none\")"
	case strings.TrimSpace(output) == "":
		detail = "\n(the command produced no output)"
	default:
		output = strings.TrimSuffix(output, "\n")
		if len(output) > maxErrorOutput {
			output = "[... output truncated ...]\n" + output[len(output)-maxErrorOutput:]
		}
		detail = "\noutput:\n" + output
	}
	var scrub *scrubber
	if spec.log != nil {
		scrub = spec.log.scrub
	}
	return errors.New(scrub.scrub(fmt.Sprintf("remote command failed on %s: %v%s", spec.conn.target(), err, detail)))
}
