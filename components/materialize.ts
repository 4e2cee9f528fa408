// The one place the cluster's plan (components/plan/clusterPlan.ts) becomes Pulumi resources: a
// component resource per planned component (its type token and name as the plan has them), a
// step per planned step through its node's connection, the root secret, and every named value the
// plan uses resolved to an output, once. Nothing here decides what runs where or after what: the
// plan does.
import * as pulumi from "@pulumi/pulumi";
import type { Config, NodeConfig } from "../config";
import { deriveSecret } from "./clusterSecrets";
import { hostKeyToPin, noHostKeyMessage } from "./hostKey";
import { Connection, NodeHost, RemoteStep, nodeConnection, retiredCommand } from "./nodeConnection";
import { typeToken } from "./package";
import type { ClusterPlan, PlannedComponent, PlannedStep, Ref, Val } from "./plan/types";
import { isDerived } from "./plan/types";
import { RandomSecret, Step } from "./sparkRemote";

/** A component of the plan: only its type token and name are its own; its children come from the plan. */
class PlannedComponentResource extends pulumi.ComponentResource {
    constructor(type: string, name: string, opts: pulumi.ComponentResourceOptions) {
        super(typeToken(type), name, {}, opts);
    }

    /** Its outputs, once every item of the plan is made. */
    done(outputs: pulumi.Inputs): void {
        this.registerOutputs(outputs);
    }
}

/** What the materializer made: the cluster's outputs, resolved. */
export interface Materialized {
    outputs: Record<string, unknown>;
}

/** A node's connections: the SSH step's own, and the pinned one every later step uses. */
interface NodeHosts {
    node: NodeConfig;
    component: pulumi.Resource;
    connection: pulumi.Output<Connection>;
    ssh: NodeHost;
    pinned?: NodeHost;
    hostKey?: pulumi.Output<string>;
}

/** Makes every item of `plan` under `cluster`, in order; registers each component's outputs once all exist. */
export function materialize(plan: ClusterPlan, cluster: pulumi.ComponentResource, config: Config): Materialized {
    const components = new Map<string, PlannedComponentResource>();
    const steps = new Map<string, Step>();
    const hosts = new Map<string, NodeHosts>();
    const values = new Map<string, pulumi.Output<unknown>>();
    let root: RandomSecret | undefined;

    const resource = (name: string): pulumi.Resource => {
        const found = components.get(name) ?? steps.get(name);
        if (found === undefined) throw new pulumi.ResourceError(`internal: the plan names ${name} before it is made`, cluster);
        return found;
    };
    const secrets: Record<string, { reveal(): string } | undefined> = {
        apiKey: config.apiKey,
        hfToken: config.hfToken,
        rayAuthToken: config.rayAuthToken,
        openWebuiAdminPassword: config.openWebui?.adminPassword,
    };
    const ref = (r: Ref): pulumi.Output<unknown> => {
        const [kind, ...rest] = r.split(":");
        const name = rest.join(":");
        switch (kind) {
            case "step": {
                const [step, output] = [rest.slice(0, -1).join(":"), rest[rest.length - 1]];
                if (output === "hostKey") return hostKeyOf(hosts.get(step.replace(/-ssh$/, "")) as NodeHosts, steps);
                return (resource(step) as Step).stdout;
            }
            case "secret": {
                const secret = secrets[name];
                if (secret === undefined) throw new pulumi.ResourceError(`internal: the plan uses the secret ${name}, which the config does not have`, cluster);
                return pulumi.secret(secret.reveal());
            }
            case "derived":
                if (root === undefined) throw new pulumi.ResourceError(`internal: ${name} derives from the root secret before it is made`, cluster);
                return pulumi.secret((root as RandomSecret).value.apply((value) => deriveSecret(value, name)));
            case "value": {
                let made = values.get(name);
                if (made === undefined) {
                    const planned = plan.values[name];
                    if (planned === undefined) throw new pulumi.ResourceError(`internal: the plan uses the value ${name}, which it does not make`, cluster);
                    made = resolve(planned);
                    values.set(name, made);
                }
                return made;
            }
            default:
                throw new pulumi.ResourceError(`internal: the plan names ${r}`, cluster);
        }
    };
    function resolve<T>(value: Val<T>): pulumi.Output<T> {
        if (!isDerived(value)) return pulumi.output(value) as pulumi.Output<T>;
        const made = pulumi.all(value.uses.map(ref)).apply((resolved) => value.make(resolved as never[]));
        return (value.secret ? pulumi.secret(made) : made) as pulumi.Output<T>;
    }
    /** A script as it is when the plan has it as text (the provider's input then has no output around it), else resolved. */
    const input = <T>(value: Val<T>): pulumi.Input<T> => (isDerived(value) ? resolve(value) : value);
    const inputs = (values: Readonly<Record<string, Val<unknown>>>) => Object.fromEntries(Object.entries(values).map(([key, value]) => [key, input(value)]));

    for (const item of plan.items) {
        if (item.kind === "secret") {
            root = new RandomSecret(item.name, { generation: item.generation }, { parent: cluster });
        } else if (item.kind === "component") {
            const made = new PlannedComponentResource(item.type, item.name, componentOptions(item, cluster, resource));
            components.set(item.name, made);
            if (item.type === "ClusterNode") {
                const node = config.nodes.find((n) => n.name === item.name) as NodeConfig;
                hosts.set(node.name, nodeHosts(node, made));
            }
        } else {
            const node = hosts.get(item.node) as NodeHosts;
            const host = item.connection === "ssh" ? node.ssh : pinnedHost(node, steps);
            steps.set(item.name, host.command(item.name, stepArgs(item, input), stepOptions(item, cluster, resource)));
        }
    }
    for (const warning of plan.warnings) {
        const on = warning.on !== undefined ? resource(warning.on) : cluster;
        resolve(warning.text).apply((lines) => {
            for (const line of lines) pulumi.log.warn(line, on);
        });
    }
    for (const item of plan.items) {
        if (item.kind !== "component") continue;
        (components.get(item.name) as PlannedComponentResource).done(inputs(item.outputs));
    }
    return { outputs: inputs(plan.outputs) };
}

