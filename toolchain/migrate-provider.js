"use strict";
// Moves a stack deployed before our provider had its own name onto it, by rewriting the stack's
// state (`pulumi stack export` in, `pulumi stack import` out; scripts/migrate-provider.sh runs it,
// and scripts/pulumi.sh before any command on a stack whose state still has the old names).
//
// Until then the project's provider announced itself as Pulumi's `command` package, version 1.2.1:
// every step was a `command:remote:Command` of the default provider
// `pulumi:providers:command::default_1_2_1`. Now it is package `spark-remote`
// (components/sparkRemote.ts): each step becomes a `spark-remote:index:Step` of the default provider
// `pulumi:providers:spark-remote::default_<version>`, with its id, inputs, outputs, parent and
// dependencies as they were. Nothing runs on a host: the inputs of a step are the same under both
// names, so the next preview shows no change.
//
// Why not `aliases`: a resource's type can be aliased, but its provider then changes package, and
// the engine decides whether that replaces the resource (a delete and a create on the host) by the
// new provider's DiffConfig (stepGenerator.providerChanged, Pulumi 3.274.1); it also loads the old
// provider's plugin for the old default provider, and every step would carry the old type in its
// options for ever. The rewrite needs neither plugin and leaves a state as a fresh deploy writes it.
//
//   node toolchain/migrate-provider.js SPARK_REMOTE_VERSION < exported.json > migrated.json
// Exit 0: migrated (the summary on stderr); 3: nothing to migrate (nothing on stdout); 1: refused
// (a state this program did not write that way), with the reason.

const OLD_PACKAGE = "command";
const OLD_STEP_TYPE = "command:remote:Command";
const NEW_PACKAGE = "spark-remote";
const NEW_STEP_TYPE = "spark-remote:index:Step";
const OLD_PROVIDER_TYPE = `pulumi:providers:${OLD_PACKAGE}`;
const NEW_PROVIDER_TYPE = `pulumi:providers:${NEW_PACKAGE}`;

/**
 * @typedef {{ urn: string, type: string, id?: string, custom?: boolean, provider?: string, parent?: string,
 *   dependencies?: string[], propertyDependencies?: Record<string, string[]>, deletedWith?: string,
 *   inputs?: Record<string, unknown>, outputs?: Record<string, unknown>, additionalSecretOutputs?: string[],
 *   aliases?: string[], replaceWith?: string[], [key: string]: unknown }} StateResource
 * @typedef {{ resource: StateResource, type: string }} PendingOperation
 * @typedef {{ version: number, deployment: { manifest?: unknown, resources?: StateResource[],
 *   pending_operations?: PendingOperation[], [key: string]: unknown } }} ExportedState
 * @typedef {{ state: ExportedState, steps: number, provider: string } | { state: undefined, reason: string }} MigrationResult
 */

/** An error that names a state the migration refuses to rewrite. */
class RefusedError extends Error {}

/**
 * The parts of a URN: `urn:pulumi:STACK::PROJECT::QUALIFIED_TYPE::NAME` (the name may contain `::`).
 * @param {string} urn
 */
function splitUrn(urn) {
    const parts = urn.split("::");
    if (parts.length < 4 || !parts[0].startsWith("urn:pulumi:")) {
        throw new RefusedError(`not a URN: ${urn}`);
    }
    return { prefix: `${parts[0]}::${parts[1]}`, qualifiedType: parts[2], name: parts.slice(3).join("::") };
}

/**
 * The URN with every old type in its qualified type (`parent$...$type`) renamed.
 * @param {string} urn
 */
function renameUrn(urn) {
    const { prefix, qualifiedType, name } = splitUrn(urn);
    const renamed = qualifiedType
        .split("$")
        .map((type) => (type === OLD_STEP_TYPE ? NEW_STEP_TYPE : type))
        .join("$");
    return `${prefix}::${renamed}::${name}`;
}

/**
 * Rewrites an exported state (the object `pulumi stack export` prints). Pure: returns a new object.
 * @param {ExportedState} exported
 * @param {string} version the new provider's version (SPARK_REMOTE_VERSION)
 * @returns {MigrationResult}
 */
