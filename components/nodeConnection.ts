// One SSH connection per node, bound with the node's SSH user into a NodeHost:
// every step on the node builds its commands through it, so no step passes the
// connection and the user separately. The first step on every node proves SSH
// works and that we can act as root.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { NodeConfig } from "../config";
import * as sparkRemote from "./sparkRemote";
import { RootAccess, remoteCommand, rootAccessOf, shellQuote } from "./render/host/shell";
import { unreachableHint } from "./render/unreachableHint";

/**
 * A step's connection (our provider's, with `unreachableHint`: the text it adds to the error when
 * the host cannot be reached, and `sudoPassword`: the login user's sudo password, config
 * sudoPassword, which the provider puts on every script's stdin before the marker line).
 */
export type Connection = sparkRemote.ConnectionArgs;

const STEP_TYPE = sparkRemote.STEP_TYPE;

/** One step on a node: its scripts (run as root) and what else its command carries. */
export interface RemoteStep {
    create: pulumi.Input<string>;
    delete?: pulumi.Input<string>;
    /** What a refresh runs to read the host back. Defaults to none. */
    read?: pulumi.Input<string>;
    stdin?: pulumi.Input<string>;
    logging?: "none";
    /** Text before the root command line of `create`, as it is. Defaults to none. */
    header?: pulumi.Input<string>;
    /** Values whose change replaces the step. Defaults to none. */
    triggers?: pulumi.Input<pulumi.Input<string>[]>;
    /** Run the scripts as the login user, not as root (the SSH step of a login other than root). Defaults to false. */
    asLoginUser?: boolean;
}

/** What a step needs to run scripts on one node: its connection, and its scripts turned into root commands. */
export class NodeHost {
    /** How a step becomes root on this node. */
    readonly rootAccess: RootAccess;

    constructor(
        /** The node's SSH connection (secret: it holds the private key, and the sudo password when there is one). */
        readonly connection: pulumi.Output<Connection>,
        /** The SSH login user: commands go through sudo unless it is root. */
        readonly sshUser: string,
        /** The connection carries the user's sudo password (config sudoPassword): commands go through `sudo -S`. */
        sudoPassword = false,
    ) {
        this.rootAccess = rootAccessOf(sshUser, sudoPassword);
    }

    /** The command line that runs `script` as root on this node. */
    asRoot(script: string): string {
        return remoteCommand(script, this.sshUser, this.rootAccess);
    }

    /**
     * The one factory of remote steps: a step on this node whose create (and delete) scripts run
     * as root. `read`, when given, is what a refresh runs to read the host back (see
     * render/host/read.ts). `header` goes before the root command line as it is (a comment that
     * re-runs the step when it changes); `triggers` replace the step when they change.
     */
    command(name: string, args: RemoteStep, opts: pulumi.CustomResourceOptions): sparkRemote.Step {
        const wrap = args.asLoginUser === true ? (s: string) => `bash -c ${shellQuote(s)}` : (s: string) => this.asRoot(s);
        const asRoot = (script: pulumi.Input<string>) => (typeof script === "string" ? wrap(script) : pulumi.output(script).apply(wrap));
        const read = args.read === undefined ? undefined : asRoot(args.read);
        const create =
            args.header === undefined ? asRoot(args.create) : pulumi.all([args.header, args.create]).apply(([header, script]) => header + wrap(script));
        return new sparkRemote.Step(
            name,
            {
                connection: this.connection,
                create,
                ...(args.delete === undefined ? {} : { delete: asRoot(args.delete) }),
                ...(read === undefined ? {} : { read }),
                ...(args.stdin === undefined ? {} : { stdin: args.stdin }),
                ...(args.logging === undefined ? {} : { logging: args.logging }),
                ...(args.triggers === undefined ? {} : { triggers: args.triggers }),
            },
            opts,
        );
    }
}

/** The input our provider reads a host back with on refresh (toolchain/plugins: keyRead). */
export const READ_INPUT = "read";

/**
 * What a preview puts where the text of a key *file* goes: a preview never reads the file, so it
 * needs neither the key nor the hosts (a CI runner has neither). Nothing runs in a preview.
 */
export const PREVIEW_KEY_PLACEHOLDER = "(spark-cluster: the SSH private key file is not read in a preview)";

/**
 * The input a preview with a placeholder key ignores on every step (`ignoreChanges`):
 * the engine then diffs the command with the key recorded in its state instead, so a converged
 * stack previews with no change. `up` reads the file and ignores nothing.
 */
export const PREVIEW_IGNORED_KEY_PATH = "connection.privateKey";

/** Set once a connection of this program run holds {@link PREVIEW_KEY_PLACEHOLDER}. */
let placeholderInUse = false;

/**
 * Adds {@link PREVIEW_IGNORED_KEY_PATH} to the `ignoreChanges` of every step once a
 * placeholder key is in use. Registered on the stack when this module loads, i.e. before any
 * component exists: a component copies the stack's transformations when it is constructed, so
 * one registered later would miss its children. A no-op at `up` (no placeholder is made there).
 */
export function ignorePlaceholderKey(args: pulumi.ResourceTransformationArgs): pulumi.ResourceTransformationResult | undefined {
    if (!placeholderInUse || args.type !== STEP_TYPE) {
        return undefined;
    }
    return { props: args.props, opts: pulumi.mergeOptions(args.opts, { ignoreChanges: [PREVIEW_IGNORED_KEY_PATH] }) };
}

