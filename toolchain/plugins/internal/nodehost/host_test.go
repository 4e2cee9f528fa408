package nodehost

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

func runRequest(dryRun bool) *pulumirpc.RunRequest {
	return &pulumirpc.RunRequest{
		Project:          "spark-cluster",
		Stack:            "dev",
		Organization:     "organization",
		MonitorAddress:   "127.0.0.1:4000",
		DryRun:           dryRun,
		Parallel:         16,
		Config:           map[string]string{"spark-cluster:apiKey": "s3cret", "spark-cluster:nodes": "[]"},
		ConfigSecretKeys: []string{"spark-cluster:apiKey"},
		Info:             &pulumirpc.ProgramInfo{ProgramDirectory: "/proj", EntryPoint: "index.ts"},
	}
}

func TestRunArgs(t *testing.T) {
	got := RunArgs(runRequest(true), "/proj/node_modules/@pulumi/pulumi/cmd/run/index.js", "127.0.0.1:5000")
	want := []string{
		"/proj/node_modules/@pulumi/pulumi/cmd/run/index.js",
		"--monitor", "127.0.0.1:4000",
		"--engine", "127.0.0.1:5000",
		"--organization", "organization",
		"--project", "spark-cluster",
		"--stack", "dev",
		"--pwd", "/proj",
		"--dry-run",
		"--query-mode", "false",
		"--parallel", "16",
		"index.ts",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RunArgs:\n got %q\nwant %q", got, want)
	}
	if args := RunArgs(runRequest(false), "run", ""); contains(args, "--dry-run") || contains(args, "--engine") {
		t.Fatalf("an update must not pass --dry-run, and an empty engine address is left out: %q", args)
	}
}

func TestRunEnvUsesLongConfigKeysAndListsSecrets(t *testing.T) {
	env, err := RunEnv(runRequest(false), nodeOptions{typescript: true, tsconfig: "tsconfig.json"})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(env, "\n")
	for _, want := range []string{
		`"spark-cluster:config:apiKey":"s3cret"`,
		`"spark-cluster:config:nodes":"[]"`,
		`PULUMI_CONFIG_SECRET_KEYS=["spark-cluster:apiKey"]`,
		"PULUMI_NODEJS_TYPESCRIPT=true",
		"PULUMI_NODEJS_TSCONFIG_PATH=tsconfig.json",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("environment lacks %s:\n%s", want, joined)
		}
	}
	if _, err := RunEnv(&pulumirpc.RunRequest{Config: map[string]string{"no-namespace": "x"}}, nodeOptions{}); err == nil {
		t.Error("a config key without a namespace must be rejected")
	}
}

func TestParseOptions(t *testing.T) {
	opts, err := parseOptions(map[string]any{"typescript": false, "nodeargs": "--max-old-space-size=512 --no-warnings"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.typescript || !reflect.DeepEqual(opts.nodeArgs, []string{"--max-old-space-size=512", "--no-warnings"}) {
		t.Fatalf("unexpected options %+v", opts)
	}
	for _, bad := range []map[string]any{{"typescript": "yes"}, {"tsconfig": 3}, {"frobnicate": true}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("options %v must be rejected", bad)
		}
	}
}

func TestFindResourcePackages(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		path := filepath.Join(dir, "node_modules", rel, "package.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("@pulumi/command", `{"name":"@pulumi/command","version":"1.2.1","pulumi":{"resource":true,"name":"command","version":"1.2.1"}}`)
	write("@pulumi/pulumi", `{"name":"@pulumi/pulumi","version":"3.270.0"}`)
	write("zod", `{"name":"zod","version":"4.6.7"}`)
	write("other/node_modules/@pulumi/command", `{"name":"@pulumi/command","version":"1.2.1","pulumi":{"resource":true}}`)

	got, err := FindResourcePackages(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []ResourcePackage{{Name: "command", Version: "v1.2.1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got, err := FindResourcePackages(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("a program without node_modules needs no plugins, got %v, %v", got, err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestResolveWithoutNode(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("node_modules/@pulumi/pulumi/package.json", `{"name":"@pulumi/pulumi"}`)
	write("node_modules/@pulumi/pulumi/cmd/run/index.js", "")
	write("node_modules/withexports/package.json", `{"name":"withexports","exports":{"./cmd/run":"./x.js"}}`)
	write("node_modules/withexports/cmd/run/index.js", "")
	write("node_modules/file/package.json", `{"name":"file"}`)
	write("node_modules/file/cmd/run.js", "")
	write("node_modules/file/cmd/run/index.js", "")
	if err := os.MkdirAll(filepath.Join(root, "program", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	// From the program's directory or one below it: the nearest node_modules that has the package.
	for _, dir := range []string{root, filepath.Join(root, "program", "sub")} {
		got, ok := resolveWithoutNode(dir, "@pulumi/pulumi/cmd/run")
		if want := filepath.Join(root, "node_modules/@pulumi/pulumi/cmd/run/index.js"); !ok || got != want {
			t.Errorf("from %s: %q, %v; want %q", dir, got, ok, want)
		}
	}
	// What Node.js would resolve otherwise is left to node.
	for _, module := range []string{"withexports/cmd/run", "file/cmd/run", "missing/cmd/run", "@pulumi/pulumi", "@pulumi/pulumi/nothing"} {
		if got, ok := resolveWithoutNode(root, module); ok {
			t.Errorf("%s resolved to %q without node; want node to decide", module, got)
		}
	}
}
