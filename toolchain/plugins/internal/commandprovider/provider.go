// Package commandprovider implements the project's own resource provider plugin, package `spark-remote`
// (pulumi-resource-spark-remote): spark-remote:index:Step, a step run over SSH on a node at creation, update,
// deletion and (its `read` script) refresh; and spark-remote:index:RandomSecret, a secret drawn once and kept in the
// state, from which the program derives the cluster's internal secrets. It started as a build of Pulumi's `command` provider
// (command:remote:Command of @pulumi/command 1.2.1) and keeps that resource's inputs and their semantics, but it is
// not that package: it never announces itself as `command`, so Pulumi's own plugin is never picked for a stack it
// deployed (its Delete would read the delete script from the outputs, where this provider does not echo it).
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
	// PackageName is the Pulumi package this plugin serves. Not `spark-cluster`, the program's own name: the engine
	// gives a package's default provider every stack config key of the package's namespace as its inputs
	// (defaultProviders.newRegisterDefaultProviderEvent, GetPackageConfig), and the program's config is
	// `spark-cluster:*` (the API key, the SSH key, every node).
	PackageName = "spark-remote"
	// StepToken is the type of a step run on a node over SSH.
	StepToken = PackageName + ":index:Step"
	// RandomSecretToken is the type of a secret drawn once and kept in the state (randomsecret.go).
	RandomSecretToken = PackageName + ":index:RandomSecret"
)

// Version is the plugin's version, SPARK_REMOTE_VERSION in toolchain/versions.env; the program's SDK
// (components/sparkRemote.ts) asks the engine for exactly this version. It is a variable so that
// scripts/bootstrap.sh can set it with
// -ldflags "-X spark-cluster.local/toolchain/plugins/internal/commandprovider.Version=...".
var Version = "0.1.0"

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

// GetSchema returns the package's schema (schema.go): the provider and spark-remote:index:Step.
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
	return nil, fmt.Errorf("function %s is not implemented: the %s package has none", req.GetTok(), PackageName)
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