// No step asks for `PULUMI_COMMAND_STDOUT`/`STDERR` in the next run's environment (none of our
// scripts reads them, and sshd refuses them unless they are in its `AcceptEnv`): our provider's
// `addPreviousOutputInEnv` defaults to false, so the program leaves it out.
if (pulumi.runtime.getStackResource() !== undefined) {
    pulumi.runtime.registerStackTransformation(ignorePlaceholderKey);
}

/** The inputs a retired node's steps keep from the stack's state: all of them. */
export const RETIRED_IGNORED_INPUTS = ["*"];

/**
 * A step of a retired node (`nodes[].retired`): it keeps every input the state holds
 * (`ignoreChanges: ["*"]`, so `up` never updates it), runs nothing when it is not in the state yet
 * (empty create and delete), and leaves the stack without its delete (`retainOnDelete`): when the
 * node is removed from the config, or by `pulumi destroy --run-program`, whose steps take the
 * program's options. Nothing is ever run on a retired node.
 */
export function retiredCommand(args: pulumi.ResourceTransformationArgs): pulumi.ResourceTransformationResult | undefined {
    if (args.type !== STEP_TYPE) {
        return undefined;
    }
    // Every key stays (the SDK makes the resource's outputs, stdout among them, from these keys).
    const inert = Object.fromEntries(Object.keys(args.props).map((key) => [key, undefined]));
    return {
        props: { ...inert, connection: args.props.connection, create: "", delete: "" },
        opts: pulumi.mergeOptions(args.opts, { retainOnDelete: true, ignoreChanges: RETIRED_IGNORED_INPUTS }),
    };
}

/** How the provider pauses between tries (toolchain/plugins/internal/commandprovider/ssh.go): 0.1 s, growing 1.5x, at most 5 s. */
const DIAL_PAUSE = { firstSeconds: 0.1, growth: 1.5, maxSeconds: 5 };

/** The bound of one try to reach a node: TCP connect and SSH handshake (the provider's perDialTimeout). */
export const SSH_TRY_SECONDS = 5;

/** How a node's connection dials: the provider's own settings, and the longest it can take to give up. */
export interface SshDialBudget {
    /** Tries before the step fails (`connection.dialErrorLimit`). */
    dialErrorLimit: number;
    /** Seconds each try may take (`connection.perDialTimeout`). */
    perDialTimeout: number;
    /** Every try timing out, plus the pauses between them: never more than the budget. */
    worstCaseSeconds: number;
}

/**
 * The most tries of {@link SSH_TRY_SECONDS} each that fit, with the provider's pauses between
 * them, in `connectTimeoutSeconds` (`nodes[].ssh.connectTimeoutSeconds`): a step on a node that
 * is gone fails within it. A try that fails at once (connection refused) leaves the rest of the
 * budget unused: the provider counts tries, not time (as upstream's `dialErrorLimit` does).
 */
export function sshDialBudget(connectTimeoutSeconds: number): SshDialBudget {
    const perDialTimeout = Math.min(SSH_TRY_SECONDS, connectTimeoutSeconds);
    let dialErrorLimit = 1;
    let worst = perDialTimeout;
    let pause = DIAL_PAUSE.firstSeconds;
    while (worst + pause + perDialTimeout <= connectTimeoutSeconds) {
        worst += pause + perDialTimeout;
        dialErrorLimit += 1;
        pause = Math.min(pause * DIAL_PAUSE.growth, DIAL_PAUSE.maxSeconds);
    }
    return { dialErrorLimit, perDialTimeout, worstCaseSeconds: Math.round(worst * 10) / 10 };
}

/**
 * The node's SSH connection, its private key a Pulumi secret. A key given as a path is read
 * here, on the machine running Pulumi (relative to the project), at `up` only: a preview puts
 * {@link PREVIEW_KEY_PLACEHOLDER} in its place (see {@link ignorePlaceholderKey}). A key given
 * as secret text is used as it is, preview or not.
 */
export function nodeConnection(node: NodeConfig): pulumi.Output<Connection> {
    const key = node.ssh.privateKey;
    let text: string;
    if (key.kind === "secret") {
        text = key.text.reveal();
    } else if (pulumi.runtime.isDryRun()) {
        text = PREVIEW_KEY_PLACEHOLDER;
        placeholderInUse = true;
    } else {
        const file = path.resolve(key.path);
        try {
            text = fs.readFileSync(file, "utf8");
        } catch (err) {
            throw new pulumi.RunError(
                `spark-cluster:sshPrivateKeyPath (node ${node.name}): cannot read ${file}: ${(err as Error).message}. ` +
                    "Point it at an existing SSH private key, e.g. /home/you/.ssh/id_ed25519 (a preview does not read it; up does).",
            );
        }
    }
    const { dialErrorLimit, perDialTimeout } = sshDialBudget(node.ssh.connectTimeoutSeconds);
    return pulumi.secret({
        host: node.ssh.host,
        port: node.ssh.port,
        user: node.ssh.user,
        privateKey: text,
        // A node that does not answer fails the step within ssh.connectTimeoutSeconds, saying what to do next.
        dialErrorLimit,
        perDialTimeout,
        unreachableHint: unreachableHint(node),
        ...(node.ssh.sudoPassword !== undefined ? { sudoPassword: node.ssh.sudoPassword.reveal() } : {}),
    });
}
