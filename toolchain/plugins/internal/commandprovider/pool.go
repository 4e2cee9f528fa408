package commandprovider

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The provider keeps its SSH connections open for its own lifetime (one `pulumi up`, `preview`,
// `refresh` or `destroy`): the steps that run on the same host with the same connection share one
// connection, each in its own session (an SSH channel), instead of dialling, exchanging keys and
// authenticating once per step. Upstream's provider dials per step. What a step runs, its
// environment, stdin, outputs and exit status are the same either way: every step still has a
// session of its own, and sshd starts a new shell for each.

// maxSessionsPerConn is how many steps share one connection at once; the next one opens another
// connection. OpenSSH allows 10 sessions per connection by default (sshd_config's MaxSessions); a
// server that allows fewer refuses the session, and the step opens a connection of its own.
const maxSessionsPerConn = 8

// idleProbeAfter: a connection idle for longer is probed (an SSH keepalive request) before it is
// reused, so that a host that went away (rebooted, unplugged) is dialled again rather than waited
// on. maxProbeTimeout bounds the probe (or perDialTimeout, when shorter).
const (
	idleProbeAfter  = 2 * time.Second
	maxProbeTimeout = 5 * time.Second
)

// pooledConn is one open connection and the steps using it.
type pooledConn struct {
	client   *sshClient
	inUse    int
	limit    int // sessions it may hold at once: maxSessionsPerConn, or fewer when its server refused one
	lastUsed time.Time
	broken   bool // closed or failed: never handed out again
}

// connPool holds the open connections by connection key (connKey).
type connPool struct {
	mu    sync.Mutex
	conns map[string][]*pooledConn
	// dialing: the dial in flight per key. Steps that start together wait for it and share its
	// connection rather than each opening one; when it fails, each of them dials on its own (their
	// dial settings may differ).
	dialing map[string]*dialCall
}

// connKey identifies the connections a step may share: the same host, port, user, credentials,
// expected host key (the connection's, or the one the step recorded; none: first contact) and proxy
// (hashed, so that the map holds no credential). The dial settings (dialErrorLimit, perDialTimeout,
// the unreachable hint) only say how to open a connection, so steps that differ in them share one.
func connKey(c *connection) string {
	type keyed struct {
		Host, User                                               string
		Port                                                     int
		Password, PrivateKey, PrivateKeyPassword, Agent, HostKey *string
		Proxy                                                    *keyed
	}
	var key func(c *connection) *keyed
	key = func(c *connection) *keyed {
		if c == nil {
			return nil
		}
		return &keyed{c.Host, c.User, c.Port, c.Password, c.PrivateKey, c.PrivateKeyPassword, c.AgentSocketPath,
			c.HostKey, key(c.Proxy)}
	}
	text, _ := json.Marshal(key(c))
	sum := sha256.Sum256(text)
	return string(sum[:])
}

// dialCall is a dial in flight: done is closed when it ends, ok says whether it connected.
type dialCall struct {
	done chan struct{}
	ok   bool
}

// lease is a step's use of a pooled connection; release gives it back.
type lease struct {
	pool *connPool
	conn *pooledConn
}

func (l *lease) client() *ssh.Client { return l.conn.client.Client }

// hostKey is the key the host presented in the handshake that opened the connection: every step on it reports
// that one.
func (l *lease) hostKey() ssh.PublicKey { return l.conn.client.hostKey }

// release gives the connection back to the pool.
func (l *lease) release() {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	l.conn.inUse--
	l.conn.lastUsed = time.Now()
}

// discard closes the connection and takes it out of the pool (the steps still on it fail, as they
// would have anyway on a dead connection).
func (l *lease) discard() {
	l.pool.mu.Lock()
	l.conn.broken = true
	l.pool.mu.Unlock()
	_ = l.conn.client.Close()
}

// full marks the connection as holding all the sessions its server allows: later steps get another.
func (l *lease) full() {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	if l.conn.inUse <= 1 {
		// Not even one session: the connection is no use.
		l.conn.broken = true
		go func(c *sshClient) { _ = c.Close() }(l.conn.client)
		return
	}
	l.conn.limit = l.conn.inUse - 1 // the sessions it holds, without the refused one
}

// take hands out an open connection with room for one more session, or nil.
func (cp *connPool) take(key string) (*pooledConn, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.conns[key]) == 0 {
		return nil, false
	}
	live := cp.conns[key][:0]
	var found *pooledConn
	for _, pc := range cp.conns[key] {
		if pc.broken {
			continue
		}
		live = append(live, pc)
		if found == nil && pc.inUse < pc.limit {
			found = pc
		}
	}
	cp.conns[key] = live
	if found == nil {
		return nil, false
	}
	idle := found.inUse == 0 && time.Since(found.lastUsed) > idleProbeAfter
	found.inUse++
	return found, idle
}

