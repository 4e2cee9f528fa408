/**
 * The interconnect's netplan file, round-tripped. Generated node interconnects that the config's
 * zod schema accepts (node name, one or two interfaces with distinct names and usable addresses,
 * the cluster MTU) are rendered with renderNetplan and read back:
 *
 * - by js-yaml (core schema, and the failsafe schema that reads every scalar as a string, as
 *   netplan does): the document holds exactly the interfaces in order, each static with its
 *   address and the MTU, renderer networkd, and nothing else;
 * - against the file as it was built line by line before it was emitted with js-yaml: the bytes
 *   are the same, except that a name YAML would read as another type is quoted (a deployed
 *   stack's file does not change);
 * - by netplan itself (Debian 12's netplan.io 0.106, the lab nodes' version; scripts/test.sh
 *   installs it) on a sample: `netplan get` shows the same interfaces, addresses and MTU, and
 *   `netplan generate` writes each interface's networkd file with them.
 *
 * The seed is printed; SPARK_PROPERTY_SEED reproduces a run, SPARK_PROPERTY_COUNT sets the runs.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fc from "fast-check";
import * as yaml from "js-yaml";
import { InterconnectSchema, InterfaceSchema, NodeSchema, interfaceAddressProblem } from "../../config";
import { DNS_LABEL, IFNAME } from "../../config/schemaFields";
import { interconnectNameProblem } from "../../config/valueRules";
import { NetplanSpec, renderNetplan } from "../../components/render/netplan";
import { MANAGED_MARKER, NETPLAN_PATH } from "../../config/hostPaths";

const SEED = process.env.SPARK_PROPERTY_SEED !== undefined ? Number(process.env.SPARK_PROPERTY_SEED) >>> 0 : randomInt(0, 2 ** 31);
const RUNS = Number(process.env.SPARK_PROPERTY_COUNT ?? 300);
/** How many generated files netplan itself reads (two netplan runs of about 0.3 s each per file). */
const NETPLAN_SAMPLE = 6;

// ---------------------------------------------------------------------------------------------
// Generators: what the schema accepts
// ---------------------------------------------------------------------------------------------

/** Names a kernel gives, and names the schema accepts that YAML would read as a number, a bool, null or a date. */
const NAMED_INTERFACES = ["enp1s0f1np1", "enP2p1s0f1np1", "mgbe0_0", "eth0", "123", "0x1A", "1e5", "1_000", "true", "Null", "on", "y", "2001-12-14", "0.5"];

// IFNAME's shape less the names the schema refuses as never a NIC's port (a VPN's `zt…`, `veth…`, ...).
const interfaceName = fc.oneof(
    fc.stringMatching(IFNAME).filter((name) => interconnectNameProblem(name) === undefined),
    fc.constantFrom(...NAMED_INTERFACES),
);
const address = fc
    .tuple(fc.ipV4(), fc.integer({ min: 1, max: 31 }))
    .map(([ip, prefix]) => `${ip}/${prefix}`)
    .filter((text) => interfaceAddressProblem(text) === undefined);

const netplanSpec: fc.Arbitrary<NetplanSpec> = fc
    .record({
        node: fc.stringMatching(DNS_LABEL),
        mtu: fc.integer({ min: 1280, max: 9216 }),
        interfaces: fc.uniqueArray(fc.record({ name: interfaceName, address }), { minLength: 1, maxLength: 2, selector: (i) => i.name }),
    })
    .map((s) => ({ ...s, peers: [] }));

/** The generated spec is one the config accepts: each piece parses with its own schema. */
function assertSchemaAccepts(spec: NetplanSpec): void {
    assert.equal(NodeSchema.shape.name.safeParse(spec.node).success, true, `node name ${spec.node}`);
    assert.equal(InterconnectSchema.shape.mtu.safeParse(spec.mtu).success, true, `mtu ${spec.mtu}`);
    for (const iface of spec.interfaces) {
        const parsed = InterfaceSchema.safeParse(iface);
        assert.equal(parsed.success, true, `${JSON.stringify(iface)}: ${parsed.error?.message}`);
    }
    assert.equal(NodeSchema.shape.interconnect.safeParse(spec.interfaces).success, true);
}

// ---------------------------------------------------------------------------------------------
// What the file must say
// ---------------------------------------------------------------------------------------------

