// What derives from a node's probed facts (components/render/probe.ts): its interconnect's
// interface names and RDMA devices from the hardware probe's, and what Ray's version says.
import type { RoceDevice } from "./render/probe";
import { RAY_TOKEN_AUTH_SINCE } from "./render/ray";

/**
 * Interface names for a node's interconnect: the configured name where there
 * is one, otherwise the next linked-up RoCE interface the node reports.
 */
export function resolveInterfaceNames(node: string, configured: readonly (string | undefined)[], devices: readonly RoceDevice[]): string[] {
    const candidates = devices.filter((d) => d.up && !configured.includes(d.netdev)).map((d) => d.netdev);
    return configured.map((name, index) => {
        if (name !== undefined) {
            return name;
        }
        const detected = candidates.shift();
        if (detected === undefined) {
            throw new Error(
                `spark-cluster:nodes (${node}).interconnect[${index}].name: not set and not detected ` +
                    "(ibdev2netdev shows no linked-up RoCE interface left). Set it, e.g. name: enp1s0f1np1",
            );
        }
        return detected;
    });
}

/** The RDMA devices behind the given interfaces. */
export function hcasFor(interfaces: readonly string[], devices: readonly RoceDevice[]): string[] {
    return interfaces.flatMap((name) => devices.filter((d) => d.netdev === name).map((d) => d.device));
}

/** Compares dotted versions numerically: negative when a < b. Pre-release suffixes are ignored. */
export function compareVersions(a: string, b: string): number {
    const parts = (v: string) => v.split(/[.+-]/).map((p) => Number.parseInt(p, 10) || 0);
    const [x, y] = [parts(a), parts(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
        const d = (x[i] ?? 0) - (y[i] ?? 0);
        if (d !== 0) return d;
    }
    return 0;
}

/** What the `ray` output says of one node: its Ray version and whether token authentication is on. */
export function rayAuthStatus(version: string | undefined): string {
    if (version === undefined || version === "none") {
        return "no Ray found";
    }
    return compareVersions(version, RAY_TOKEN_AUTH_SINCE) >= 0
        ? `Ray ${version}, token authentication on`
        : `Ray ${version} is older than ${RAY_TOKEN_AUTH_SINCE}: it has no token authentication, so anyone who reaches its ports can join; upgrade Ray`;
}
