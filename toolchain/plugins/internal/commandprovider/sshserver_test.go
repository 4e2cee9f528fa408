package commandprovider

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// testSSHServer is an SSH server on 127.0.0.1 that runs `exec` requests with /bin/sh -c, honouring `env` requests
// and stdin. It authenticates one ed25519 client key (or a password).
type testSSHServer struct {
	t    *testing.T
	addr string
	port int
	// hostKey is the first of its host keys (its only one, unless made by newTestSSHServerWithHostKeys).
	hostKey  ssh.PublicKey
	user     string
	password string

	// Client credentials, in the forms the provider takes.
	clientKeyPEM string

	// Environment variable names the server refuses (as sshd does without AcceptEnv).
	refuseEnv map[string]bool
	// maxSessions: sessions one connection may have open at once (sshd's MaxSessions); 0: no limit.
	maxSessions int

	mu         sync.Mutex
	authorized [][]byte
	conns      int
	sessions   int
	commands   []string
	users      []string
	envs       []map[string]string
	stdins     []string
	forwards   []string

	live     []net.Conn // every accepted connection, closed at cleanup
	listener net.Listener
	wg       sync.WaitGroup
}

func marshalEd25519PEM(t *testing.T, key ed25519.PrivateKey, passphrase string) string {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(key, "test key")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "test key", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block))
}

// newHostSigner is a new ed25519 host key.
func newHostSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	return hostSigner
}

func newTestSSHServer(t *testing.T) *testSSHServer {
	t.Helper()
	return newTestSSHServerWithHostKeys(t, newHostSigner(t))
}

// newTestSSHServerWithHostKeys is a server with these host keys (several: one of each type, as sshd has; the same
// one as another server: the same machine at another address).
func newTestSSHServerWithHostKeys(t *testing.T, hostSigners ...ssh.Signer) *testSSHServer {
	t.Helper()
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	authorized, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	s := &testSSHServer{
		t:            t,
		hostKey:      hostSigners[0].PublicKey(),
		user:         "tester",
		password:     "correct horse battery staple",
		clientKeyPEM: marshalEd25519PEM(t, clientPriv, ""),
		refuseEnv:    map[string]bool{},
		authorized:   [][]byte{authorized.Marshal()},
	}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, a := range s.authorized {
				if meta.User() == s.user && bytes.Equal(key.Marshal(), a) {
					return nil, nil
				}
			}
			return nil, errors.New("unknown key")
		},
		PasswordCallback: func(meta ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			if meta.User() == s.user && string(password) == s.password {
				return nil, nil
			}
			return nil, errors.New("wrong password")
		},
	}
	for _, hostSigner := range hostSigners {
		config.AddHostKey(hostSigner)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.listener = l
	s.addr = l.Addr().String()
	s.port = l.Addr().(*net.TCPAddr).Port
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(c, config)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		// The provider keeps its connections open (pool.go): close the ones still up.
		s.dropConnections()
		s.wg.Wait()
	})
	return s
}

func (s *testSSHServer) serveConn(c net.Conn, config *ssh.ServerConfig) {
	defer c.Close()
	s.mu.Lock()
	s.conns++
	s.live = append(s.live, c)
	s.mu.Unlock()
	sc, chans, reqs, err := ssh.NewServerConn(c, config)
	if err != nil {
		return
	}
	defer sc.Close()
	// Commands are killed when the client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = sc.Wait()
		cancel()
	}()
	s.mu.Lock()
	s.users = append(s.users, sc.User())
	s.mu.Unlock()
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	var open atomic.Int32 // sessions open on this connection
	for nc := range chans {
		if nc.ChannelType() == "direct-tcpip" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.forward(nc)
			}()
			continue
		}
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		s.mu.Lock()
		limit := s.maxSessions
		s.mu.Unlock()
		if limit > 0 && int(open.Load()) >= limit {
			// As sshd past its MaxSessions.
			_ = nc.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
		open.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer open.Add(-1)
			s.serveSession(ctx, ch, requests)
		}()
	}
	wg.Wait()
}

// forward serves a direct-tcpip channel (the server acting as a bastion host).
func (s *testSSHServer) forward(nc ssh.NewChannel) {
	var req struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &req); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad request")
		return
	}
	s.mu.Lock()
	s.forwards = append(s.forwards, net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))))
	s.mu.Unlock()
	target, err := net.Dial("tcp", net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))))
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	defer target.Close()
	ch, requests, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(requests)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(target, ch); done <- struct{}{} }()
	go func() { _, _ = io.Copy(ch, target); done <- struct{}{} }()
	<-done
}

// sshString reads an RFC 4251 string from b.
func sshString(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint32(len(b)-4) < n {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

func (s *testSSHServer) serveSession(ctx context.Context, ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	env := map[string]string{}
	for req := range requests {
		switch req.Type {
		case "env":
			name, rest, ok1 := sshString(req.Payload)
			value, _, ok2 := sshString(rest)
			if !ok1 || !ok2 || s.refuseEnv[name] {
				_ = req.Reply(false, nil)
				continue
			}
			env[name] = value
			_ = req.Reply(true, nil)
		case "exec":
			command, _, ok := sshString(req.Payload)
			if !ok {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			s.exec(ctx, ch, command, env)
			return
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

func (s *testSSHServer) exec(ctx context.Context, ch ssh.Channel, command string, env map[string]string) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.WaitDelay = time.Second
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	envCopy := map[string]string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
		envCopy[k] = v
	}
	var stdin bytes.Buffer
	cmd.Stdin = io.TeeReader(ch, &stdin)
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	err := cmd.Run()
	status := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			status = ws.ExitStatus()
		} else {
			status = 255
		}
	} else if err != nil {
		status = 127
	}
	s.mu.Lock()
	s.commands = append(s.commands, command)
	s.envs = append(s.envs, envCopy)
	s.stdins = append(s.stdins, stdin.String())
	s.mu.Unlock()
	_ = ch.CloseWrite()
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
}

// dropConnections closes every connection the server accepted, as a host going away does.
func (s *testSSHServer) dropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.live {
		_ = c.Close()
	}
}

func (s *testSSHServer) stats() (conns, sessions int, commands []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.sessions, append([]string(nil), s.commands...)
}

func (s *testSSHServer) lastEnv() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.envs) == 0 {
		return nil
	}
	return s.envs[len(s.envs)-1]
}

func (s *testSSHServer) lastStdin() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stdins) == 0 {
		return ""
	}
	return s.stdins[len(s.stdins)-1]
}

// authorize accepts another client key.
func (s *testSSHServer) authorize(key ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorized = append(s.authorized, key.Marshal())
}

// authorizedHostKey is the server's host key in authorized_keys format.
func (s *testSSHServer) authorizedHostKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.hostKey)))
}