/** One interface's stanza as the file means it. */
function stanza(spec: NetplanSpec, iface: NetplanSpec["interfaces"][number]): Record<string, unknown> {
    return { dhcp4: false, dhcp6: false, "link-local": [], addresses: [iface.address], mtu: spec.mtu, optional: true };
}

/** The same stanza read with the failsafe schema: every scalar a string. */
function stanzaAsStrings(spec: NetplanSpec, iface: NetplanSpec["interfaces"][number]): Record<string, unknown> {
    return { dhcp4: "false", dhcp6: "false", "link-local": [], addresses: [iface.address], mtu: String(spec.mtu), optional: "true" };
}

/**
 * The file as renderNetplan built it line by line before it was emitted with js-yaml, with
 * interface names written as `key`. Deployed stacks hold files written by it.
 */
function lineBuiltNetplan(spec: NetplanSpec, key: (name: string) => string): string {
    const lines = [
        `# ${MANAGED_MARKER}`,
        `# Interconnect of ${spec.node}; removed by \`pulumi destroy\`.`,
        "network:",
        "  version: 2",
        "  renderer: networkd",
        "  ethernets:",
    ];
    for (const iface of spec.interfaces) {
        lines.push(
            `    ${key(iface.name)}:`,
            "      dhcp4: false",
            "      dhcp6: false",
            "      link-local: []",
            "      addresses:",
            `        - ${iface.address}`,
            `      mtu: ${spec.mtu}`,
            "      optional: true",
        );
    }
    return lines.join("\n") + "\n";
}

/** True when a plain scalar `name` would not read back as the string itself (YAML 1.2 core, or 1.1 for older readers). */
function readsAsAnotherType(name: string): boolean {
    return [yaml.CORE_SCHEMA, yaml.YAML11_SCHEMA].some((schema) => yaml.load(name, { schema }) !== name);
}

/** Reads the file back with js-yaml and checks it says exactly what the spec means. */
function assertRoundTrip(spec: NetplanSpec, text: string): void {
    assert.ok(text.startsWith(`# ${MANAGED_MARKER}\n# Interconnect of ${spec.node}; `), "the marker, then the node, in the first two lines");

    const doc = yaml.load(text, { schema: yaml.CORE_SCHEMA.withTags(yaml.realMapTag) }) as Map<string, Map<string, unknown>>;
    assert.deepEqual([...doc.keys()], ["network"]);
    const network = doc.get("network") as Map<string, unknown>;
    assert.deepEqual([...network.keys()], ["version", "renderer", "ethernets"], "no bonds, bridges, vlans or routes");
    assert.equal(network.get("version"), 2);
    assert.equal(network.get("renderer"), "networkd");
    const ethernets = network.get("ethernets") as Map<string, Map<string, unknown>>;
    assert.deepEqual(
        [...ethernets.keys()],
        spec.interfaces.map((i) => i.name),
        "the interfaces, by name (strings), in order",
    );
    for (const iface of spec.interfaces) {
        const got = Object.fromEntries([...(ethernets.get(iface.name) as Map<string, unknown>)]);
        assert.deepEqual(got, stanza(spec, iface), iface.name);
    }

    const strings = yaml.load(text, { schema: yaml.FAILSAFE_SCHEMA }) as { network: { ethernets: Record<string, Record<string, unknown>> } };
    assert.deepEqual(Object.keys(strings.network).sort(), ["ethernets", "renderer", "version"]);
    assert.deepEqual(Object.keys(strings.network.ethernets).sort(), spec.interfaces.map((i) => i.name).sort());
    for (const iface of spec.interfaces) {
        assert.deepEqual(strings.network.ethernets[iface.name], stanzaAsStrings(spec, iface), `${iface.name} (failsafe)`);
    }
}

// ---------------------------------------------------------------------------------------------
// netplan's own reading
// ---------------------------------------------------------------------------------------------

