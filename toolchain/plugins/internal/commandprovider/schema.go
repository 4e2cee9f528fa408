package commandprovider

import "encoding/json"

// Type tokens of the schema's object types.
const (
	connectionToken      = PackageName + ":index:Connection"
	proxyConnectionToken = PackageName + ":index:ProxyConnection"
	loggingToken         = PackageName + ":index:Logging"
)

func connectionType(description string, withProxy bool) map[string]any {
	props := map[string]any{
		"agentSocketPath": map[string]any{
			"type":        "string",
			"description": "SSH agent socket path. Defaults to the environment variable SSH_AUTH_SOCK if present.",
		},
		"dialErrorLimit": map[string]any{
			"type":    "integer",
			"default": defaultDialErrorLimit,
			"description": "Connection attempts before the step fails; -1 for no limit. A run setting: changing it " +
				"is no diff.",
		},
		"host": map[string]any{"type": "string", "description": "The address of the host to connect to."},
		"hostKey": map[string]any{
			"type": "string",
			"description": "The host's expected public key (authorized_keys or known_hosts format); it always " +
				"wins over a recorded key. Without it, a step's first run pins the key the host presents, ed25519 " +
				"first (its presentedHostKey), and its later runs (update, read, delete) check that one, on a " +
				"changed host, port or user as well. An empty value is refused.",
		},
		"password": map[string]any{
			"type": "string", "secret": true, "description": "The password to log in with.",
		},
		"perDialTimeout": map[string]any{
			"type":    "integer",
			"default": defaultPerDialTimeout,
			"description": "Seconds each connection attempt (TCP connect and SSH handshake) may take; 0 for no " +
				"bound. A run setting: changing it is no diff.",
		},
		"port": map[string]any{
			"type": "number", "default": defaultPort, "description": "The port to connect to.",
		},
		"privateKey": map[string]any{
			"type": "string", "secret": true, "description": "The text of an SSH private key to log in with.",
		},
		"privateKeyPassword": map[string]any{
			"type": "string", "secret": true, "description": "The passphrase of an encrypted privateKey.",
		},
		"user": map[string]any{
			"type": "string", "default": defaultUser, "description": "The user to log in as.",
		},
		"unreachableHint": map[string]any{
			"type": "string",
			"description": "Text added to the error when the host cannot be reached (what to do next). " +
				"Changing it alone is no diff.",
		},
	}
	if withProxy {
		props["proxy"] = map[string]any{
			"$ref":        "#/types/" + proxyConnectionToken,
			"description": "The bastion host to connect through.",
		}
		props["sudoPassword"] = map[string]any{
			"type": "string", "secret": true,
			"description": "The login user's sudo password. Every script gets it and a line " + SudoStdinMarker +
				" before its own stdin (for a `sudo -S` root wrapper). Changing it alone is no diff.",
		}
	}
	return map[string]any{
		"type":        "object",
		"description": description,
		"properties":  props,
		"required":    []string{"host"},
	}
}

