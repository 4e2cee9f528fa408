// Package nodehost implements the Pulumi LanguageRuntime service for Node.js
// programs: it discovers the resource plugins a program needs and runs the
// program through the `@pulumi/pulumi/cmd/run` entry point of the program's
// own node_modules.
package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	// runModule is the SDK's program launcher, resolved from the program directory.
	runModule = "@pulumi/pulumi/cmd/run"
	// exitCodeUserActionable is what the launcher exits with after it has already
	// shown the user an actionable message: the engine must not add its own.
	exitCodeUserActionable = 32
)

// Host implements pulumirpc.LanguageRuntimeServer.
type Host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	mu            sync.Mutex
	engineAddress string
}

// New returns a host that reports to the engine at engineAddress (which may be
// empty until Handshake supplies it).
func New(engineAddress string) *Host {
	return &Host{engineAddress: engineAddress}
}

func (h *Host) engine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engineAddress
}

// Handshake records the engine address sent by engines that start language
// hosts without a positional argument.
func (h *Host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

// GetPluginInfo reports the Pulumi SDK version this host was built against.
func (h *Host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

// GetRequiredPackages lists the resource plugins named by packages in the
// program's node_modules (package.json with "pulumi": {"resource": true}).
func (h *Host) GetRequiredPackages(_ context.Context, req *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	deps, err := FindResourcePackages(req.GetInfo().GetProgramDirectory())
	if err != nil {
		return nil, err
	}
	out := make([]*pulumirpc.PackageDependency, 0, len(deps))
	for _, d := range deps {
		out = append(out, &pulumirpc.PackageDependency{
			Kind: "resource", Name: d.Name, Version: d.Version, Server: d.Server,
		})
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: out}, nil
}

// RuntimeOptionsPrompts has no questions to ask: options come from Pulumi.yaml.
func (h *Host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

// About reports the node executable and its version (`pulumi about`).
func (h *Host) About(ctx context.Context, _ *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("could not find node on the PATH: %w", err)
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("running %s --version: %w", node, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: node,
		Version:    strings.TrimPrefix(strings.TrimSpace(string(out)), "v"),
	}, nil
}

// InstallDependencies runs `npm install` in the program directory, streaming
// its output to the engine (`pulumi install`).
func (h *Host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.GetIsTerminal())
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd := exec.CommandContext(server.Context(), "npm", "install", "--no-audit", "--no-fund")
	cmd.Dir = req.GetInfo().GetProgramDirectory()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install in %s: %w", cmd.Dir, err)
	}
	return closer.Close()
}

// Run executes the program once and reports how it ended.
func (h *Host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: "could not find node on the PATH: " + err.Error()}, nil
	}
	programDir := req.GetInfo().GetProgramDirectory()
	runPath, err := resolveModule(ctx, node, programDir, runModule)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	opts, err := parseOptions(req.GetInfo().GetOptions().AsMap())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	env, err := RunEnv(req, opts)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	args := append(append([]string{}, opts.nodeArgs...), RunArgs(req, runPath, h.engine())...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = programDir
	cmd.Env = append(os.Environ(), env...)
	// Node may switch its stdio to non-blocking mode; wrap the writers so the
	// child never shares our file descriptors directly.
	cmd.Stdout = struct{ io.Writer }{os.Stdout}
	cmd.Stderr = struct{ io.Writer }{os.Stderr}

	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == exitCodeUserActionable {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: "could not run the Node.js program: " + err.Error()}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunArgs is the launcher's command line for one run: the monitor and engine
// addresses, the stack identity, and the program's entry point.
func RunArgs(req *pulumirpc.RunRequest, runPath, engineAddress string) []string {
	args := []string{runPath}
	add := func(flag, value string) {
		if value != "" {
			args = append(args, "--"+flag, value)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", engineAddress)
	add("organization", req.GetOrganization())
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetInfo().GetProgramDirectory())
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	add("query-mode", strconv.FormatBool(req.GetQueryMode()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	entry := req.GetInfo().GetEntryPoint()
	if entry == "" {
		entry = "."
	}
	args = append(args, entry)
	return append(args, req.GetArgs()...)
}

// RunEnv is the environment the launcher reads its configuration from.
func RunEnv(req *pulumirpc.RunRequest, opts nodeOptions) ([]string, error) {
	// The launcher accepts both key formats; give it the long one
	// (<namespace>:config:<name>) that every SDK version understands.
	cfg := make(map[string]string, len(req.GetConfig()))
	for k, v := range req.GetConfig() {
		key, err := config.ParseKey(k)
		if err != nil {
			return nil, fmt.Errorf("config key %q: %w", k, err)
		}
		cfg[key.Namespace()+":config:"+key.Name()] = v
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	env := []string{
		"PULUMI_CONFIG=" + string(cfgJSON),
		"PULUMI_CONFIG_SECRET_KEYS=" + string(secretJSON),
	}
	if opts.typescript {
		env = append(env, "PULUMI_NODEJS_TYPESCRIPT=true")
	}
	if opts.tsconfig != "" {
		env = append(env, "PULUMI_NODEJS_TSCONFIG_PATH="+opts.tsconfig)
	}
	return env, nil
}

type nodeOptions struct {
	typescript bool
	tsconfig   string
	nodeArgs   []string
}

// parseOptions reads Pulumi.yaml's runtime.options for nodejs.
func parseOptions(raw map[string]any) (nodeOptions, error) {
	opts := nodeOptions{typescript: true}
	for key, value := range raw {
		switch key {
		case "typescript":
			b, ok := value.(bool)
			if !ok {
				return opts, errors.New("runtime option typescript must be a boolean")
			}
			opts.typescript = b
		case "tsconfig":
			s, ok := value.(string)
			if !ok {
				return opts, errors.New("runtime option tsconfig must be a string")
			}
			opts.tsconfig = s
		case "nodeargs":
			s, ok := value.(string)
			if !ok {
				return opts, errors.New("runtime option nodeargs must be a string")
			}
			opts.nodeArgs = strings.Fields(s)
		case "packagemanager":
			// Only npm is used by this project; accepted for compatibility.
		default:
			return opts, fmt.Errorf("unknown nodejs runtime option %q (this language host supports typescript, tsconfig, nodeargs, packagemanager)", key)
		}
	}
	return opts, nil
}

// resolveModule finds where a module resolves from the program directory, so the program's own
// @pulumi/pulumi runs it: first as Node.js's resolution finds a package without an "exports" map
// (the nearest node_modules/<package>/<subpath>/index.js, walking up from dir), else by asking node,
// which costs a Node.js start (0.1-0.2 s of every run on a loaded 2-core machine).
func resolveModule(ctx context.Context, node, dir, module string) (string, error) {
	if path, ok := resolveWithoutNode(dir, module); ok {
		return path, nil
	}
	script := fmt.Sprintf("console.log(require.resolve(%q))", module)
	cmd := exec.CommandContext(ctx, node, "-e", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot resolve %s from %s: is @pulumi/pulumi installed there (npm ci)? %w",
			module, dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// resolveWithoutNode resolves "@scope/name/sub/path" (or "name/sub/path") to
// node_modules/@scope/name/sub/path/index.js in dir or the nearest directory above it that has the
// package, as Node.js does for a package whose package.json has no "exports". It answers false
// (ask node) for anything else: a package with "exports", a subpath that is a file, no index.js.
func resolveWithoutNode(dir, module string) (string, bool) {
	parts := strings.Split(module, "/")
	nameParts := 1
	if strings.HasPrefix(module, "@") {
		nameParts = 2
	}
	if len(parts) <= nameParts {
		return "", false
	}
	pkgName := filepath.Join(parts[:nameParts]...)
	sub := filepath.Join(parts[nameParts:]...)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for d := abs; ; d = filepath.Dir(d) {
		pkgDir := filepath.Join(d, "node_modules", pkgName)
		if data, err := os.ReadFile(filepath.Join(pkgDir, "package.json")); err == nil {
			var manifest map[string]json.RawMessage
			if json.Unmarshal(data, &manifest) != nil {
				return "", false
			}
			if _, hasExports := manifest["exports"]; hasExports {
				return "", false
			}
			for _, ext := range []string{"", ".js", ".json", ".node"} {
				if st, err := os.Stat(filepath.Join(pkgDir, sub+ext)); err == nil && !st.IsDir() {
					return "", false // a file: node's own rules apply
				}
			}
			index := filepath.Join(pkgDir, sub, "index.js")
			if st, err := os.Stat(index); err == nil && !st.IsDir() {
				return index, true
			}
			return "", false
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// ResourcePackage is one resource plugin a program depends on.
type ResourcePackage struct {
	Name, Version, Server string
}

type packageJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Pulumi  struct {
		Resource bool   `json:"resource"`
		Name     string `json:"name"`
		Version  string `json:"version"`
		Server   string `json:"server"`
	} `json:"pulumi"`
}

// FindResourcePackages walks programDir/node_modules (including scoped
// packages and nested node_modules) for packages that declare a resource plugin.
func FindResourcePackages(programDir string) ([]ResourcePackage, error) {
	root := filepath.Join(programDir, "node_modules")
	seen := map[string]bool{}
	var found []ResourcePackage
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || d.Name() != "package.json" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var pkg packageJSON
		if json.Unmarshal(data, &pkg) != nil || !pkg.Pulumi.Resource {
			return nil
		}
		name := pkg.Pulumi.Name
		if name == "" {
			name = strings.TrimPrefix(pkg.Name, "@pulumi/")
		}
		ver := pkg.Pulumi.Version
		if ver == "" {
			ver = pkg.Version
		}
		if ver != "" && !strings.HasPrefix(ver, "v") {
			ver = "v" + ver
		}
		key := name + "@" + ver
		if !seen[key] {
			seen[key] = true
			found = append(found, ResourcePackage{Name: name, Version: ver, Server: pkg.Pulumi.Server})
		}
		return nil
	})
	return found, err
}
