package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"spark-cluster.local/toolchain/plugins/internal/commandprovider"
)

func TestEngineAddress(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"--logtostderr", "-v=9", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"--tracing", "http://127.0.0.1:9411", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"-tracing=x", "--logflow", "127.0.0.1:4000", "extra"}, "127.0.0.1:4000"},
		{[]string{"--", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{nil, ""},
	} {
		if got := engineAddress(c.args); got != c.want {
			t.Errorf("engineAddress(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestServe starts the plugin's server as the engine would and calls it over gRPC.
func TestServe(t *testing.T) {
	handle, cleanup, err := serve([]string{"-v=5", "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", handle.Port),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pulumirpc.NewResourceProviderClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := client.GetPluginInfo(ctx, &emptypb.Empty{})
	if err != nil || info.GetVersion() != commandprovider.Version {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	hs, err := client.Handshake(ctx, &pulumirpc.ProviderHandshakeRequest{EngineAddress: "127.0.0.1:1"})
	if err != nil || !hs.GetAcceptSecrets() {
		t.Fatalf("Handshake = %v, %v", hs, err)
	}
	_, err = client.Check(ctx, &pulumirpc.CheckRequest{
		Urn:  "urn:pulumi:dev::p::command:local:Command::x",
		Type: "command:local:Command",
	})
	if err == nil {
		t.Fatal("expected an error for command:local:Command")
	}
	sch, err := client.GetSchema(ctx, &pulumirpc.GetSchemaRequest{})
	if err != nil || !strings.Contains(sch.GetSchema(), `"name":"spark-remote"`) {
		t.Fatalf("GetSchema = %v, %v", sch, err)
	}
}
