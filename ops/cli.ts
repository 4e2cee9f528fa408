// The day-to-day commands on a stack, run from the project's root:
//   npm run doctor -- --stack NAME [--config-file FILE] [--json]
//   npm run status -- --stack NAME [--config-file FILE] [--json]
//   npm run logs -- --stack NAME [NODE] [--config-file FILE] [--lines N] [--since TIME] [--follow]
// Each reads the stack's config with the project's own parser (config/), reaches each node over
// SSH with the key the program uses and the host key the stack pinned (nodes[].ssh.hostKey, or the
// one recorded on first contact: the `hostKeys` output; doctor, before the first up, shows the key
// it meets instead), and runs a script as root there (ops/doctor.ts, status.ts, logs.ts), through
// sudo when the login is not root: with its password (sudoPassword) on stdin, never in argv. The
// API key is read on the node; nothing here prints or passes a secret in argv.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { CONFIG_NAMESPACE, ConfigError, decodeConfigValue, parseConfig, setRawValue, type Config, type NodeConfig } from "../config";
import { SSH_LOGIN_SCRIPT, hostKeyFingerprint, parseRootAccess } from "../components/hostKey";
import { SUDO_STDIN_MARKER, remoteCommand, rootAccessOf, shellQuote } from "../components/render/host/shell";
import { resolveInterfaceNames } from "../components/nodeFacts";
import { hardwareProbe } from "../components/render/probe";
import { engineStrategy } from "../components/render/engine";
import { firstContactScript, parseFirstContact } from "../components/render/firstContact";
import { clusterFindings, contactProbeFor, type NodeReport } from "../components/render/nodeCheck";
import { DoctorLogin, doctorExitCode, doctorJson, loginFindings, renderDoctor } from "./doctor";
import { stackConfigFile } from "../components/render/tryIt";
import { LOGS_DEFAULTS, LogsOptions, logsOptionsProblem, nodeLogsScript } from "./logs";
import { judgeNode, nodeStatusScript, parseNodeReport, renderStatus, statusExitCode, statusExpectations, statusJson } from "./status";

const ROOT = path.resolve(__dirname, "..", fs.existsSync(path.resolve(__dirname, "..", "package.json")) ? "" : "..");

/** Seconds one SSH connection may take to connect, and a status script to run. */
const CONNECT_SECONDS = 5;
const STATUS_SECONDS = 60;
const LOGS_SECONDS = 120;

class UsageError extends Error {}

interface Args {
    command: "status" | "logs" | "doctor";
    stack: string;
    configFile?: string;
    json: boolean;
    node?: string;
    logs: LogsOptions;
}

const USAGE = [
    "usage: npm run doctor -- --stack NAME [--config-file FILE] [--json]",
    "       npm run status -- --stack NAME [--config-file FILE] [--json]",
    "       npm run logs -- --stack NAME [NODE] [--config-file FILE] [--lines N] [--since TIME] [--follow]",
].join("\n");

