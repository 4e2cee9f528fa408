// The SDK of our own provider, package `spark-remote` (toolchain/plugins/cmd/pulumi-resource-spark-remote):
// Step, a step run on a node over SSH, and RandomSecret, a secret drawn once and kept in the state
// (components/clusterSecrets.ts), written against the schema the plugin
// serves (toolchain/plugins/internal/commandprovider/schema.go; test/process/sparkRemoteSchema.test.ts
// compares the two). The provider started as a build of Pulumi's `command` provider and keeps its
// remote.Command's inputs, but it is not that package: its type is ours, so Pulumi's own `command`
// plugin is never picked for a stack we deployed (toolchain/README.md).
import * as pulumi from "@pulumi/pulumi";

/** The package: the plugin is `pulumi-resource-spark-remote`. Not `spark-cluster`, the program's config namespace (README.md, "Tested versions"). */
export const PACKAGE = "spark-remote";

/** The provider's version (SPARK_REMOTE_VERSION in toolchain/versions.env): the engine loads exactly this plugin. */
export const VERSION = "0.1.0";

/** The type token of a Step. */
export const STEP_TYPE = `${PACKAGE}:index:Step`;

/** The type token of a RandomSecret. */
export const RANDOM_SECRET_TYPE = `${PACKAGE}:index:RandomSecret`;

/** True when the two unions of keys are the same (the SDK's lists below against its interfaces). */
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

/** How to reach the bastion host a connection goes through (schema type `spark-remote:index:ProxyConnection`). */
export interface ProxyConnectionArgs {
    host: pulumi.Input<string>;
    /** Defaults to 22. */
    port?: pulumi.Input<number>;
    /** Defaults to root. */
    user?: pulumi.Input<string>;
    password?: pulumi.Input<string>;
    privateKey?: pulumi.Input<string>;
    privateKeyPassword?: pulumi.Input<string>;
    /** Defaults to the environment's SSH_AUTH_SOCK. */
    agentSocketPath?: pulumi.Input<string>;
    /**
     * The host's public key; it always wins over a recorded one. Without it, a step's first run pins
     * the key the host presents (its `presentedHostKey`), and its later runs check that one, on a
     * changed host, port or user as well. An empty key is refused.
     */
    hostKey?: pulumi.Input<string>;
    /** Connection attempts before the step fails; -1 for no limit. Defaults to 10. No diff when it changes. */
    dialErrorLimit?: pulumi.Input<number>;
    /** Seconds each attempt may take. Defaults to 15. No diff when it changes. */
    perDialTimeout?: pulumi.Input<number>;
    /** Text added to the error when the host cannot be reached. No diff when it changes. */
    unreachableHint?: pulumi.Input<string>;
}

/** How to reach a host over SSH (schema type `spark-remote:index:Connection`). Steps with the same host, port, user and credentials share one connection. */
export interface ConnectionArgs extends ProxyConnectionArgs {
    proxy?: pulumi.Input<ProxyConnectionArgs>;
    /** The login user's sudo password: every script gets it and a marker line before its own stdin (for `sudo -S`). No diff when it changes. */
    sudoPassword?: pulumi.Input<string>;
}

/** The properties of a connection, as the schema has them (test/process/sparkRemoteSchema.test.ts). */
export const CONNECTION_KEYS = [
    "host",
    "port",
    "user",
    "password",
    "privateKey",
    "privateKeyPassword",
    "agentSocketPath",
    "hostKey",
    "dialErrorLimit",
    "perDialTimeout",
    "unreachableHint",
    "proxy",
    "sudoPassword",
] as const;
export const CONNECTION_KEYS_ARE_THE_INTERFACE: SameKeys<(typeof CONNECTION_KEYS)[number], keyof ConnectionArgs> = true;

/** Which of the scripts' output streams are shown as they run (schema type `spark-remote:index:Logging`). */
export const LOGGING = ["stdout", "stderr", "stdoutAndStderr", "none"] as const;
export type Logging = (typeof LOGGING)[number];

/** The inputs of a Step. */
export interface StepArgs {
    /** How to reach the host. Kept secret. */
    connection: pulumi.Input<ConnectionArgs>;
    /** Run when the step is created, and when it is updated without an `update` script. */
    create?: pulumi.Input<string>;
    /** Run when another input changes. Defaults to running `create` again. */
    update?: pulumi.Input<string>;
    /** Run when the step is deleted. */
    delete?: pulumi.Input<string>;
    /** Run by a refresh to read the host back: one line per difference, none when it is as made. No diff when it changes. */
    read?: pulumi.Input<string>;
    /** Text on the scripts' standard input. */
    stdin?: pulumi.Input<string>;
    /** Values whose change replaces the step. */
    triggers?: pulumi.Input<pulumi.Input<unknown>[]>;
    /** Defaults to "stdoutAndStderr". */
    logging?: pulumi.Input<Logging>;
    /** Environment of the scripts (the SSH server must accept the names). */
    environment?: pulumi.Input<Record<string, pulumi.Input<string>>>;
    /** Export the previous run's stdout and stderr to the next run. Defaults to false. No diff when it changes. */
    addPreviousOutputInEnv?: pulumi.Input<boolean>;
}