/** A planned component's options: its parent, the alias to where it was before, what it runs after, a retired node's transformation. */
function componentOptions(item: PlannedComponent, cluster: pulumi.Resource, resource: (name: string) => pulumi.Resource): pulumi.ComponentResourceOptions {
    return {
        parent: item.parent !== undefined ? resource(item.parent) : cluster,
        ...(item.aliasCluster ? { aliases: [{ parent: cluster }] } : {}),
        ...(item.after.length > 0 ? { dependsOn: item.after.map(resource) } : {}),
        ...(item.retired ? { transformations: [retiredCommand] } : {}),
    };
}

/** A planned step's options. */
function stepOptions(item: PlannedStep, cluster: pulumi.Resource, resource: (name: string) => pulumi.Resource): pulumi.CustomResourceOptions {
    return {
        parent: item.parent !== undefined ? resource(item.parent) : cluster,
        ...(item.aliasCluster ? { aliases: [{ parent: cluster }] } : {}),
        ...(item.after.length > 0 ? { dependsOn: item.after.map(resource) } : {}),
        ...(item.timeouts !== undefined ? { customTimeouts: { ...item.timeouts } } : {}),
        ...(item.deleteBeforeReplace ? { deleteBeforeReplace: true } : {}),
        ...(item.retired ? { transformations: [retiredCommand] } : {}),
    };
}

/** A planned step's scripts as NodeHost.command takes them; its stdin always secret. */
function stepArgs(item: PlannedStep, input: <T>(value: Val<T>) => pulumi.Input<T>): RemoteStep {
    const spec = item.spec;
    return {
        create: input(spec.create),
        ...(spec.delete !== undefined ? { delete: input(spec.delete) } : {}),
        ...(spec.read !== undefined ? { read: input(spec.read) } : {}),
        ...(spec.stdin !== undefined ? { stdin: pulumi.secret(input(spec.stdin)) } : {}),
        ...(spec.logging !== undefined ? { logging: spec.logging } : {}),
        ...(spec.header !== undefined ? { header: input(spec.header) } : {}),
        ...(spec.triggers !== undefined ? { triggers: spec.triggers.map((t) => input(t)) } : {}),
        ...(spec.asLoginUser ? { asLoginUser: true } : {}),
    };
}