/** The command line, checked. */
export function parseArgs(argv: readonly string[]): Args {
    const [command, ...rest] = argv;
    if (command !== "status" && command !== "logs" && command !== "doctor") throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    const args: Args = { command, stack: "", json: false, logs: { ...LOGS_DEFAULTS } };
    for (let i = 0; i < rest.length; i++) {
        const arg = rest[i];
        const value = () => {
            const v = rest[++i];
            if (v === undefined) throw new UsageError(`${arg} needs a value`);
            return v;
        };
        if (arg === "--stack" || arg === "-s") args.stack = value();
        else if (arg === "--config-file") args.configFile = value();
        else if (arg === "--json" && command !== "logs") args.json = true;
        else if (arg === "--follow" && command === "logs") args.logs.follow = true;
        else if (arg === "--lines" && command === "logs") args.logs.lines = Number(value());
        else if (arg === "--since" && command === "logs") args.logs.since = value();
        else if (!arg.startsWith("-") && command === "logs" && args.node === undefined) args.node = arg;
        else throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
    if (!/^[A-Za-z0-9._-]+$/.test(args.stack)) throw new UsageError("--stack NAME is required (e.g. --stack dev)");
    const problem = logsOptionsProblem(args.logs);
    if (problem) throw new UsageError(problem);
    return args;
}

/** Runs a program (with `stdin`, when given); resolves with its stdout, rejects with its stderr. Bounded by `seconds`. */
function runProgram(file: string, args: string[], seconds: number, env: NodeJS.ProcessEnv = process.env, stdin?: string): Promise<string> {
    return new Promise((resolve, reject) => {
        const child = spawn(file, args, { cwd: ROOT, env, stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
        if (stdin !== undefined) child.stdin?.end(stdin);
        let out = "";
        let err = "";
        const timer = setTimeout(() => child.kill("SIGTERM"), seconds * 1000);
        child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
        child.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        child.on("close", (code, signal) => {
            clearTimeout(timer);
            if (code === 0) resolve(out);
            else reject(new Error((err.trim() || out.trim() || `exit ${code ?? signal}`).split("\n").slice(-5).join("\n")));
        });
    });
}

/** scripts/pulumi.sh for a stack that must already exist. */
function pulumiCli(args: Args, pulumiArgs: string[]): Promise<string> {
    return runProgram(path.join(ROOT, "scripts", "pulumi.sh"), ["--stack", args.stack, "--non-interactive", ...pulumiArgs], 60, {
        ...process.env,
        SPARK_STACK_MUST_EXIST: "1",
    });
}

/** `pulumi config --json --show-secrets` as the raw config parseConfig takes (values decoded as stackConfig.ts does). */
export function rawConfigFromCli(json: string): { values: Record<string, unknown>; secretKeys: Set<string> } {
    const all = JSON.parse(json) as Record<string, { value?: string; secret?: boolean }>;
    const values: Record<string, unknown> = {};
    const secretKeys = new Set<string>();
    const prefix = `${CONFIG_NAMESPACE}:`;
    for (const [fullKey, entry] of Object.entries(all)) {
        if (!fullKey.startsWith(prefix)) continue;
        const key = fullKey.slice(prefix.length);
        setRawValue(values, key, decodeConfigValue(entry.value ?? ""));
        if (entry.secret) secretKeys.add(key);
    }
    return { values, secretKeys };
}

async function loadConfig(args: Args): Promise<Config> {
    const configFile = args.configFile ?? stackConfigFile(args.stack, (f) => fs.existsSync(path.join(ROOT, f)));
    const json = await pulumiCli(args, ["config", "--json", "--show-secrets", ...(configFile ? ["--config-file", configFile] : [])]);
    try {
        return parseConfig(rawConfigFromCli(json));
    } catch (err) {
        if (err instanceof ConfigError) throw new UsageError(`the stack's configuration is not valid:\n${err.message}`);
        throw err;
    }
}

/** The `hostKeys` output: each node's pinned host key fingerprint, `SHA256:… (type)`. */
async function pinnedFingerprints(args: Args): Promise<Record<string, string>> {
    try {
        return JSON.parse(await pulumiCli(args, ["stack", "output", "hostKeys", "--json"])) as Record<string, string>;
    } catch {
        return {};
    }
}

/** A scratch directory only we can read: known_hosts files and a key given as secret text. */
function scratch(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-ops-"));
    fs.chmodSync(dir, 0o700);
    return dir;
}

/**
 * The node's pinned host key as a known_hosts line under the alias `node.name`: the configured one,
 * or the key the node presents now when its fingerprint is the one the stack recorded.
 */
async function knownHostsLine(node: NodeConfig, fingerprints: Record<string, string>): Promise<string> {
    if (node.ssh.hostKey) return `${node.name} ${node.ssh.hostKey}`;
    const pinned = /^(SHA256:\S+) \((\S+)\)$/.exec(fingerprints[node.name] ?? "");
    if (!pinned) throw new Error(`no host key is pinned for ${node.name} (run up first, or set nodes[].ssh.hostKey)`);
    const scanned = await runProgram(
        "ssh-keyscan",
        ["-T", String(CONNECT_SECONDS), "-p", String(node.ssh.port), "-t", pinned[2], node.ssh.host],
        CONNECT_SECONDS * 3,
    );
    const key = scanned
        .split("\n")
        .filter((line) => line !== "" && !line.startsWith("#"))
        .map((line) => line.split(/\s+/).slice(1, 3).join(" "))
        .find((k) => hostKeyFingerprint(k) === pinned[1]);
    if (key === undefined) throw new Error(`${node.name}'s host key is not the pinned ${pinned[1]}: refusing to connect`);
    return `${node.name} ${key}`;
}

/**
 * What a script run on `node` gets first on stdin: the login user's sudo password and the marker
 * line, as our provider sends them (connection.sudoPassword); nothing without a password.
 */
export function sudoStdin(node: NodeConfig): string {
    return node.ssh.sudoPassword === undefined ? "" : `${node.ssh.sudoPassword.reveal()}\n${SUDO_STDIN_MARKER}\n`;
}

/** The command line that runs `script` as root on `node` (through sudo when its login is not root). */
export function rootCommandFor(node: NodeConfig, script: string): string {
    return remoteCommand(script, node.ssh.user, rootAccessOf(node.ssh.user, node.ssh.sudoPassword !== undefined));
}

/** Runs `script` as root on `node` over SSH; resolves with its stdout. */
function runAsRoot(node: NodeConfig, dir: string, knownHosts: string, script: string, seconds: number): Promise<string> {
    const stdin = sudoStdin(node);
    return runProgram("ssh", sshArgv(node, dir, knownHosts, rootCommandFor(node, script)), seconds, process.env, stdin === "" ? undefined : stdin);
}

/** ssh argv to run the command line `command` on `node`, host key checked against `knownHosts`. */
function sshArgv(node: NodeConfig, dir: string, knownHosts: string, command: string): string[] {
    const known = path.join(dir, `known_hosts.${node.name}`);
    fs.writeFileSync(known, `${knownHosts}\n`, { mode: 0o600 });
    const key = node.ssh.privateKey;
    let identity: string;
    if (key.kind === "path") identity = path.resolve(ROOT, key.path);
    else {
        identity = path.join(dir, `id.${node.name}`);
        fs.writeFileSync(identity, key.text.reveal().replace(/\n?$/, "\n"), { mode: 0o600 });
    }
    const keyType = knownHosts.split(" ")[1];
    return [
        "-o",
        "BatchMode=yes",
        "-o",
        `ConnectTimeout=${CONNECT_SECONDS}`,
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        identity,
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        `UserKnownHostsFile=${known}`,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        `HostKeyAlias=${node.name}`,
        "-o",
        `HostKeyAlgorithms=${keyType === "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256" : keyType}`,
        "-p",
        String(node.ssh.port),
        `${node.ssh.user}@${node.ssh.host}`,
        command,
    ];
}

async function status(args: Args): Promise<number> {
    const [config, fingerprints] = await Promise.all([loadConfig(args), pinnedFingerprints(args)]);
    const dir = scratch();
    try {
        const expectations = statusExpectations(config);
        const statuses = await Promise.all(
            expectations.map(async (expect) => {
                if (expect.retired) return judgeNode(expect, undefined);
                const node = config.nodes.find((n) => n.name === expect.node) as NodeConfig;
                try {
                    const known = await knownHostsLine(node, fingerprints);
                    const out = await runAsRoot(node, dir, known, nodeStatusScript(expect), STATUS_SECONDS);
                    return judgeNode(expect, parseNodeReport(out));
                } catch (err) {
                    return judgeNode(expect, undefined, (err as Error).message.replace(/\s+/g, " ").trim());
                }
            }),
        );
        const paused = config.model.paused === true;
        console.log(args.json ? statusJson(args.stack, statuses, paused) : renderStatus(statuses, paused));
        return statusExitCode(statuses);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/** Prints each line of `stream` with `prefix` in front. */
function prefixLines(stream: NodeJS.ReadableStream, prefix: string, out: NodeJS.WriteStream): void {
    let pending = "";
    stream.on("data", (d: Buffer) => {
        const lines = (pending + d.toString()).split("\n");
        pending = lines.pop() ?? "";
        for (const line of lines) out.write(`${prefix}${line}\n`);
    });
    stream.on("end", () => pending && out.write(`${prefix}${pending}\n`));
}

async function logs(args: Args): Promise<number> {
    const [config, fingerprints] = await Promise.all([loadConfig(args), pinnedFingerprints(args)]);
    const nodes = config.nodes.filter((n) => !n.retired && (args.node === undefined || n.name === args.node));
    if (nodes.length === 0) throw new UsageError(`no node named ${JSON.stringify(args.node)} (nodes: ${config.nodes.map((n) => n.name).join(", ")})`);
    const dir = scratch();
    const script = nodeLogsScript(args.logs, engineStrategy(config.engine).ops);
    try {
        if (!args.logs.follow) {
            let rc = 0;
            // Node by node, each whole.
            for (const node of nodes) {
                console.log(`==> ${node.name} (${node.ssh.user}@${node.ssh.host}) <==`);
                try {
                    process.stdout.write(await runAsRoot(node, dir, await knownHostsLine(node, fingerprints), script, LOGS_SECONDS));
                } catch (err) {
                    console.error(`${node.name}: ${(err as Error).message}`);
                    rc = 1;
                }
            }
            return rc;
        }
        // Every node at once, each line prefixed with its node, until Ctrl-C (or every session ends).
        const children = await Promise.all(
            nodes.map(async (node) => {
                const child = spawn("ssh", sshArgv(node, dir, await knownHostsLine(node, fingerprints), rootCommandFor(node, script)), {
                    cwd: ROOT,
                    stdio: ["pipe", "pipe", "pipe"],
                });
                // The sudo password first (when there is one); stdin then stays open until Ctrl-C.
                if (node.ssh.sudoPassword !== undefined) child.stdin.write(sudoStdin(node));
                prefixLines(child.stdout, `${node.name} | `, process.stdout);
                prefixLines(child.stderr, `${node.name} | `, process.stderr);
                return child;
            }),
        );
        const stop = () => {
            for (const child of children) {
                child.stdin.end(); // the node stops its journal reader when its stdin closes
                if (child.pid !== undefined && child.exitCode === null) child.kill("SIGTERM");
            }
        };
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
        await Promise.all(children.map((child) => new Promise((resolve) => child.once("close", resolve))));
        return 0;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/**
 * The node's host key for doctor: the configured or pinned one (as status checks it), or, before the
 * first up has pinned one, the key the node presents now, shown by its fingerprint (first contact).
 */
async function doctorHostKey(node: NodeConfig, fingerprints: Record<string, string>): Promise<{ line: string; said: string }> {
    if (node.ssh.hostKey !== undefined || fingerprints[node.name] !== undefined) {
        const line = await knownHostsLine(node, fingerprints);
        return { line, said: `${hostKeyFingerprint(line.split(" ").slice(1).join(" "))} (pinned)` };
    }
    const scanned = await runProgram(
        "ssh-keyscan",
        ["-T", String(CONNECT_SECONDS), "-p", String(node.ssh.port), "-t", "ed25519", node.ssh.host],
        CONNECT_SECONDS * 3,
    );
    const key = scanned
        .split("\n")
        .filter((line) => line !== "" && !line.startsWith("#"))
        .map((line) => line.split(/\s+/).slice(1, 3).join(" "))[0];
    if (key === undefined) throw new Error(`ssh-keyscan got no ed25519 host key from ${node.ssh.host}:${node.ssh.port}`);
    return {
        line: `${node.name} ${key}`,
        said: `${hostKeyFingerprint(key)} (seen now, not pinned yet: the first up pins it; compare with ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on the node, or set nodes[].ssh.hostKey)`,
    };
}

async function doctor(args: Args): Promise<number> {
    const [config, fingerprints] = await Promise.all([loadConfig(args), pinnedFingerprints(args)]);
    const dir = scratch();
    try {
        const nodes = config.nodes.filter((n) => !n.retired);
        const results = await Promise.all(
            nodes.map(async (node): Promise<{ login: DoctorLogin; report?: NodeReport }> => {
                const target = `${node.ssh.user}@${node.ssh.host}:${node.ssh.port}`;
                try {
                    const key = await doctorHostKey(node, fingerprints);
                    const stdin = sudoStdin(node);
                    const loginOut = await runProgram(
                        "ssh",
                        sshArgv(node, dir, key.line, `bash -c ${shellQuote(SSH_LOGIN_SCRIPT)}`),
                        STATUS_SECONDS,
                        process.env,
                        stdin === "" ? undefined : stdin,
                    );
                    const login: DoctorLogin = { node: node.name, target, hostKey: key.said, rootAccess: parseRootAccess(loginOut) ?? "root" };
                    const contact = contactProbeFor(config, node);
                    const [hardware, facts] = await Promise.all([
                        runAsRoot(node, dir, key.line, hardwareProbe.script(), STATUS_SECONDS),
                        runAsRoot(node, dir, key.line, firstContactScript(contact), STATUS_SECONDS),
                    ]);
                    let interfaces: string[];
                    try {
                        interfaces = resolveInterfaceNames(
                            node.name,
                            node.interconnect.map((i) => i.name),
                            hardwareProbe.parse(hardware),
                        );
                    } catch (err) {
                        return { login: { ...login, error: (err as Error).message } };
                    }
                    return { login, report: { node, facts: parseFirstContact(contact, facts), interfaces, probed: true } };
                } catch (err) {
                    return { login: { node: node.name, target, error: (err as Error).message.replace(/\s+/g, " ").trim() } };
                }
            }),
        );
        const reports = results.flatMap((r) => (r.report ? [r.report] : []));
        const logins = results.map((r) => r.login);
        // The fit on reported memory needs every node's report; with a node missing it is not judged.
        const findings = [
            ...loginFindings(logins),
            ...(reports.length === nodes.length
                ? clusterFindings(config, reports)
                : reports.flatMap((r) => clusterFindings(config, [r]).filter((f) => f.topic !== "fit"))),
        ];
        console.log(
            args.json
                ? doctorJson(args.stack, logins, findings)
                : renderDoctor(
                      args.stack,
                      nodes.map((n) => n.name),
                      findings,
                  ),
        );
        return doctorExitCode(findings);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

async function main(): Promise<void> {
    let args: Args;
    try {
        args = parseArgs(process.argv.slice(2));
    } catch (err) {
        console.error(`${(err as Error).message}\n${USAGE}`);
        process.exit(2);
    }
    try {
        process.exit(args.command === "status" ? await status(args) : args.command === "doctor" ? await doctor(args) : await logs(args));
    } catch (err) {
        console.error(`${args.command}: ${(err as Error).message}`);
        process.exit(2);
    }
}

if (require.main === module) {
    void main();
}
