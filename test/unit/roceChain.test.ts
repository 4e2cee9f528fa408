/**
 * The RoCE chain in every stack: the traffic class NCCL marks with (NCCL_IB_TC in the rendered
 * /etc/nccl.conf) carries a DSCP that the NIC's DSCP → priority map (the default map plus what the
 * rendered PFC unit sets) puts on the priority the unit enables PFC on. The check reads the
 * rendered text, not the config: a wiring that drops NCCL_IB_TC or the map entry fails it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { CONFIG_NAMESPACE, RawConfig, parseConfig } from "../../config";
import { renderNcclConf } from "../../components/render/nccl";
import { renderPfcUnit } from "../../components/render/pfc";
import { defaultDscpPriority, dscpOfTrafficClass, ncclTrafficClass, roceChainPlan } from "../../components/render/roceChain";

const ROOT = path.resolve(__dirname, "..", "..", "..");
const STACK_FILES = ["Pulumi.dev.yaml", ...fs.readdirSync(path.join(ROOT, "stacks")).map((f) => path.join("stacks", f))].filter((f) => f.endsWith(".yaml"));

function rawConfigOf(file: string, edits: Record<string, unknown> = {}): RawConfig {
    const doc = yaml.load(fs.readFileSync(path.join(ROOT, file), "utf8")) as { config: Record<string, unknown> };
    const values: Record<string, unknown> = {};
    const secretKeys = new Set<string>(["apiKey"]);
    for (const [fullKey, value] of Object.entries(doc.config)) {
        const key = fullKey.slice(`${CONFIG_NAMESPACE}:`.length);
        const secure = typeof value === "object" && value !== null && "secure" in value;
        values[key] = secure ? "encrypted-in-the-stack-file-0123456789" : value;
        if (secure) secretKeys.add(key);
    }
    values["apiKey"] ??= "test-api-key-0123456789abcdef";
    return { values: { ...values, ...edits }, secretKeys };
}

/** NCCL_IB_TC from a rendered nccl.conf (NCCL's default when absent: 0). */
function trafficClassOf(ncclConf: string): number {
    const line = ncclConf.split("\n").find((l) => l.startsWith("NCCL_IB_TC="));
    return line ? Number(line.slice("NCCL_IB_TC=".length)) : 0;
}

/** What the rendered PFC unit leaves on an interface: PFC priorities, trust, the DSCP map. */
function nicStateOf(unit: string, iface: string): { pfc: number[]; trust: string; dscp2prio: number[] } {
    const state = { pfc: [] as number[], trust: "pcp", dscp2prio: Array.from({ length: 64 }, (_, d) => defaultDscpPriority(d)) };
    for (const line of unit.split("\n").filter((l) => l.startsWith("ExecStart="))) {
        // Our unit's arguments are plain words (interface names, numbers, commas): split on spaces.
        const argv = line.slice("ExecStart=".length).split(" ");
        if (argv[argv.indexOf("-i") + 1] !== iface) continue;
        const at = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
        const pfc = at("--pfc");
        if (pfc) state.pfc = pfc.split(",").flatMap((v: string, p: number) => (v === "1" ? [p] : []));
        const trust = at("--trust");
        if (trust) state.trust = trust;
        const entry = at("--dscp2prio");
        if (entry) {
            const [action, dscp, prio] = entry.split(",");
            assert.equal(action, "set");
            state.dscp2prio[Number(dscp)] = Number(prio);
        }
    }
    return state;
}

/** The priority NCCL's RoCE packets land on, through trust and the map; and the PFC priorities. */
function chainOf(ncclConf: string, unit: string, iface: string): { landsOn: number; pfc: number[] } {
    const nic = nicStateOf(unit, iface);
    // Untagged RoCE v2 packets carry no PCP: with trust pcp they land on priority 0.
    const landsOn = nic.trust === "dscp" ? nic.dscp2prio[dscpOfTrafficClass(trafficClassOf(ncclConf))] : 0;
    return { landsOn, pfc: nic.pfc };
}

