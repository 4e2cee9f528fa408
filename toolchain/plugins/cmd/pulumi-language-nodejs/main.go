// Command pulumi-language-nodejs is the project's own build of the Pulumi
// Node.js language host: the plugin the Pulumi CLI starts to run a TypeScript
// or JavaScript program. It is written here (see ../../../README.md) because
// the upstream language host's Go module cannot be fetched through the Go
// module proxy on the machines this project is developed and tested on.
//
// It speaks the LanguageRuntime gRPC protocol of the Pulumi SDK it is built
// against and runs programs with the `@pulumi/pulumi/cmd/run` entry point of
// the program's own node_modules, exactly like the upstream host.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"

	"spark-cluster.local/toolchain/plugins/internal/nodehost"
)

// parseArgs reads the arguments the engine starts the host with and returns the engine's address
// (the first positional argument; empty when there is none).
func parseArgs(args []string) (string, error) {
	flags := flag.NewFlagSet("pulumi-language-nodejs", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.String("tracing", "", "Zipkin-compatible tracing endpoint (accepted, not used)")
	// What the engine adds for every plugin under `pulumi --logflow` (buildPluginArguments in
	// sdk/go/common/resource/plugin/plugin.go): accepted; this host writes no log of its own.
	flags.Bool("logtostderr", false, "log to stderr (accepted, not used)")
	flags.Int("v", 0, "log verbosity (accepted, not used)")
	flags.Bool("logflow", false, "flow logging settings to child processes (accepted, not used)")
	// Flags the engine may still pass; their values now arrive in ProgramInfo.options.
	flags.Bool("typescript", true, "[obsolete] use ts-node at run time")
	flags.String("root", "", "[obsolete] project root path")
	flags.String("tsconfig", "", "[obsolete] path to tsconfig.json")
	flags.String("nodeargs", "", "[obsolete] arguments for the node process")
	flags.String("packagemanager", "", "[obsolete] package manager")
	if err := flags.Parse(args); err != nil {
		return "", err
	}
	return flags.Arg(0), nil
}

func main() {
	engineAddress, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: %v\n", err)
		os.Exit(2)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	stop := make(chan bool)
	go func() {
		<-ctx.Done()
		close(stop)
	}()

	if engineAddress != "" {
		// Exit when the engine goes away, as every plugin must.
		if err := rpcutil.Healthcheck(ctx, engineAddress, 5*time.Minute, cancel); err != nil {
			fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: health check of engine %s: %v\n", engineAddress, err)
			os.Exit(1)
		}
	}

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stop,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, nodehost.New(engineAddress))
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: could not start the RPC server: %v\n", err)
		os.Exit(1)
	}
	// The engine reads the port from our first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: RPC server stopped: %v\n", err)
		os.Exit(1)
	}
}
