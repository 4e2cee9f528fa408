//go:build tools

// Package tools pins the Pulumi CLI's main package as a dependency of this module,
// so `go build github.com/pulumi/pulumi/pkg/v3/cmd/pulumi` resolves inside it.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
