import * as pulumi from "@pulumi/pulumi";

/**
 * The `status=…` line a host step prints last (PFC, firewall), as the component's status output;
 * anything but `enabled…` is also a warning on the component, so it shows in `up`.
 */
export function statusOf(stdout: pulumi.Output<string>, name: string, resource: pulumi.Resource): pulumi.Output<string> {
    return stdout.apply((out) => {
        const line = out
            .split("\n")
            .reverse()
            .find((l) => l.startsWith("status="));
        const status = line ? line.slice("status=".length) : "unknown: no status reported";
        if (!status.startsWith("enabled")) {
            pulumi.log.warn(`${name}: ${status}`, resource);
        }
        return status;
    });
}
