package commandprovider

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Logger sends diagnostics about a resource to the Pulumi engine. The provider's tests substitute their own.
// Ephemeral messages are status messages: the engine shows them in the resource's progress row but does not keep
// them in the update's diagnostics.
type Logger interface {
	Log(ctx context.Context, severity pulumirpc.LogSeverity, urn string, message string, ephemeral bool)
}

// addressSetter is implemented by loggers that learn the engine's address late (Handshake, Attach).
type addressSetter interface {
	SetEngineAddress(addr string)
}

// EngineLogger is a Logger that calls the Log RPC of the engine whose address was given to the plugin. Without an
// engine address it writes non-debug messages to its fallback writer (stderr).
type EngineLogger struct {
	mu       sync.Mutex
	addr     string
	conn     *grpc.ClientConn
	client   pulumirpc.EngineClient
	fallback io.Writer
	warned   bool
}

// NewEngineLogger returns a logger for the engine at addr (host:port); addr may be empty.
func NewEngineLogger(addr string) *EngineLogger {
	return &EngineLogger{addr: addr, fallback: os.Stderr}
}

// SetEngineAddress switches to the engine at addr when it differs from the current one.
func (l *EngineLogger) SetEngineAddress(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if addr == "" || addr == l.addr {
		return
	}
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn, l.client = nil, nil
	}
	l.addr = addr
}

func (l *EngineLogger) engine() (pulumirpc.EngineClient, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		return l.client, nil
	}
	if l.addr == "" {
		return nil, nil
	}
	conn, err := grpc.NewClient(l.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		rpcutil.GrpcChannelOptions())
	if err != nil {
		return nil, err
	}
	l.conn, l.client = conn, pulumirpc.NewEngineClient(conn)
	return l.client, nil
}

// Log implements Logger.
func (l *EngineLogger) Log(ctx context.Context, severity pulumirpc.LogSeverity, urn string, message string,
	ephemeral bool,
) {
	client, err := l.engine()
	if err == nil && client != nil {
		// The log line must reach the engine even if the operation that produced it is being cancelled.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, err = client.Log(lctx, &pulumirpc.LogRequest{
			Severity: severity, Message: message, Urn: urn, Ephemeral: ephemeral,
		})
		if err == nil {
			return
		}
	}
	if severity == pulumirpc.LogSeverity_DEBUG {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && !l.warned {
		l.warned = true
		fmt.Fprintf(l.fallback, "%s provider: cannot send logs to the engine: %v\n", PackageName, err)
	}
	fmt.Fprintf(l.fallback, "%s: %s\n", severity, message)
}

// Close releases the connection to the engine.
func (l *EngineLogger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close()
	l.conn, l.client = nil, nil
	return err
}

// resourceLogger logs for one resource operation, honouring the resource's `logging` input: with "none" nothing at
// all is logged but a read's drift (warnAlways), otherwise stdout/stderr lines are logged according to the mode, and
// the provider's own messages (dial retries, warnings) are always logged. Every message goes through the secret
// scrubber.
type resourceLogger struct {
	ctx     context.Context
	logger  Logger
	urn     string
	logging string
	scrub   *scrubber
}

func (r *resourceLogger) log(severity pulumirpc.LogSeverity, message string) {
	r.send(severity, message, false)
}

// output logs a line of the command's output. Like upstream (LogStatus), it is an ephemeral INFO message.
func (r *resourceLogger) output(line string) {
	r.send(pulumirpc.LogSeverity_INFO, line, true)
}

func (r *resourceLogger) send(severity pulumirpc.LogSeverity, message string, ephemeral bool) {
	if r == nil || r.logger == nil || r.logging == LoggingNone {
		return
	}
	r.logger.Log(r.ctx, severity, r.urn, r.scrub.scrub(message), ephemeral)
}

func (r *resourceLogger) debugf(format string, args ...any) {
	r.log(pulumirpc.LogSeverity_DEBUG, fmt.Sprintf(format, args...))
}

func (r *resourceLogger) warnf(format string, args ...any) {
	r.log(pulumirpc.LogSeverity_WARNING, fmt.Sprintf(format, args...))
}

// warnAlways logs a warning even with logging "none": what a read found differs, which the state records in plain
// text anyway (the `drift` property), so that a refresh says why it will update a step that logs nothing else (a
// secrets file's step). Scrubbed like every message.
func (r *resourceLogger) warnAlways(format string, args ...any) {
	if r == nil || r.logger == nil {
		return
	}
	r.logger.Log(r.ctx, pulumirpc.LogSeverity_WARNING, r.urn, r.scrub.scrub(fmt.Sprintf(format, args...)), false)
}

func (r *resourceLogger) logsStdout() bool {
	return r != nil && (r.logging == LoggingStdout || r.logging == LoggingStdoutAndStderr)
}

func (r *resourceLogger) logsStderr() bool {
	return r != nil && (r.logging == LoggingStderr || r.logging == LoggingStdoutAndStderr)
}