// alive sends an SSH keepalive request on an idle connection and waits for the answer.
func alive(ctx context.Context, c *ssh.Client, timeout time.Duration) bool {
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-answered:
		return err == nil
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// acquire returns a connection to c with room for a session: an open one when there is one (probed
// first when it was idle), else a new one (fresh).
func (p *Provider) acquire(ctx context.Context, c *connection, log *resourceLogger) (l *lease, fresh bool, err error) {
	key := connKey(c)
	for {
		pc, idle := p.pool.take(key)
		if pc == nil {
			break
		}
		l := &lease{pool: &p.pool, conn: pc}
		if !idle {
			return l, false, nil
		}
		timeout := maxProbeTimeout
		if d := time.Duration(c.PerDialTimeout) * time.Second; d > 0 && d < timeout {
			timeout = d
		}
		if alive(ctx, pc.client.Client, timeout) {
			return l, false, nil
		}
		log.debugf("ssh: the open connection to %s did not answer a keepalive; connecting again", c.target())
		l.release()
		l.discard()
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("connecting to host %s: %w", c.target(), ctx.Err())
		}
	}
	return p.dial(ctx, c, key, log, true)
}

// dial opens a new connection for key and adds it to the pool. first: when another step is dialling
// the same key, wait for it and take a session on its connection instead (once).
func (p *Provider) dial(ctx context.Context, c *connection, key string, log *resourceLogger, first bool,
) (*lease, bool, error) {
	cp := &p.pool
	cp.mu.Lock()
	if inFlight, ok := cp.dialing[key]; ok && first {
		cp.mu.Unlock()
		select {
		case <-inFlight.done:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("connecting to host %s: %w", c.target(), ctx.Err())
		}
		if pc, _ := cp.take(key); pc != nil {
			return &lease{pool: cp, conn: pc}, false, nil
		}
		// Its connection is full already: dial the next one (or wait for whoever does). When it
		// failed, dial on our own.
		return p.dial(ctx, c, key, log, inFlight.ok)
	}
	var call *dialCall
	if _, ok := cp.dialing[key]; !ok {
		if cp.dialing == nil {
			cp.dialing = map[string]*dialCall{}
		}
		call = &dialCall{done: make(chan struct{})}
		cp.dialing[key] = call
	}
	cp.mu.Unlock()

	client, err := p.connect(ctx, c, log)
	var pc *pooledConn
	cp.mu.Lock()
	if call != nil {
		call.ok = err == nil
		delete(cp.dialing, key)
		close(call.done)
	}
	if err == nil {
		pc = &pooledConn{client: client, inUse: 1, limit: maxSessionsPerConn, lastUsed: time.Now()}
		if cp.conns == nil {
			cp.conns = map[string][]*pooledConn{}
		}
		cp.conns[key] = append(cp.conns[key], pc)
	}
	cp.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	return &lease{pool: cp, conn: pc}, true, nil
}

// newSession opens a session for one step: on a shared connection when one is open, else on a new
// one. A shared connection that cannot open it (closed under us, or at its server's session limit)
// is left, and the step gets a connection of its own.
func (p *Provider) newSession(ctx context.Context, c *connection, log *resourceLogger) (*lease, *ssh.Session, error) {
	for attempt := 0; attempt < 2*maxSessionsPerConn; attempt++ {
		l, fresh, err := p.acquire(ctx, c, log)
		if err != nil {
			return nil, nil, err
		}
		session, err := l.client().NewSession()
		if err == nil {
			return l, session, nil
		}
		var refused *ssh.OpenChannelError
		switch {
		case fresh:
			l.release()
			l.discard()
			return nil, nil, fmt.Errorf("opening an ssh session on %s: %w", c.target(), err)
		case errors.As(err, &refused):
			log.debugf("ssh: %s refused one more session on an open connection (%v); opening another", c.target(), err)
			l.full()
			l.release()
		default:
			log.debugf("ssh: the open connection to %s failed (%v); connecting again", c.target(), err)
			l.release()
			l.discard()
		}
	}
	return nil, nil, fmt.Errorf("opening an ssh session on %s: no connection would take one", c.target())
}

// closeAll closes every pooled connection (the provider is shutting down).
func (cp *connPool) closeAll() {
	cp.mu.Lock()
	var all []*pooledConn
	for _, list := range cp.conns {
		all = append(all, list...)
	}
	cp.conns = nil
	cp.mu.Unlock()
	for _, pc := range all {
		_ = pc.client.Close()
	}
}