/**
 * A node's SSH step connection: the configured host key, if any; without one the provider pins the
 * key the node presents on first contact and checks it on the step's later runs (a changed host,
 * port or user included). (The SSH step's connection has no key but a configured one: a stack
 * deployed before sees its inputs unchanged, so it does not run again.)
 */
function nodeHosts(node: NodeConfig, component: pulumi.Resource): NodeHosts {
    const connection = nodeConnection(node);
    const sudoPassword = node.ssh.sudoPassword !== undefined;
    const ssh = new NodeHost(
        node.ssh.hostKey !== undefined ? pinHostKey(connection, node.ssh.hostKey, node.name, component) : connection,
        node.ssh.user,
        sudoPassword,
    );
    return { node, component, connection, ssh };
}

/** The node's pinned connection (every step after the SSH step), made once the SSH step exists. */
function pinnedHost(hosts: NodeHosts, steps: ReadonlyMap<string, Step>): NodeHost {
    hosts.pinned ??= new NodeHost(
        pinHostKey(hosts.connection, hostKeyOf(hosts, steps), hosts.node.name, hosts.component),
        hosts.node.ssh.user,
        hosts.node.ssh.sudoPassword !== undefined,
    );
    return hosts.pinned;
}

/**
 * The SSH host key every later command of the node checks: the configured one (known at once, in
 * a preview too), or the one the SSH step recorded; empty when none is known, and then those
 * commands fail.
 */
function hostKeyOf(hosts: NodeHosts, steps: ReadonlyMap<string, Step>): pulumi.Output<string> {
    if (hosts.hostKey === undefined) {
        const configured = hostKeyToPin({ configured: hosts.node.ssh.hostKey });
        const ssh = steps.get(`${hosts.node.name}-ssh`) as Step;
        hosts.hostKey =
            configured !== undefined
                ? pulumi.output(configured)
                : pulumi.all([recordedPresentedKey(ssh), ssh.stdout]).apply(([presented, sshOutput]) => hostKeyToPin({ presented, sshOutput }) ?? "");
    }
    return hosts.hostKey;
}

/**
 * The SSH step's `presentedHostKey`, known whenever its stdout is: undefined where its state has
 * none (a step last run before the provider recorded it). In a preview the SDK makes an output that
 * a state lacks unknown, not undefined; read as it is, a stack deployed before would preview every
 * later step with an unknown connection, i.e. changed, though `up` pins them as before. Where the
 * step's stdout is known (it does not run in this preview) and its key is not, the state has no key.
 */
function recordedPresentedKey(ssh: Step): pulumi.Output<string | undefined> {
    return ssh.stdout.apply(() => outputIsKnown(ssh.presentedHostKey)).apply((known) => (known ? ssh.presentedHostKey : pulumi.output(undefined)));
}

/**
 * Whether an output's value is known. The SDK keeps this on every Output (`isKnown`, what `apply`
 * waits on) but has no public accessor; without it, a value is taken as known outside a preview only.
 */
function outputIsKnown(output: pulumi.Output<unknown>): Promise<boolean> {
    const isKnown = (output as unknown as { isKnown?: Promise<boolean> }).isKnown;
    return isKnown ?? Promise.resolve(!pulumi.runtime.isDryRun());
}

/**
 * The connection with `hostKey` pinned. An empty key is not known: the steps on the connection fail,
 * naming the node and the fix, rather than run on a host they cannot check.
 */
function pinHostKey(connection: pulumi.Output<Connection>, hostKey: pulumi.Input<string>, node: string, parent: pulumi.Resource): pulumi.Output<Connection> {
    return pulumi.all([connection, hostKey]).apply(([c, key]) => {
        if (key.trim() === "") {
            throw new pulumi.ResourceError(noHostKeyMessage(node), parent);
        }
        return { ...c, hostKey: key };
    });
}