// stepProperties are a step's input properties (inputs) and the ones its state holds (outputs). The scripts and the
// connection are inputs only: the state does not repeat them (notEchoedKeys, resource.go).
func stepProperties() (inputs, outputs map[string]any) {
	inputs = map[string]any{
		"addPreviousOutputInEnv": map[string]any{
			"type":    "boolean",
			"default": defaultAddPreviousOutputInEnv,
			"description": "Whether the previous run's stdout and stderr are exported to the next run (update, " +
				"delete) as PULUMI_COMMAND_STDOUT and PULUMI_COMMAND_STDERR; the SSH server must accept them " +
				"(AcceptEnv). A run setting: changing it is no diff.",
		},
		"connection": map[string]any{
			"$ref":        "#/types/" + connectionToken,
			"secret":      true,
			"description": "How to reach the host. Steps with the same host, port, user and credentials share one SSH connection.",
		},
		"create": map[string]any{
			"type": "string",
			"description": "The script run when the step is created, and when it is updated and has no `update` " +
				"script. When it fails after it started on the host, the step is recorded all the same (the engine " +
				"keeps it with an initialization error): `destroy` runs its `delete`, and the next `up` runs it again.",
		},
		"delete": map[string]any{"type": "string", "description": "The script run when the step is deleted."},
		"environment": map[string]any{
			"type":                 "object",
			"additionalProperties": map[string]any{"type": "string"},
			"description":          "Environment variables of the scripts (the SSH server must accept them: AcceptEnv).",
		},
		"logging": map[string]any{
			"$ref":        "#/types/" + loggingToken,
			"description": "Which of the scripts' output streams are shown as they run. Defaults to both.",
		},
		"read": map[string]any{
			"type": "string",
			"description": "The script a refresh runs to read the host back: it gets the last run's stdout on " +
				"stdin, changes nothing, and prints one line per difference from what the step made; its lines " +
				"become the `drift` output. A run setting: changing it is no diff.",
		},
		"stdin": map[string]any{"type": "string", "description": "Text passed to the scripts on standard input."},
		"triggers": map[string]any{
			"type":             "array",
			"items":            map[string]any{"$ref": "pulumi.json#/Any"},
			"replaceOnChanges": true,
			"description":      "Values whose change replaces the step (delete and create).",
		},
		"update": map[string]any{
			"type":        "string",
			"description": "The script run when another input changes; without it, `create` runs again.",
		},
	}
	outputs = map[string]any{}
	for k, v := range inputs {
		outputs[k] = v
	}
	for _, k := range notEchoedKeys {
		delete(outputs, string(k))
	}
	outputs["stdout"] = map[string]any{"type": "string", "description": "The standard output of the last run."}
	outputs["stderr"] = map[string]any{"type": "string", "description": "The standard error of the last run."}
	outputs["presentedHostKey"] = map[string]any{
		"type": "string",
		"description": "The public key (\"<type> <base64>\") the host presented in the SSH handshake of the " +
			"connection the step last ran a script on; through a proxy, the target's. Absent until the step ran " +
			"on a host.",
	}
	outputs["drift"] = map[string]any{
		"type": "string",
		"description": "What the last refresh found (the `read` script's lines, or why the host could not be read); " +
			"absent when the host read back as the step made it.",
	}
	return inputs, outputs
}

// schemaJSON is the package's schema, served by GetSchema (`pulumi package get-schema`). The program's SDK,
// components/sparkRemote.ts, is written against it (test/process/sparkRemoteSchema.test.ts compares the two).
func schemaJSON() string {
	inputs, outputs := stepProperties()
	schema := map[string]any{
		"name":        PackageName,
		"version":     Version,
		"displayName": "spark-cluster remote steps",
		"description": "The spark-cluster project's own provider: steps run on a node over SSH, one connection per " +
			"host shared by the steps, with a read-back for drift. Built from toolchain/plugins in the " +
			"spark-cluster repository; not Pulumi's `command` package.",
		"publisher": "spark-cluster",
		"license":   "Apache-2.0",
		"config":    map[string]any{},
		"provider":  map[string]any{"description": "The provider of spark-remote steps; it has no configuration."},
		"types": map[string]any{
			connectionToken: connectionType("How to reach a host over SSH.", true),
			proxyConnectionToken: connectionType(
				"How to reach the bastion host a connection goes through.", false),
			loggingToken: map[string]any{
				"type": "string",
				"enum": []map[string]any{
					{"name": "Stdout", "value": LoggingStdout, "description": "Show stdout, not stderr"},
					{"name": "Stderr", "value": LoggingStderr, "description": "Show stderr, not stdout"},
					{"name": "StdoutAndStderr", "value": LoggingStdoutAndStderr, "description": "Show both"},
					{"name": "None", "value": LoggingNone, "description": "Show neither, nor the output of a failed script"},
				},
			},
		},
		"resources": map[string]any{
			StepToken: map[string]any{
				"description":     "A step run on a node over SSH: create, update and delete scripts, and a read-back.",
				"inputProperties": inputs,
				"requiredInputs":  []string{"connection"},
				"properties":      outputs,
				"required":        []string{"stderr", "stdout"},
			},
			RandomSecretToken: map[string]any{
				"description": "A secret drawn once from the random source of the machine that runs `pulumi up` and kept, " +
					"encrypted, in the state. It touches no host. A change of `generation` or `bytes` replaces it (a new value).",
				"inputProperties": map[string]any{
					"bytes": map[string]any{"type": "integer", "description": "Random bytes to draw, 16 to 64. Defaults to 32.",
						"replaceOnChanges": true},
					"generation": map[string]any{"type": "string", "description": "Any change draws a new value.",
						"replaceOnChanges": true},
				},
				"properties": map[string]any{
					"bytes":      map[string]any{"type": "integer"},
					"generation": map[string]any{"type": "string"},
					"value":      map[string]any{"type": "string", "secret": true, "description": "The random bytes in hex."},
				},
				"required": []string{"bytes", "value"},
			},
		},
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err)
	}
	return string(b)
}
