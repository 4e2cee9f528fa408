package commandprovider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// createWithTimeout is create with the resource's custom timeout (seconds; 0: none).
func createWithTimeout(t *testing.T, p *Provider, news resource.PropertyMap, timeout float64,
) (resource.PropertyMap, error) {
	t.Helper()
	inputs := check(t, p, news)
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs), Timeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	return mustUnmarshal(t, resp.GetProperties()), nil
}

// createAll runs the commands at once, each as a Create of its own, and returns each one's stdout
// or error, in order.
func createAll(t *testing.T, p *Provider, s *testSSHServer, commands []string) ([]string, []error) {
	t.Helper()
	outs := make([]string, len(commands))
	errs := make([]error, len(commands))
	var wg sync.WaitGroup
	for i, command := range commands {
		news := resource.PropertyMap{"connection": connectionTo(s, nil), "create": str(command)}
		inputs := check(t, p, news)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
				Urn: testURN, Type: StepToken, Name: "test", Properties: mustMarshal(t, inputs),
			})
			if err != nil {
				errs[i] = err
				return
			}
			props := mustUnmarshal(t, resp.GetProperties())
			outs[i] = props["stdout"].StringValue()
		}()
	}
	wg.Wait()
	return outs, errs
}

// ageConnections makes every pooled connection of p look idle for a minute (probed before reuse).
func ageConnections(p *Provider) {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	for _, list := range p.pool.conns {
		for _, pc := range list {
			pc.lastUsed = time.Now().Add(-time.Minute)
		}
	}
}

func TestStepsOnOneHostShareOneConnection(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	for i := range 3 {
		_, outs := mustCreate(t, p, resource.PropertyMap{
			"connection": connectionTo(s, nil), "create": str(fmt.Sprintf("echo step-%d", i)),
		})
		if got := outs["stdout"].StringValue(); got != fmt.Sprintf("step-%d", i) {
			t.Errorf("step %d: stdout %q", i, got)
		}
	}
	if conns, sessions, _ := s.stats(); conns != 1 || sessions != 3 {
		t.Errorf("3 steps: %d connections, %d sessions; want 1 connection, 3 sessions", conns, sessions)
	}
}

func TestStepsStartingTogetherShareTheFirstDial(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	commands := make([]string, maxSessionsPerConn+2)
	for i := range commands {
		commands[i] = fmt.Sprintf("sleep 0.3; echo %d", i)
	}
	outs, errs := createAll(t, p, s, commands)
	for i := range commands {
		if errs[i] != nil || outs[i] != fmt.Sprint(i) {
			t.Errorf("step %d: stdout %q, err %v", i, outs[i], errs[i])
		}
	}
	// maxSessionsPerConn on the first connection, the other two on a second one.
	if conns, sessions, _ := s.stats(); conns != 2 || sessions != len(commands) {
		t.Errorf("%d steps at once: %d connections, %d sessions; want 2 connections", len(commands), conns, sessions)
	}
}

func TestServerSessionLimitOpensAnotherConnection(t *testing.T) {
	s := newTestSSHServer(t)
	s.maxSessions = 2
	p, _ := newTestProvider(t)
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")})
	commands := []string{"sleep 0.5; echo 0", "sleep 0.5; echo 1", "sleep 0.5; echo 2", "sleep 0.5; echo 3", "sleep 0.5; echo 4"}
	outs, errs := createAll(t, p, s, commands)
	for i := range commands {
		if errs[i] != nil || outs[i] != fmt.Sprint(i) {
			t.Errorf("step %d: stdout %q, err %v", i, outs[i], errs[i])
		}
	}
	if conns, _, _ := s.stats(); conns < 3 {
		t.Errorf("5 steps at once on a server allowing 2 sessions per connection: %d connections, want at least 3", conns)
	}
}

func TestClosedConnectionIsDialledAgain(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	news := resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("echo again")}
	mustCreate(t, p, news)
	// The host drops the connection (sshd restarted, host rebooted).
	s.dropConnections()
	time.Sleep(50 * time.Millisecond)
	if _, outs := mustCreate(t, p, news); outs["stdout"].StringValue() != "again" {
		t.Errorf("after the connection closed: stdout %q", outs["stdout"].StringValue())
	}
	// And when it was idle long enough to be probed first.
	s.dropConnections()
	ageConnections(p)
	if _, outs := mustCreate(t, p, news); outs["stdout"].StringValue() != "again" {
		t.Errorf("after an idle connection closed: stdout %q", outs["stdout"].StringValue())
	}
	if conns, _, _ := s.stats(); conns != 3 {
		t.Errorf("%d connections, want 3 (one per drop)", conns)
	}
}

func TestIdleConnectionThatAnswersIsReused(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	news := resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")}
	mustCreate(t, p, news)
	ageConnections(p)
	mustCreate(t, p, news)
	if conns, _, _ := s.stats(); conns != 1 {
		t.Errorf("%d connections, want 1: the idle one answered the keepalive", conns)
	}
}

func TestOtherCredentialsGetTheirOwnConnection(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")})
	mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{"privateKey": resource.NewNullProperty(), "password": str(s.password)}),
		"create":     str("true"),
	})
	// Dial settings alone do not make another connection.
	mustCreate(t, p, resource.PropertyMap{
		"connection": connectionTo(s, resource.PropertyMap{"dialErrorLimit": resource.NewNumberProperty(7)}),
		"create":     str("true"),
	})
	if conns, _, _ := s.stats(); conns != 2 {
		t.Errorf("%d connections, want 2 (key, password)", conns)
	}
}

func TestTimeoutOfOneStepLeavesTheOthersOnItsConnection(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")})
	done := make(chan error, 1)
	var longOut resource.PropertyMap
	go func() {
		var err error
		longOut, err = createWithTimeout(t, p, resource.PropertyMap{
			"connection": connectionTo(s, nil), "create": str("sleep 1.5; echo survived"),
		}, 0)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_, err := createWithTimeout(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("sleep 30")}, 0.5)
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Errorf("the step past its timeout: err = %v", err)
	}
	select {
	case err := <-done:
		if err != nil || longOut["stdout"].StringValue() != "survived" {
			t.Errorf("the other step: %v %v", err, longOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other step did not end")
	}
	if conns, _, _ := s.stats(); conns != 1 {
		t.Errorf("%d connections, want 1", conns)
	}
}
