// Wrapper module that builds the Pulumi CLI from the Go module proxy.
// pkg/v3 has a local `replace` for sdk/v3, so `go install pkg@version` refuses it;
// requiring it from here (and repeating its non-local replace) builds it.
// The version must match @pulumi/pulumi in package.json (see toolchain/versions.env).
module spark-cluster.local/toolchain/pulumi-cli

go 1.25.11

require (
	github.com/pulumi/pulumi/pkg/v3 v3.246.0
	github.com/pulumi/pulumi/sdk/v3 v3.246.0
)

replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
