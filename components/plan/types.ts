// The cluster's plan as data: every component and every step `up` registers, in the order it
// registers them, each with its parent, the steps it runs after and its scripts. A script that
// depends on what a node reported (a probe's output, the host key its handshake presented) or on
// a secret is a function of those named values, not a value: the materializer
// (components/materialize.ts) resolves the names to Pulumi outputs; a test resolves them to
// fixtures (test/unit/clusterPlan.test.ts). Nothing here imports Pulumi.

/**
 * A value known only while `up` runs, by name:
 * - `step:<name>:stdout`: what the step printed at its last run;
 * - `step:<name>:hostKey`: the key the SSH step `<name>` pins (its handshake's, or the one it printed);
 * - `secret:<key>`: a secret of the stack (`apiKey`, `hfToken`, `rayAuthToken`, `openWebuiAdminPassword`);
 * - `derived:<purpose>`: a secret derived from the stack's root secret (components/clusterSecrets.ts);
 * - `value:<name>`: a value of the plan itself ({@link ClusterPlan.values}).
 */
export type Ref = `step:${string}:stdout` | `step:${string}:hostKey` | `secret:${string}` | `derived:${string}` | `value:${string}`;

/** A value made from named values once they are known; secret when any of them is. */
export interface Derived<T> {
    readonly uses: readonly Ref[];
    readonly make: (values: readonly never[]) => T;
    /** Marked secret whatever its uses are (Pulumi marks it so anyway when one of them is). */
    readonly secret?: true;
}

/** A value as it is, or one made from named values. */
export type Val<T> = T | Derived<T>;

/** `make` of the values named by `uses`, in that order. */
export function derive<T>(uses: readonly Ref[], make: (...values: never[]) => T): Derived<T> {
    return { uses, make: (values) => make(...values) };
}

/** `make` of the values named by `uses`, marked secret. */
export function deriveSecret<T>(uses: readonly Ref[], make: (...values: never[]) => T): Derived<T> {
    return { uses, make: (values) => make(...values), secret: true };
}

export function isDerived<T>(value: Val<T>): value is Derived<T> {
    return typeof value === "object" && value !== null && "uses" in value && "make" in value && typeof (value as Derived<T>).make === "function";
}

/** A component resource: its type token's last part, its name, its parent (a component's name; none: the cluster). */
export interface PlannedComponent {
    readonly kind: "component";
    /** The type token's name, e.g. `NetplanInterconnect` (spark-cluster:index:NetplanInterconnect). */
    readonly type: string;
    readonly name: string;
    /** The parent component's name; undefined: the cluster. */
    readonly parent?: string;
    /** The component's outputs (registerOutputs), by key. */
    readonly outputs: Readonly<Record<string, Val<unknown>>>;
    /** Names of the steps and components it runs after (dependsOn), in order. */
    readonly after: readonly string[];
    /** It was a child of the cluster before ClusterNode existed: an alias keeps that URN. */
    readonly aliasCluster?: true;
    /** A retired node (`nodes[].retired`): every command of it and its descendants changes nothing (nodeConnection.ts, retiredCommand). */
    readonly retired?: true;
}

/** How a step reaches its node: the SSH step's own connection, or the node's pinned one. */
export type StepConnection = "ssh" | "pinned";

/** What a step runs (components/nodeConnection.ts, RemoteStep): its scripts run as root unless `asLoginUser`. */
export interface StepSpec {
    readonly create: Val<string>;
    readonly delete?: Val<string>;
    /** What a refresh runs to read the host back. */
    readonly read?: Val<string>;
    /** Standard input, always secret. */
    readonly stdin?: Val<string>;
    readonly logging?: "none";
    /** Text before the root command line of `create`. */
    readonly header?: Val<string>;
    /** Values whose change replaces the step. */
    readonly triggers?: readonly Val<string>[];
    readonly asLoginUser?: true;
}

/** A step on a node. */
export interface PlannedStep {
    readonly kind: "step";
    readonly name: string;
    readonly node: string;
    /** The parent component's name; undefined: the cluster. */
    readonly parent?: string;
    readonly connection: StepConnection;
    readonly spec: StepSpec;
    /** Names of the steps and components it runs after (dependsOn), in order. */
    readonly after: readonly string[];
    /** The create and update bound (and delete's, when given), e.g. "10m". */
    readonly timeouts?: { readonly create: string; readonly update: string; readonly delete?: string };
    readonly deleteBeforeReplace?: true;
    /** It was a child of the cluster before ClusterNode existed: an alias keeps that URN. */
    readonly aliasCluster?: true;
    /** A step of a retired node that is not under the node's component (the model sync's, the cluster's checks). */
    readonly retired?: true;
}

/** The stack's root secret (drawn once by our provider), when anything derives from it. */
export interface PlannedSecret {
    readonly kind: "secret";
    readonly name: string;
    readonly generation: string;
    readonly parent?: string;
}

export type PlanItem = PlannedComponent | PlannedStep | PlannedSecret;

/** A warning for `up` and `preview`, on a component (undefined: the cluster), now or once its values are known. */
export interface PlannedWarning {
    readonly on?: string;
    readonly text: Val<readonly string[]>;
}

/** The cluster's plan: its items in registration order, the values the items share, its warnings and its outputs. */
export interface ClusterPlan {
    readonly items: readonly PlanItem[];
    /** Values several items use (`value:<name>`), each made from named values. */
    readonly values: Readonly<Record<string, Derived<unknown>>>;
    readonly warnings: readonly PlannedWarning[];
    /** The cluster's outputs, by key. */
    readonly outputs: Readonly<Record<string, Val<unknown>>>;
}