function renderedChain(file: string, edits: Record<string, unknown> = {}) {
    const config = parseConfig(rawConfigOf(file, edits));
    const plan = roceChainPlan(config);
    return config.nodes
        .filter((n) => n.roce.enabled)
        .map((node) => {
            const iface = node.interconnect[0].name ?? "enp1s0f1np1";
            const ncclConf = renderNcclConf({
                transport: config.transport,
                socketIfname: iface,
                interfaceName: iface,
                ibHca: ["rocep1s0f1"],
                heterogeneous: config.hasThor,
                ...(plan.trafficClass !== undefined ? { ibTrafficClass: plan.trafficClass } : {}),
                debug: config.nccl.debug,
                overrides: config.nccl.overrides,
            });
            const unit = renderPfcUnit([iface], plan.pfc.priority, plan.pfc.trustDscp, plan.pfc.dscp);
            return { node: node.name, ncclConf, unit, iface };
        });
}

describe("RoCE chain: NCCL's traffic class lands in the PFC priority", () => {
    it("the numbers: TC 106 is DSCP 26 with ECT(0); DSCP 26 is priority 3 by the ConnectX default map", () => {
        assert.equal(ncclTrafficClass(26), 106);
        assert.equal(dscpOfTrafficClass(106), 26);
        assert.equal(defaultDscpPriority(26), 3);
        assert.equal(defaultDscpPriority(24), 3);
        assert.equal(defaultDscpPriority(0), 0);
    });

    for (const file of STACK_FILES) {
        it(`${file}: every RoCE node's NCCL traffic class maps to its PFC priority`, () => {
            const nodes = renderedChain(file);
            const config = parseConfig(rawConfigOf(file));
            if (config.transport !== "roce") {
                assert.equal(nodes.length, 0, "a socket cluster configures no PFC");
                return;
            }
            assert.ok(nodes.length > 0, `${file} has RoCE nodes`);
            for (const { node, ncclConf, unit, iface } of nodes) {
                const { landsOn, pfc } = chainOf(ncclConf, unit, iface);
                assert.deepEqual(pfc, [landsOn], `${node}: NCCL's packets land on priority ${landsOn}, PFC is on ${pfc.join(",")}`);
            }
        });
    }

    it("another PFC priority or DSCP: the unit sets the map entry, and the chain still agrees", () => {
        for (const roce of [{ priority: 5 }, { dscp: 46 }, { priority: 0, dscp: 10 }]) {
            for (const { node, ncclConf, unit, iface } of renderedChain("stacks/Pulumi.spark-pair.yaml", { roce })) {
                const { landsOn, pfc } = chainOf(ncclConf, unit, iface);
                assert.deepEqual(pfc, [landsOn], `${JSON.stringify(roce)} ${node}`);
            }
        }
    });

    it("the check fails where a link is missing: no NCCL_IB_TC, no map entry, trust pcp", () => {
        const [{ ncclConf, unit, iface }] = renderedChain("stacks/Pulumi.spark-pair.yaml", { roce: { priority: 5 } });
        const withoutTc = ncclConf.replace(/^NCCL_IB_TC=.*\n/m, "");
        assert.notEqual(withoutTc, ncclConf);
        assert.notDeepEqual([chainOf(withoutTc, unit, iface).landsOn], chainOf(withoutTc, unit, iface).pfc, "DSCP 0 lands on priority 0");
        const withoutEntry = unit.replace(/^ExecStart=.*--dscp2prio.*\n/m, "");
        assert.notEqual(withoutEntry, unit);
        assert.deepEqual(chainOf(ncclConf, withoutEntry, iface), { landsOn: 3, pfc: [5] }, "DSCP 26 stays on the default priority 3");
        const pcp = renderPfcUnit([iface], 5, false, 26);
        assert.deepEqual(chainOf(ncclConf, pcp, iface), { landsOn: 0, pfc: [5] });
    });

    it("the config refuses NCCL_IB_TC in nccl.overrides and a DSCP outside 0-63", () => {
        assert.throws(
            () => parseConfig(rawConfigOf("stacks/Pulumi.spark-pair.yaml", { nccl: { transport: "roce", overrides: { NCCL_IB_TC: "0" } } })),
            /nccl\.overrides\.NCCL_IB_TC: is rendered from roce\.dscp/,
        );
        assert.throws(() => parseConfig(rawConfigOf("stacks/Pulumi.spark-pair.yaml", { roce: { dscp: 64 } })), /roce\.dscp/);
    });
});
