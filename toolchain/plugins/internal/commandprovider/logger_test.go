package commandprovider

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fakeEngine implements the engine's Log RPC.
type fakeEngine struct {
	pulumirpc.UnimplementedEngineServer
	mu   sync.Mutex
	logs []*pulumirpc.LogRequest
}

func (e *fakeEngine) Log(_ context.Context, req *pulumirpc.LogRequest) (*emptypb.Empty, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logs = append(e.logs, req)
	return &emptypb.Empty{}, nil
}

func startFakeEngine(t *testing.T) (*fakeEngine, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	engine := &fakeEngine{}
	srv := grpc.NewServer()
	pulumirpc.RegisterEngineServer(srv, engine)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return engine, l.Addr().String()
}

func TestEngineLoggerSendsToEngine(t *testing.T) {
	engine, addr := startFakeEngine(t)
	logger := NewEngineLogger(addr)
	defer logger.Close()
	logger.Log(context.Background(), pulumirpc.LogSeverity_INFO, testURN, "hello from the command", true)
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if len(engine.logs) != 1 {
		t.Fatalf("engine received %d logs", len(engine.logs))
	}
	got := engine.logs[0]
	if got.GetSeverity() != pulumirpc.LogSeverity_INFO || got.GetUrn() != testURN ||
		got.GetMessage() != "hello from the command" || !got.GetEphemeral() {
		t.Errorf("log request = %v", got)
	}
}

func TestEngineLoggerAddressFromHandshake(t *testing.T) {
	engine, addr := startFakeEngine(t)
	var fallback bytes.Buffer
	logger := NewEngineLogger("")
	logger.fallback = &fallback
	defer logger.Close()
	p := New(logger)

	// Before the engine is known, messages go to the fallback writer (debug ones are dropped).
	logger.Log(context.Background(), pulumirpc.LogSeverity_DEBUG, testURN, "debug-line", false)
	logger.Log(context.Background(), pulumirpc.LogSeverity_WARNING, testURN, "early-warning", false)
	if out := fallback.String(); !strings.Contains(out, "early-warning") || strings.Contains(out, "debug-line") {
		t.Errorf("fallback output = %q", out)
	}

	if _, err := p.Handshake(context.Background(),
		&pulumirpc.ProviderHandshakeRequest{EngineAddress: addr}); err != nil {
		t.Fatal(err)
	}
	logger.Log(context.Background(), pulumirpc.LogSeverity_INFO, testURN, "after-handshake", false)
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if len(engine.logs) != 1 || engine.logs[0].GetMessage() != "after-handshake" {
		t.Errorf("engine logs = %v", engine.logs)
	}
}