/** The inputs of a Step, as the schema has them. */
export const STEP_INPUTS = [
    "connection",
    "create",
    "update",
    "delete",
    "read",
    "stdin",
    "triggers",
    "logging",
    "environment",
    "addPreviousOutputInEnv",
] as const;
export const STEP_INPUTS_ARE_THE_INTERFACE: SameKeys<(typeof STEP_INPUTS)[number], keyof StepArgs> = true;

/** The outputs of a Step (its state), as the schema has them. The scripts and the connection are inputs only: the state does not repeat them. */
export const STEP_OUTPUTS = ["stdout", "stderr", "stdin", "triggers", "logging", "environment", "addPreviousOutputInEnv", "drift", "presentedHostKey"] as const;

/** A step run on a node over SSH (`spark-remote:index:Step`). */
export class Step extends pulumi.CustomResource {
    /** The standard output of the last run. */
    declare readonly stdout: pulumi.Output<string>;
    /** The standard error of the last run. */
    declare readonly stderr: pulumi.Output<string>;
    declare readonly stdin: pulumi.Output<string | undefined>;
    declare readonly triggers: pulumi.Output<unknown[] | undefined>;
    declare readonly logging: pulumi.Output<Logging | undefined>;
    declare readonly environment: pulumi.Output<Record<string, string> | undefined>;
    declare readonly addPreviousOutputInEnv: pulumi.Output<boolean>;
    /** What the last refresh found (the `read` script's lines, or why the host was not read); undefined when none. */
    declare readonly drift: pulumi.Output<string | undefined>;
    /**
     * The public key (`<type> <base64>`) the host presented in the SSH handshake of the connection
     * the step last ran a script on (through a proxy, the target's); undefined until the step ran on
     * a host with this provider.
     */
    declare readonly presentedHostKey: pulumi.Output<string | undefined>;

    constructor(name: string, args: StepArgs, opts?: pulumi.CustomResourceOptions) {
        const inputs: pulumi.Inputs = {};
        for (const key of STEP_INPUTS) {
            inputs[key] = args[key];
        }
        inputs.connection = pulumi.secret(args.connection);
        // Every output is a key of the registration (undefined: the provider sets it), so that the resource has it.
        for (const key of STEP_OUTPUTS) {
            if (!(key in inputs)) {
                inputs[key] = undefined;
            }
        }
        super(STEP_TYPE, name, inputs, pulumi.mergeOptions({ version: VERSION, replaceOnChanges: ["triggers[*]"] }, opts));
    }
}

/** The inputs of a RandomSecret. */
export interface RandomSecretArgs {
    /** Random bytes to draw, 16 to 64. Defaults to 32. A change replaces the secret. */
    bytes?: pulumi.Input<number>;
    /** Any change replaces the secret: a new value. */
    generation?: pulumi.Input<string>;
}

/** The inputs of a RandomSecret, as the schema has them. */
export const RANDOM_SECRET_INPUTS = ["bytes", "generation"] as const;
export const RANDOM_SECRET_INPUTS_ARE_THE_INTERFACE: SameKeys<(typeof RANDOM_SECRET_INPUTS)[number], keyof RandomSecretArgs> = true;

/** The outputs of a RandomSecret, as the schema has them. */
export const RANDOM_SECRET_OUTPUTS = ["bytes", "generation", "value"] as const;

/**
 * A secret drawn once, when it is created, from the random source of the machine that runs
 * `pulumi up`, and kept encrypted in the state (`spark-remote:index:RandomSecret`). It touches no host.
 */
export class RandomSecret extends pulumi.CustomResource {
    declare readonly bytes: pulumi.Output<number>;
    declare readonly generation: pulumi.Output<string | undefined>;
    /** The random bytes in hex; a secret. */
    declare readonly value: pulumi.Output<string>;

    constructor(name: string, args: RandomSecretArgs, opts?: pulumi.CustomResourceOptions) {
        const inputs: pulumi.Inputs = { bytes: args.bytes, generation: args.generation, value: undefined };
        super(
            RANDOM_SECRET_TYPE,
            name,
            inputs,
            pulumi.mergeOptions({ version: VERSION, additionalSecretOutputs: ["value"], replaceOnChanges: ["bytes", "generation"] }, opts),
        );
    }
}
