// The rules of frontend.openWebui the schema cannot express: what an enabled Open WebUI needs
// (the admin's email and password) and a port of its own on the head.
import type { z } from "zod";
import { OPEN_WEBUI_PASSWORD_EXAMPLE, OPEN_WEBUI_PASSWORD_KEY } from "./frontendSchema";
import { ConfigIssue, describeSecret, describeValue } from "./issues";
import type { ParsedConfig, RaySchema } from "./schema";
import { exampleFor } from "./zodIssues";

/**
 * An enabled Open WebUI has its admin account (frontend.openWebui.adminEmail and the secret
 * openWebuiAdminPassword) and listens on a port nothing else of the cluster uses on the head.
 */
export function checkOpenWebui(
    config: Pick<ParsedConfig, "frontend" | "openWebuiAdminPassword" | "apiKey" | "model" | "nodes"> & {
        ray: Pick<z.output<typeof RaySchema>, "port" | "dashboardPort">;
    },
): ConfigIssue[] {
    const ui = config.frontend.openWebui;
    if (!ui.enabled) return [];
    const issues: ConfigIssue[] = [];
    if (ui.adminEmail === undefined) {
        issues.push({
            path: "frontend.openWebui.adminEmail",
            message: "is missing: Open WebUI creates its admin account from it on the first start (signup stays off)",
            got: "nothing",
            example: exampleFor(["frontend", "openWebui", "adminEmail"]),
        });
    }
    if (config.openWebuiAdminPassword === undefined) {
        issues.push({
            path: OPEN_WEBUI_PASSWORD_KEY,
            message: "is missing: frontend.openWebui.enabled needs the admin's password, as a secret",
            got: "nothing",
            example: OPEN_WEBUI_PASSWORD_EXAMPLE,
        });
    }
    // open_webui/config.py:341-345 splits OPENAI_API_KEYS at `;` (one key per endpoint).
    if (config.apiKey.includes(";")) {
        issues.push({
            path: "apiKey",
            message: "contains ;, which Open WebUI reads as the separator between keys (OPENAI_API_KEYS): it would send only a part of it; use a key without ;",
            got: describeSecret(config.apiKey),
            example: exampleFor(["apiKey"]),
        });
    }
    const head = config.nodes.find((node) => node.head === true);
    const taken: [string, number][] = [
        ["model.apiPort", config.model.apiPort],
        ["model.masterPort", config.model.masterPort],
        ["ray.port", config.ray.port],
        ["ray.dashboardPort", config.ray.dashboardPort],
        ...(head ? ([[`the head's ssh.port (${head.name})`, head.ssh?.port ?? 22]] as [string, number][]) : []),
    ];
    const clash = taken.find(([, p]) => p === ui.port);
    if (clash) {
        issues.push({
            path: "frontend.openWebui.port",
            message: `is also ${clash[0]}: Open WebUI needs a port of its own on the head`,
            got: describeValue(ui.port),
            example: clash[1] === 8080 ? "8081" : "8080",
        });
    }
    return issues;
}
