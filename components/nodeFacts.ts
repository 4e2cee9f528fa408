// Reading what a node reports about its hardware: `ibdev2netdev` lines.

export interface RoceDevice {
    /** RDMA device, e.g. rocep1s0f1. */
    device: string;
    /** Its network interface, e.g. enp1s0f1np1. */
    netdev: string;
    up: boolean;
}

/** Parses `ibdev2netdev` output (`rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`). */
export function parseIbdev2netdev(output: string): RoceDevice[] {
    const devices: RoceDevice[] = [];
    for (const line of output.split("\n")) {
        const match = /^(\S+)\s+port\s+\d+\s+==>\s+(\S+)\s+\((\w+)\)/.exec(line.trim());
        if (match) {
            devices.push({ device: match[1], netdev: match[2], up: match[3] === "Up" });
        }
    }
    return devices;
}

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
