// Package commandprovider implements the `command` resource provider plugin used by the project, compatible with
// the npm SDK @pulumi/command@1.2.1. Only command:remote:Command is implemented: a command run over SSH on resource
// creation, update and deletion.
package commandprovider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	// PackageName is the Pulumi package this plugin serves.
	PackageName = "command"
	// RemoteCommandToken is the only resource type implemented.
	RemoteCommandToken = "command:remote:Command"
)

// Version is the version of the npm SDK this plugin is compatible with; the engine loads the plugin by it. It is a
// variable so that scripts/bootstrap.sh can set it from toolchain/versions.env with
// -ldflags "-X spark-cluster.local/toolchain/plugins/internal/commandprovider.Version=...".
var Version = "1.2.1"

// Provider implements pulumirpc.ResourceProviderServer.
type Provider struct {
	pulumirpc.UnimplementedResourceProviderServer

	logger Logger

	// Dial retry delays; zero means the defaults. Tests shorten them.
	retryDelay    time.Duration
	maxRetryDelay time.Duration

	// pool holds the SSH connections the steps share (pool.go).
	pool connPool

	// cancelled is closed by Cancel; every running operation is then aborted.
	cancelOnce sync.Once
	cancelled  chan struct{}
}

var _ pulumirpc.ResourceProviderServer = (*Provider)(nil)

// New returns a provider that reports diagnostics through logger (nil: no diagnostics).
func New(logger Logger) *Provider {
	return &Provider{logger: logger, cancelled: make(chan struct{})}
}

func (p *Provider) setEngineAddress(addr string) {
	if s, ok := p.logger.(addressSetter); ok && addr != "" {
		s.SetEngineAddress(addr)
	}
}

// operationContext derives the context of a resource operation: cancelled with the request, by Cancel, and after the
// resource's custom timeout (seconds) when there is one.
func (p *Provider) operationContext(ctx context.Context, timeoutSeconds float64) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if timeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutSeconds*float64(time.Second)))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	go func() {
		select {
		case <-p.cancelled:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// GetPluginInfo returns the plugin's version.
func (p *Provider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: Version}, nil
}

// Handshake is the first call of current engines. Its answer replaces Configure's for the protocol features, so it
// has to announce secrets and resource references as well.
func (p *Provider) Handshake(_ context.Context, req *pulumirpc.ProviderHandshakeRequest,
) (*pulumirpc.ProviderHandshakeResponse, error) {
	p.setEngineAddress(req.GetEngineAddress())
	return &pulumirpc.ProviderHandshakeResponse{
		AcceptSecrets:   true,
		AcceptResources: true,
	}, nil
}

// Attach is used when the engine attaches to an already running provider (PULUMI_DEBUG_PROVIDERS).
func (p *Provider) Attach(_ context.Context, req *pulumirpc.PluginAttach) (*emptypb.Empty, error) {
	p.setEngineAddress(req.GetAddress())
	return &emptypb.Empty{}, nil
}

// GetSchema returns a minimal schema of the package: the provider and command:remote:Command.
func (p *Provider) GetSchema(context.Context, *pulumirpc.GetSchemaRequest) (*pulumirpc.GetSchemaResponse, error) {
	return &pulumirpc.GetSchemaResponse{Schema: schemaJSON()}, nil
}

// CheckConfig accepts any provider configuration (the package has none).
func (p *Provider) CheckConfig(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: req.GetNews()}, nil
}

// DiffConfig reports a change when the provider's inputs differ; a provider is never replaced.
func (p *Provider) DiffConfig(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds := req.GetOldInputs()
	if olds == nil {
		olds = req.GetOlds()
	}
	oldMap, err := unmarshal("olds", olds)
	if err != nil {
		return nil, err
	}
	newMap, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	var changed []string
	keys := map[resource.PropertyKey]bool{}
	for k := range oldMap {
		keys[k] = true
	}
	for k := range newMap {
		keys[k] = true
	}
	for k := range keys {
		o, n := oldMap[k], newMap[k]
		if n.ContainsUnknowns() || !stripSecrets(o).DeepEquals(stripSecrets(n)) {
			changed = append(changed, string(k))
		}
	}
	if len(changed) == 0 {
		return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
	}
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_SOME, Diffs: changed}, nil
}

// Configure announces the protocol features the provider supports.
func (p *Provider) Configure(context.Context, *pulumirpc.ConfigureRequest) (*pulumirpc.ConfigureResponse, error) {
	return &pulumirpc.ConfigureResponse{
		AcceptSecrets:   true,
		AcceptResources: true,
		SupportsPreview: true,
	}, nil
}

// Invoke: the package's functions are not implemented.
func (p *Provider) Invoke(_ context.Context, req *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	return nil, fmt.Errorf("function %s is not implemented by this build of the command provider", req.GetTok())
}

// GetMapping: the package has no mappings for converters.
func (p *Provider) GetMapping(context.Context, *pulumirpc.GetMappingRequest) (*pulumirpc.GetMappingResponse, error) {
	return &pulumirpc.GetMappingResponse{}, nil
}

// GetMappings: the package has no mappings for converters.
func (p *Provider) GetMappings(context.Context, *pulumirpc.GetMappingsRequest,
) (*pulumirpc.GetMappingsResponse, error) {
	return &pulumirpc.GetMappingsResponse{}, nil
}

// Close closes the SSH connections the provider kept open (pool.go); the plugin calls it when the
// engine is done with it.
func (p *Provider) Close() { p.pool.closeAll() }

// Cancel aborts every running operation; the engine calls it before shutting the plugin down.
func (p *Provider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	p.cancelOnce.Do(func() { close(p.cancelled) })
	return &emptypb.Empty{}, nil
}
