import * as pulumi from "@pulumi/pulumi";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { readinessCommand } from "./readiness";
import type { OpenWebuiPlan } from "./render/openWebui";
import { contentHash } from "./render/host/shell";

const TYPE = typeToken("OpenWebui");

export interface OpenWebuiArgs {
    /** The head's connection and SSH user. */
    host: NodeHost;
    /** What Open WebUI puts on the head (components/render/openWebui.ts). */
    plan: OpenWebuiPlan;
    /** The cluster's API key, which Open WebUI sends to the endpoint. */
    apiKey: pulumi.Input<string>;
    /** The admin's password (openWebuiAdminPassword). */
    adminPassword: pulumi.Input<string>;
    /** WEBUI_SECRET_KEY, which signs its sessions. */
    secretKey: pulumi.Input<string>;
}

/**
 * Open WebUI on the head, in front of the cluster's endpoint: the install (venv or image), the
 * data directory, the root-only env file with every secret (from stdin), the unit, and the
 * readiness check (the admin signs in and the served model is listed).
 */
export class OpenWebui extends pulumi.ComponentResource {
    public readonly unit: string;

    constructor(name: string, args: OpenWebuiArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = args.plan;
        this.unit = plan.unit;
        const install = args.host.command(`${name}-install`, plan.install, { parent: this, customTimeouts: { create: "60m", update: "60m" } });
        const data = args.host.command(`${name}-data`, plan.data, { parent: this });
        const envFile = pulumi
            .all([args.apiKey, args.adminPassword, args.secretKey])
            .apply(([apiKey, adminPassword, secretKey]) => plan.envFile({ apiKey, adminPassword, secretKey }));
        const env = args.host.command(
            `${name}-env`,
            {
                ...plan.env,
                // A changed secret changes stdin: an update, which rewrites the file and restarts Open WebUI.
                stdin: pulumi.secret(envFile),
                logging: "none",
            },
            { parent: this },
        );
        const unit = args.host.command(
            `${name}-unit`,
            { create: plan.unitStep.create, delete: plan.unitStep.delete, read: plan.unitStep.read },
            { parent: this, dependsOn: [install, data, env], customTimeouts: { create: "10m", update: "10m" } },
        );
        readinessCommand(
            name,
            {
                host: args.host,
                unit: pulumi.output(plan.unit),
                // New secrets restart it (the env step): the probe runs again.
                triggers: [pulumi.secret(envFile.apply((file) => contentHash(file)))],
                script: plan.ready,
                timeout: "20m",
            },
            { parent: this, dependsOn: [unit] },
        );
        this.registerOutputs({ unit: this.unit });
    }
}