const roots: string[] = [];
after(() => roots.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

function netplan(args: string[]): string {
    const r = spawnSync("netplan", args, { encoding: "utf8" });
    if (r.error) {
        throw new Error(`netplan did not run (${r.error.message}): install netplan.io (Debian package; scripts/test.sh installs it)`);
    }
    assert.equal(r.status, 0, `netplan ${args.join(" ")} exited ${r.status}:\n${r.stderr}`);
    return r.stdout;
}

/** netplan's version, from its Debian package (netplan 0.106 has no --version). */
function netplanVersion(): string {
    const r = spawnSync("dpkg-query", ["-W", "-f", "${Version}", "netplan.io"], { encoding: "utf8" });
    return r.status === 0 ? r.stdout : "unknown (not a Debian package)";
}

/** Installs the file in a fresh root as `up` does (mode 600), then checks what netplan makes of it. */
function assertNetplanReads(spec: NetplanSpec, text: string): void {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "netplan-root-"));
    roots.push(root);
    const file = path.join(root, NETPLAN_PATH);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, { mode: 0o600 });

    // `netplan get`: netplan's parsed state, written back out as YAML.
    const state = yaml.load(netplan(["get", "--root-dir", root]), { schema: yaml.FAILSAFE_SCHEMA }) as {
        network: { renderer: string; ethernets: Record<string, Record<string, unknown>> };
    };
    assert.equal(state.network.renderer, "networkd");
    assert.deepEqual(Object.keys(state.network.ethernets).sort(), spec.interfaces.map((i) => i.name).sort(), "netplan get: the interfaces");
    for (const iface of spec.interfaces) {
        assert.deepEqual(state.network.ethernets[iface.name], stanzaAsStrings(spec, iface), `netplan get: ${iface.name}`);
    }

    // `netplan generate`: the networkd files `netplan apply` hands to systemd-networkd.
    netplan(["generate", "--root-dir", root]);
    const dir = path.join(root, "run/systemd/network");
    assert.deepEqual(
        fs.readdirSync(dir).sort(),
        spec.interfaces.flatMap((i) => [`10-netplan-${i.name}.link`, `10-netplan-${i.name}.network`]).sort(),
        "netplan generate: one .link and one .network per interface, nothing else",
    );
    for (const iface of spec.interfaces) {
        const network = fs.readFileSync(path.join(dir, `10-netplan-${iface.name}.network`), "utf8").split("\n");
        for (const line of [`Name=${iface.name}`, `MTUBytes=${spec.mtu}`, "LinkLocalAddressing=no", `Address=${iface.address}`, "RequiredForOnline=no"]) {
            assert.ok(network.includes(line), `netplan generate: ${iface.name}'s .network has no ${line}:\n${network.join("\n")}`);
        }
        assert.deepEqual(
            network.filter((l) => l.startsWith("Address=") || l.startsWith("DHCP=")),
            [`Address=${iface.address}`],
            `netplan generate: ${iface.name} has its one static address and no DHCP`,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------

describe(`netplan file round trip (seed ${SEED}, ${RUNS} runs, netplan.io ${netplanVersion()})`, () => {
    it("every file reads back as its interfaces, addresses and MTU, static, networkd, and nothing else", () => {
        fc.assert(
            fc.property(netplanSpec, (spec) => {
                assertSchemaAccepts(spec);
                assertRoundTrip(spec, renderNetplan(spec));
            }),
            { seed: SEED, numRuns: RUNS },
        );
    });

    it("the bytes are the line-built file's; only a name YAML would read as another type is quoted", () => {
        let quoted = 0;
        fc.assert(
            fc.property(netplanSpec, (spec) => {
                const quote = (name: string) => (readsAsAnotherType(name) ? `'${name}'` : name);
                assert.equal(renderNetplan(spec), lineBuiltNetplan(spec, quote));
                if (spec.interfaces.some((i) => readsAsAnotherType(i.name))) quoted++;
            }),
            { seed: SEED, numRuns: RUNS },
        );
        // Both arms ran: the generator mixes such names in.
        assert.ok(quoted > 0 && quoted < RUNS, `files with a quoted name: ${quoted} of ${RUNS}`);
    });

    it(`netplan reads a sample of ${NETPLAN_SAMPLE} generated files (and one with every kind of odd name) as meant`, () => {
        const odd: NetplanSpec[] = [];
        for (let i = 0; i < NAMED_INTERFACES.length; i += 2) {
            odd.push({
                node: "odd",
                mtu: 1500,
                interfaces: [
                    { name: NAMED_INTERFACES[i], address: `10.0.${i}.1/24` },
                    { name: NAMED_INTERFACES[i + 1], address: `10.0.${i + 1}.1/24` },
                ],
                peers: [],
            });
        }
        const sample = [...fc.sample(netplanSpec, { seed: SEED, numRuns: NETPLAN_SAMPLE }), ...odd];
        for (const spec of sample) {
            assertSchemaAccepts(spec);
            assertNetplanReads(spec, renderNetplan(spec));
        }
    });
});
