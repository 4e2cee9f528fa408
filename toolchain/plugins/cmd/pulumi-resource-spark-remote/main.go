// Command pulumi-resource-spark-remote is the project's own resource provider plugin, package `spark-remote`: one
// resource type, spark-remote:index:Step, a step run on a node over SSH. See internal/commandprovider.
//
// Like every resource plugin it is started by the engine with the engine's address as its positional argument, and
// prints the port of its gRPC server on stdout.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"

	"spark-cluster.local/toolchain/plugins/internal/commandprovider"
)

// flagsWithValue are the engine's plugin flags whose value may come as the next argument (`--tracing <endpoint>`).
var flagsWithValue = map[string]bool{"tracing": true}

// engineAddress returns the first positional argument, skipping any flag (-v=9, --logtostderr, --logflow,
// --tracing <endpoint>, ...).
func engineAddress(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && flagsWithValue[name] {
				i++
			}
			continue
		}
		return a
	}
	return ""
}

// serve starts the provider's gRPC server for the given plugin arguments.
func serve(args []string) (rpcutil.ServeHandle, func(), error) {
	logger := commandprovider.NewEngineLogger(engineAddress(args))
	prov := commandprovider.New(logger)
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterResourceProviderServer(srv, prov)
			return nil
		},
	})
	return handle, func() {
		prov.Close()
		_ = logger.Close()
	}, err
}

func main() {
	for _, a := range os.Args[1:] {
		if a == "--version" || a == "-version" {
			fmt.Println(commandprovider.Version)
			return
		}
	}
	handle, cleanup, err := serve(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "fatal: %v\n", err)
		os.Exit(1)
	}
	defer cleanup()
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "fatal: %v\n", err)
		cleanup()
		os.Exit(1)
	}
}