function migrateState(exported, version) {
    if (!/^\d+\.\d+\.\d+$/.test(version)) {
        throw new RefusedError(`not a version: ${version}`);
    }
    /** @type {ExportedState} */
    const state = JSON.parse(JSON.stringify(exported));
    const deployment = state.deployment;
    const resources = deployment?.resources ?? [];
    const pending = deployment?.pending_operations ?? [];
    const all = [...resources, ...pending.map((op) => op.resource)];
    const oldProviders = all.filter((r) => r.type === OLD_PROVIDER_TYPE);
    const oldSteps = all.filter((r) => r.type === OLD_STEP_TYPE);
    if (oldProviders.length === 0 && oldSteps.length === 0) {
        return { state: undefined, reason: `no ${OLD_STEP_TYPE} and no ${OLD_PROVIDER_TYPE} in the state` };
    }
    for (const r of all) {
        if (r.type.startsWith(`${OLD_PACKAGE}:`) && r.type !== OLD_STEP_TYPE) {
            throw new RefusedError(`${r.urn} is a ${r.type}: this program never made one, so this is not its state`);
        }
    }
    for (const p of oldProviders) {
        if (!splitUrn(p.urn).name.startsWith("default")) {
            throw new RefusedError(`${p.urn} is an explicit provider: this program only used the default one`);
        }
    }

    // The new default provider: the one the state has already (a stack half moved by hand), else
    // the old one renamed, with its id.
    const defaultName = `default_${version.replace(/\./g, "_")}`;
    const stackPrefix = splitUrn(resources[0]?.urn ?? all[0].urn).prefix;
    const newProviderUrn = `${stackPrefix}::${NEW_PROVIDER_TYPE}::${defaultName}`;
    const old = resources.find((r) => r.type === OLD_PROVIDER_TYPE);
    let newProvider = resources.find((r) => r.urn === newProviderUrn);
    if (newProvider !== undefined && old !== undefined && resources.indexOf(newProvider) > resources.indexOf(old)) {
        // A provider comes before the resources it serves.
        resources.splice(resources.indexOf(newProvider), 1);
        resources.splice(resources.indexOf(old), 0, newProvider);
    }
    if (newProvider === undefined) {
        if (old === undefined) {
            throw new RefusedError(`the state has ${OLD_STEP_TYPE} steps but no ${OLD_PROVIDER_TYPE} provider`);
        }
        newProvider = {
            ...old,
            urn: newProviderUrn,
            type: NEW_PROVIDER_TYPE,
            inputs: { __internal: {}, version },
            outputs: { version },
        };
        resources.splice(resources.indexOf(old), 0, newProvider);
    }
    const newProviderRef = `${newProviderUrn}::${newProvider.id}`;
    /** Old provider references (URN::id) and URNs, to the new one. */
    const providerRefs = new Map(oldProviders.map((p) => [`${p.urn}::${p.id}`, newProviderRef]));
    const removed = new Set(oldProviders.map((p) => p.urn));

    /** @param {string} urn */
    const urn = (urn) => (removed.has(urn) ? newProviderUrn : renameUrn(urn));
    /** @param {string[] | undefined} urns */
    const urns = (urns) => urns?.map(urn);
    /** @param {StateResource} r */
    const rewrite = (r) => {
        r.urn = urn(r.urn);
        if (r.type === OLD_STEP_TYPE) {
            r.type = NEW_STEP_TYPE;
            // The old SDK marked the connection an additional secret output; it is no output of ours.
            if (r.additionalSecretOutputs !== undefined) {
                r.additionalSecretOutputs = r.additionalSecretOutputs.filter((k) => k !== "connection");
                if (r.additionalSecretOutputs.length === 0) delete r.additionalSecretOutputs;
            }
        }
        if (r.provider !== undefined) {
            const ref = providerRefs.get(r.provider);
            if (ref === undefined && r.provider.includes(`::${OLD_PROVIDER_TYPE}::`)) {
                throw new RefusedError(`${r.urn} names a provider that is not in the state: ${r.provider}`);
            }
            r.provider = ref ?? r.provider;
        }
        if (r.parent !== undefined) r.parent = urn(r.parent);
        if (r.deletedWith !== undefined) r.deletedWith = urn(r.deletedWith);
        if (r.dependencies !== undefined) r.dependencies = urns(r.dependencies);
        if (r.replaceWith !== undefined) r.replaceWith = urns(r.replaceWith);
        if (r.aliases !== undefined) r.aliases = urns(r.aliases);
        if (r.propertyDependencies !== undefined) {
            r.propertyDependencies = Object.fromEntries(Object.entries(r.propertyDependencies).map(([k, v]) => [k, urns(v) ?? []]));
        }
    };

    deployment.resources = resources.filter((r) => r.type !== OLD_PROVIDER_TYPE);
    deployment.resources.forEach(rewrite);
    if (deployment.pending_operations !== undefined) {
        deployment.pending_operations = pending.filter((op) => op.resource.type !== OLD_PROVIDER_TYPE);
        deployment.pending_operations.forEach((op) => rewrite(op.resource));
    }
    const left = JSON.stringify(deployment.resources).match(/command:remote:Command|pulumi:providers:command\b/);
    if (left !== null) {
        throw new RefusedError(`the rewritten state still names ${left[0]}`);
    }
    return { state, steps: oldSteps.length, provider: newProviderUrn };
}

/**
 * Reads the exported state on stdin, writes the migrated one on stdout.
 * @param {string[]} argv
 */
function main(argv) {
    const version = argv[0];
    if (version === undefined) {
        process.stderr.write("usage: node toolchain/migrate-provider.js SPARK_REMOTE_VERSION < exported.json > migrated.json\n");
        return 2;
    }
    const input = require("node:fs").readFileSync(0, "utf8");
    try {
        const result = migrateState(JSON.parse(input), version);
        if (result.state === undefined) {
            process.stderr.write(`migrate-provider: nothing to migrate (${result.reason})\n`);
            return 3;
        }
        process.stdout.write(JSON.stringify(result.state, null, 4) + "\n");
        process.stderr.write(`migrate-provider: ${result.steps} step(s) ${OLD_STEP_TYPE} -> ${NEW_STEP_TYPE}, default provider ${result.provider}\n`);
        return 0;
    } catch (err) {
        if (err instanceof RefusedError) {
            process.stderr.write(`migrate-provider: refused: ${err.message}\n`);
            return 1;
        }
        throw err;
    }
}

if (require.main === module) {
    process.exitCode = main(process.argv.slice(2));
}

module.exports = { migrateState, RefusedError, OLD_STEP_TYPE, NEW_STEP_TYPE };
