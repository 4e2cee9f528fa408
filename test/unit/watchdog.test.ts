// The health watchdog and the restart gate (issue 36, render/watchdog.ts): the config keys (schema,
// defaults, a bad value's error), the rendered units (snapshots; the Exec lines read back as systemd
// and bash read them), what the unit steps install and remove, and the scripts themselves run
// against stand-ins (a fake `systemctl`, `sleep` and `journalctl` on PATH, a real HTTP server on
// loopback) with short bounds: the restart, the backoff, the memory wait and the stop really happen.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ConfigError, type WatchdogConfig, parseConfig } from "../../config";
import { UNITS } from "../../config/hostPaths";
import { renderVllmUnit, vllmPlan, renderVllmFollowUnit } from "../../components/render/vllm";
import { sglangPlan } from "../../components/render/sglang";
import { rayPlan, rayGcsHealthUrl } from "../../components/render/ray";
import { gateArgv, gateDir, renderWatchdogUnit, watchdogArgv } from "../../components/render/watchdog";
import { HOST_LIB } from "../../components/render/host/lib";
import { DOCKER_DEFAULT, VENV, VLLM_MP_BASE, sparkPair } from "../support/fixtures";
import { matchSnapshot } from "../support/snapshot";
import { bashCheck, systemdSplit } from "../support/unitText";
import { judgeNode, nodeStatusScript, parseNodeReport, statusExitCode, statusExpectations } from "../../ops/status";

const API_KEY = "sk-unit-test-apikey-0123456789";
const SSH_KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "-----END OPENSSH PRIVATE KEY-----", ""].join("\n");

function configWith(extra: Record<string, unknown>) {
    return parseConfig({
        values: { nodes: sparkPair(), model: { source: "Qwen/Qwen2.5-7B-Instruct" }, apiKey: API_KEY, sshPrivateKey: SSH_KEY, ...extra },
        secretKeys: new Set(["apiKey", "sshPrivateKey"]),
    });
}

/** The product's defaults, as the config resolves them. */
const DEFAULTS: WatchdogConfig = {
    startSeconds: 1800,
    unresponsiveSeconds: 30,
    backoffSeconds: 5,
    maxBackoffSeconds: 300,
    maxFailedStarts: 6,
    memoryWaitSeconds: 120,
};

const HEAD = { ...VLLM_MP_BASE, executor: "ray" as const, unifiedMemory: true, watchdog: DEFAULTS };
const RANK1 = {
    ...VLLM_MP_BASE,
    tensorParallel: 2,
    multiNode: { nnodes: 2, rank: 1, masterAddr: "192.168.100.11", masterPort: 29500 },
    unifiedMemory: true,
    watchdog: DEFAULTS,
};

function execLine(unit: string, key: string): string[] {
    const line = unit.split("\n").find((l) => l.startsWith(`${key}=`));
    assert.ok(line, `the unit has ${key}=`);
    return systemdSplit(line.slice(key.length + 1));
}

describe("config: watchdog and restarts", () => {
    it("defaults: on, 1800 s after a start, 30 s unanswered, backoff 5 s doubling to 300 s, stop after 6, memory wait 120 s", () => {
        assert.deepEqual(configWith({}).watchdog, DEFAULTS);
    });

    it("watchdog.enabled false: no watchdog, no gate (the units restart as Restart=always alone does)", () => {
        assert.equal(configWith({ watchdog: { enabled: false } }).watchdog, undefined);
        const unit = renderVllmUnit({ ...HEAD, watchdog: undefined }, DOCKER_DEFAULT, "h");
        assert.doesNotMatch(unit, /ExecCondition=|Wants=spark-cluster-vllm-watchdog|TimeoutStartSec=(?!900$)/m);
        const plan = vllmPlan({ ...HEAD, watchdog: undefined }, DOCKER_DEFAULT);
        assert.match(plan.unitStep.create(unit), /systemctl disable --now spark-cluster-vllm-watchdog\.service/, "an earlier watchdog is removed");
    });

    it("the ceiling of the backoff is never below its first step", () => {
        assert.equal(configWith({ restarts: { backoffSeconds: 60, maxBackoffSeconds: 10 } }).watchdog?.maxBackoffSeconds, 60);
    });

    for (const [key, value, what] of [
        ["watchdog", { unresponsiveSeconds: 2 }, /watchdog\.unresponsiveSeconds/],
        ["watchdog", { startSeconds: "soon" }, /watchdog\.startSeconds/],
        ["restarts", { maxFailedStarts: 1 }, /restarts\.maxFailedStarts/],
        ["restarts", { backoffSeconds: 0.5 }, /restarts\.backoffSeconds/],
        ["watchdog", { restartAfter: 3 }, /watchdog/],
    ] as const) {
        it(`refuses ${key}: ${JSON.stringify(value)}, naming the key`, () => {
            assert.throws(
                () => configWith({ [key]: value }),
                (err: unknown) => err instanceof ConfigError && what.test(err.message),
            );
        });
    }
});

describe("rendered: the watchdog units, the gated engine unit, the follower's watch", () => {
    const vllmUnit = renderVllmUnit(HEAD, DOCKER_DEFAULT, "h");
    const watchdogUnit = renderWatchdogUnit(
        {
            unit: UNITS.vllm,
            url: "http://127.0.0.1:8000/health",
            what: "spark-cluster: restarts vLLM (tiny) when its API stops answering /health",
            gated: true,
        },
        DEFAULTS,
    );

    it("snapshots", () => {
        matchSnapshot("watchdog.unit.vllm-gated.docker.service", vllmUnit);
        matchSnapshot("watchdog.unit.vllm-watchdog.service", watchdogUnit);
        const ray = rayPlan(
            {
                role: "head",
                nodeIp: "192.168.100.11",
                headIp: "192.168.100.11",
                port: 6379,
                gpus: 1,
                dashboardHost: "127.0.0.1",
                dashboardPort: 8265,
                ports: {
                    clientServerPort: 10001,
                    nodeManagerPort: 6800,
                    objectManagerPort: 6801,
                    runtimeEnvAgentPort: 6802,
                    dashboardAgentGrpcPort: 6803,
                    dashboardAgentListenPort: 52365,
                    metricsExportPort: 6804,
                    minWorkerPort: 10002,
                    maxWorkerPort: 10100,
                },
            },
            DOCKER_DEFAULT,
            DEFAULTS,
        );
        const rayCreate = ray.unitStep.create(ray.unit("h"));
        assert.match(ray.unit("h"), /^Wants=spark-cluster-ray-watchdog\.service$/m);
        assert.match(rayCreate, /spark-cluster-ray-watchdog\.service/);
        const followUnit = renderVllmFollowUnit(RANK1, DOCKER_DEFAULT);
        assert.ok(followUnit);
        matchSnapshot("watchdog.unit.vllm-follow-rank1-watch.docker.service", followUnit);
    });

    it("the engine's unit: the gate as ExecCondition= with the defaults, its start timeout, the watchdog it starts", () => {
        assert.deepEqual(execLine(vllmUnit, "ExecCondition"), gateArgv(UNITS.vllm, DEFAULTS, 0.9));
        assert.deepEqual(execLine(vllmUnit, "ExecCondition").slice(4), [UNITS.vllm, gateDir(UNITS.vllm), "5", "300", "6", "120", "0.9"]);
        assert.match(vllmUnit, /^TimeoutStartSec=1320$/m, "900 s and the longest backoff and memory wait");
        assert.match(vllmUnit, /^Restart=always$/m, "a crash of a unit that answered restarts as before");
        assert.match(vllmUnit, /^Wants=spark-cluster-vllm-watchdog\.service$/m);
        assert.doesNotMatch(
            renderVllmUnit(RANK1, DOCKER_DEFAULT, "h"),
            /^Wants=spark-cluster-vllm-watchdog/m,
            "a headless rank has no API to watch: its follower watches it",
        );
        assert.equal(
            execLine(renderVllmUnit({ ...HEAD, unifiedMemory: false }, DOCKER_DEFAULT, "h"), "ExecCondition").at(-1),
            "0",
            "no memory check off unified memory",
        );
    });

    it("the scripts read back as systemd passes them, and pass bash -n", () => {
        assert.deepEqual(execLine(watchdogUnit, "ExecStart"), watchdogArgv(UNITS.vllm, "http://127.0.0.1:8000/health", DEFAULTS, gateDir(UNITS.vllm)));
        assert.match(watchdogUnit, /^PartOf=spark-cluster-vllm\.service$/m);
        for (const argv of [
            execLine(watchdogUnit, "ExecStart"),
            execLine(vllmUnit, "ExecCondition"),
            execLine(renderVllmFollowUnit(RANK1, DOCKER_DEFAULT)!, "ExecStart"),
        ]) {
            const check = bashCheck(argv[2]);
            assert.equal(check.status, 0, check.stderr);
            assert.equal(check.stderr, "");
        }
        assert.deepEqual(execLine(renderVllmFollowUnit(RANK1, DOCKER_DEFAULT)!, "ExecStart").slice(-2), ["30", gateDir(UNITS.vllm)]);
        assert.match(
            execLine(renderVllmFollowUnit(RANK1, DOCKER_DEFAULT)!, "ExecStart")[2],
            /engine_pid\(\) \{ docker inspect --format '\{\{\.State\.Pid\}\}' spark-cluster-vllm/,
        );
        assert.match(
            execLine(renderVllmFollowUnit(RANK1, VENV)!, "ExecStart")[2],
            /engine_pid\(\) \{ systemctl show -p MainPID --value spark-cluster-vllm\.service/,
        );
    });

    it("the unit step installs the watchdog after the unit, clears the gate before a (re)start, and removes both", () => {
        for (const [plan, unit, watchdog] of [
            [vllmPlan(HEAD, DOCKER_DEFAULT), UNITS.vllm, UNITS.vllmWatchdog],
            [sglangPlan({ ...HEAD }, DOCKER_DEFAULT), UNITS.sglang, UNITS.sglangWatchdog],
        ] as const) {
            const create = plan.unitStep.create(plan.unit("h", []));
            const clear = create.indexOf(`rm -rf ${gateDir(unit)}`);
            assert.ok(clear > 0 && clear < create.indexOf(`systemctl restart ${unit}.service`), `${unit}: the gate is cleared before the restart`);
            assert.ok(
                create.indexOf(`systemctl enable --quiet ${watchdog}.service`) > create.indexOf(`systemctl restart ${unit}.service`),
                `${unit}: its watchdog after it`,
            );
            assert.ok(plan.unitStep.read(plan.unit("h", [])).includes(`sc_unit_drift ${watchdog} active`), `${unit}: the read-back checks its watchdog`);
            const remove = plan.unitStep.delete;
            assert.ok(
                remove.indexOf(`disable --now ${watchdog}.service`) < remove.indexOf(`disable --now ${unit}.service`),
                `${unit}: its watchdog goes first`,
            );
            assert.ok(remove.includes(`rm -rf ${gateDir(unit)}`), `${unit}: the gate's state goes`);
        }
        assert.equal(rayGcsHealthUrl({ dashboardHost: "0.0.0.0", dashboardPort: 8265 }), "http://127.0.0.1:8265/api/gcs_healthz");
    });
});

// ---------------------------------------------------------------------------------------------
// The scripts run: stand-ins on PATH, short bounds
// ---------------------------------------------------------------------------------------------

function scratch(prefix: string): { dir: string; stub(name: string, body: string): void; done(): void } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    return {
        dir,
        stub: (name, body) => fs.writeFileSync(path.join(dir, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 }),
        done: () => fs.rmSync(dir, { recursive: true, force: true }),
    };
}

describe("the gate, run: backoff, memory wait, stop, new series", () => {
    /** Runs the gate `starts` times as systemd would before each start; `answered`: the starts (1-based) that answered. */
    function gate(config: WatchdogConfig, share: number, starts: number, answered: number[] = []) {
        const s = scratch("gate-");
        try {
            s.stub("sleep", `echo "$1" >> ${s.dir}/slept`);
            s.stub(
                "journalctl",
                `echo "gate: backing off"; echo "ERROR: model lab/tiny-chat not found in the cache"; echo "Main process exited, code=exited, status=1/FAILURE"`,
            );
            const argv = gateArgv(UNITS.vllm, config, share);
            argv[5] = path.join(s.dir, "gate");
            const codes: number[] = [];
            let output = "";
            for (let n = 1; n <= starts; n++) {
                const run = spawnSync(argv[0], argv.slice(1), {
                    encoding: "utf8",
                    timeout: 20_000,
                    env: { ...process.env, PATH: `${s.dir}:${process.env.PATH}` },
                });
                codes.push(run.status ?? -1);
                output += run.stdout + run.stderr;
                if (answered.includes(n)) fs.writeFileSync(path.join(s.dir, "gate", "answered"), "id\n");
            }
            const read = (f: string) => (fs.existsSync(path.join(s.dir, f)) ? fs.readFileSync(path.join(s.dir, f), "utf8") : "");
            return { codes, output, slept: read("slept").trim().split("\n").filter(Boolean).map(Number), stopped: read("gate/stopped") };
        } finally {
            s.done();
        }
    }

    it("the defaults: backoff 5, 10, 20, 40, 80 s before starts 2-6, then the 7th is refused with the cause", () => {
        const r = gate(DEFAULTS, 0, 8);
        assert.deepEqual(r.codes, [0, 0, 0, 0, 0, 0, 1, 0], "six starts, the stop, then (started again by hand or up) a new series");
        assert.deepEqual(r.slept, [5, 10, 20, 40, 80]);
        assert.match(r.output, /gate: 5 start\(s\) of spark-cluster-vllm in a row never answered: start 6 of at most 6 after a backoff of 80 s/);
        assert.match(r.output, /was stopped by this gate and is started again: a new series of at most 6 starts/);
    });

    it("the backoff stops at its ceiling; the stop writes how many and the journal's last lines (its own lines left out)", () => {
        const r = gate({ ...DEFAULTS, backoffSeconds: 100, maxBackoffSeconds: 300, maxFailedStarts: 5 }, 0, 6);
        assert.deepEqual(r.slept, [100, 200, 300, 300]);
        assert.match(
            r.stopped,
            /^spark-cluster-vllm was stopped by its restart gate at \S+: 5 starts in a row never answered \(restarts\.maxFailedStarts: 5\)\n/,
        );
        assert.match(r.stopped, /ERROR: model lab\/tiny-chat not found in the cache\nMain process exited/);
        assert.doesNotMatch(r.stopped, /gate: backing off/);
    });

    it("a start after one that answered is a first start again: a crash of a unit that answered restarts at once", () => {
        const r = gate(DEFAULTS, 0, 6, [2, 4]);
        assert.deepEqual(r.codes, [0, 0, 0, 0, 0, 0]);
        // 1 fails, 2 answers; 3 (after an answer) at once, fails; 4 backs off 5 s, answers; 5 at once; 6 backs off 5 s.
        assert.deepEqual(r.slept, [5, 5, 5]);
    });

    it("memory: after a failed start it waits (bounded) for MemAvailable and says so; before a first start it only says so", () => {
        const never = gate({ ...DEFAULTS, memoryWaitSeconds: 12 }, 5, 2);
        assert.deepEqual(never.codes, [0, 0]);
        assert.deepEqual(never.slept, [5, 5, 5, 5], "the backoff, then the memory wait in 5 s steps up to 12 s");
        assert.match(
            never.output,
            /gate: MemAvailable \d+ MiB is below the \d+ MiB spark-cluster-vllm asks for \(5 of MemTotal\): starting it anyway, its own check decides\n/,
        );
        assert.match(never.output, /below the \d+ MiB spark-cluster-vllm asks for \(5 of MemTotal\): waiting at most 12 s/);
        assert.match(never.output, /after 15 s: starting it anyway/);
        const plenty = gate(DEFAULTS, 0.0001, 2);
        assert.deepEqual(plenty.slept, [5]);
        assert.doesNotMatch(plenty.output, /MemAvailable/);
    });
});

// Its cases wait on real time (seconds each), so they run at once.
describe("the watchdog, run: a real HTTP server on loopback, a fake systemctl", { concurrency: true }, () => {
    /** A free TCP port on loopback. */
    async function freePort(): Promise<number> {
        return new Promise((resolve) => {
            const server = net.createServer().listen(0, "127.0.0.1", () => {
                const port = (server.address() as net.AddressInfo).port;
                server.close(() => resolve(port));
            });
        });
    }

    /**
     * Runs the watchdog against `python3 -m http.server` serving a directory (`/health` answers 200
     * once the file exists, 404 before), for at most `seconds`; `during` acts on the server while it
     * runs. Returns what `systemctl restart` was called with, the watchdog's output and whether it
     * marked the start answered. The fake systemctl reports the unit active, started now.
     */
    async function watch(opts: {
        start: number;
        quiet: number;
        seconds: number;
        unanswered?: "restart" | "wait";
        during: (server: ChildProcess, web: string) => Promise<void>;
    }) {
        const s = scratch("watchdog-");
        const web = path.join(s.dir, "web");
        fs.mkdirSync(web);
        const port = await freePort();
        const server = spawn("python3", ["-m", "http.server", "--bind", "127.0.0.1", String(port)], { cwd: web, stdio: "ignore" });
        const enterUs = Math.round(Number(fs.readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 1_000_000);
        // `systemctl restart` ends the run (as PartOf would restart the watchdog).
        s.stub(
            "systemctl",
            `if [ "$1" = show ]; then printf 'ActiveState=active\\nInvocationID=abc123\\nActiveEnterTimestampMonotonic=${enterUs}\\nMainPID=4242\\n'; ` +
                `else echo "$*" >> ${s.dir}/restarts; kill $PPID; fi`,
        );
        const argv = watchdogArgv(
            UNITS.vllm,
            `http://127.0.0.1:${port}/health`,
            { startSeconds: opts.start, unresponsiveSeconds: opts.quiet },
            path.join(s.dir, "gate"),
            opts.unanswered,
        );
        const loop = spawn(argv[0], argv.slice(1), { env: { ...process.env, PATH: `${s.dir}:${process.env.PATH}` } });
        let output = "";
        loop.stdout.on("data", (d) => (output += String(d)));
        const ended = new Promise<void>((resolve) => loop.on("exit", () => resolve()));
        const limit = setTimeout(() => loop.kill(), opts.seconds * 1000);
        try {
            await Promise.race([opts.during(server, web), ended]);
            await ended;
            const read = (f: string) => (fs.existsSync(path.join(s.dir, f)) ? fs.readFileSync(path.join(s.dir, f), "utf8").trim() : "");
            return { restarts: read("restarts"), output, answered: read("gate/answered") };
        } finally {
            clearTimeout(limit);
            server.kill("SIGCONT");
            server.kill("SIGKILL");
            loop.kill("SIGKILL");
            s.done();
        }
    }

    const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    /** Acts no more (a pending promise holds no timer: the file ends when its tests do). */
    const idle = () => new Promise<void>(() => undefined);

    it("frozen (SIGSTOP) after it answered: restarted once the last answer is older than the bound, the reason said", async () => {
        const r = await watch({
            start: 600,
            quiet: 5,
            seconds: 40,
            during: async (server, web) => {
                fs.writeFileSync(path.join(web, "health"), "ok");
                await sleep(3000);
                server.kill("SIGSTOP");
            },
        });
        assert.equal(r.restarts, "restart --no-block spark-cluster-vllm.service");
        assert.equal(r.answered, "abc123", "the start was marked answered for the gate");
        assert.match(r.output, /watchdog: spark-cluster-vllm answered at http:\/\/127\.0\.0\.1:\d+\/health/);
        assert.match(r.output, /watchdog: http:\/\/127\.0\.0\.1:\d+\/health did not answer for 5 s: restarting spark-cluster-vllm/);
    });

    it("never answering: restarted when the start seconds are over", async () => {
        const r = await watch({ start: 3, quiet: 5, seconds: 30, during: idle });
        assert.equal(r.restarts, "restart --no-block spark-cluster-vllm.service");
        assert.match(r.output, /has not answered in the 3 s since spark-cluster-vllm started: restarting/);
        assert.equal(r.answered, "");
    });

    it("a slow first load that answers within the start seconds is not restarted; Ray's head (wait) is never judged before it answered", async () => {
        const [load, ray] = await Promise.all([
            watch({
                start: 30,
                quiet: 5,
                seconds: 10,
                during: async (_server, web) => {
                    await sleep(4000);
                    fs.writeFileSync(path.join(web, "health"), "ok");
                    await idle();
                },
            }),
            watch({ start: 2, quiet: 5, seconds: 9, unanswered: "wait", during: idle }),
        ]);
        assert.equal(load.restarts, "");
        assert.equal(load.answered, "abc123");
        assert.equal(ray.restarts, "");
    });
});

describe("a headless rank's follower as its watchdog, run: fake systemctl, ss and sleep; a real stopped process", () => {
    /**
     * `checks` iterations of the follower (each counts 2 s), the rank always in the head's engine,
     * its engine process the PID `pid` (a real process the test stops or not). Returns the
     * restarts, the output and what the gate's directory got.
     */
    function follow(pid: number, checks: number, frozenSeconds: number, connected = true) {
        const s = scratch("follow-watch-");
        try {
            s.stub("sleep", `n=$(( $(cat ${s.dir}/n 2>/dev/null || echo 0) + 1 )); echo $n > ${s.dir}/n; [ "$n" -le ${checks} ]`);
            s.stub("ss", connected ? `echo "ESTAB 0 0 10.0.0.2:40000 $5:$8"` : "true");
            s.stub("timeout", connected ? "true" : "false");
            s.stub("date", `echo $(( 1000 + 2 * $(cat ${s.dir}/n 2>/dev/null || echo 0) ))`);
            s.stub("systemctl", `if [ "$1" = show ]; then echo 100; else echo "$* at $(cat ${s.dir}/n)" >> ${s.dir}/restarts; fi`);
            const argv = renderVllmFollowArgv(pid, frozenSeconds, path.join(s.dir, "gate"), 4);
            const run = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", timeout: 20_000, env: { ...process.env, PATH: `${s.dir}:${process.env.PATH}` } });
            assert.equal(run.error, undefined);
            const read = (f: string) => (fs.existsSync(path.join(s.dir, f)) ? fs.readFileSync(path.join(s.dir, f), "utf8").trim() : "");
            return { restarts: read("restarts"), output: run.stdout, answered: read("gate/answered") };
        } finally {
            s.done();
        }
    }

    /** The follower's argv of RANK1 with its watch pointed at `pid` and the gate at `dir`. */
    function renderVllmFollowArgv(pid: number, frozenSeconds: number, dir: string, grace: number): string[] {
        const argv = execLine(renderVllmFollowUnit({ ...RANK1, watchdog: { ...DEFAULTS, unresponsiveSeconds: frozenSeconds } }, VENV)!, "ExecStart");
        argv[2] = argv[2].replace(/engine_pid\(\) \{ [^}]*\}/, `engine_pid() { echo ${pid}; }`);
        return [...argv.slice(0, -3), String(grace), String(frozenSeconds), dir];
    }

    it("a rank whose engine process is stopped for the bound is restarted, the reason said; a running one is not", () => {
        const proc = spawn("sleep", ["60"]);
        try {
            const running = follow(proc.pid!, 8, 6);
            assert.equal(running.restarts, "");
            assert.equal(running.answered, "joined", "a rank in the head's engine counts as answered");
            proc.kill("SIGSTOP");
            spawnSync("sleep", ["0.2"]);
            // The fake systemctl keeps the MainPID: the stopped process is seen again, and restarted again 6 s later.
            const stopped = follow(proc.pid!, 8, 6);
            assert.equal(stopped.restarts, "restart --no-block spark-cluster-vllm.service at 3\nrestart --no-block spark-cluster-vllm.service at 6");
            assert.match(
                stopped.output,
                new RegExp(`watchdog: the engine process ${proc.pid} of spark-cluster-vllm has been stopped \\(state T\\) for 6 s: restarting`),
            );
        } finally {
            proc.kill("SIGKILL");
        }
    });

    it("a rank it restarts because no head's engine is there is no failed start for the gate", () => {
        const r = follow(process.pid, 5, 6, false);
        assert.equal(r.restarts, "restart --no-block spark-cluster-vllm.service at 5", "after the grace (4 s) and three checks");
        assert.equal(r.answered, "head-gone");
    });
});

describe("a headless rank's unit step, run: its head restarts it, not the step (stubbed host functions, a fake systemctl)", () => {
    /**
     * Runs PLAN's unit step with the host library's file and wait functions stubbed (the file
     * "changed" or "unchanged") and a fake systemctl whose unit is active or not; returns the
     * systemctl calls that (re)start it and the step's output.
     */
    function unitStep(plan: ReturnType<typeof vllmPlan>, installed: "changed" | "unchanged", active: boolean) {
        return runStep(plan.unitStep.create(plan.unit("h", [])), installed, active);
    }

    /** The same for PLAN's secrets step (the file comes on stdin). */
    function secretsStep(plan: ReturnType<typeof vllmPlan>, installed: "changed" | "unchanged", active: boolean) {
        return runStep(plan.secrets.create, installed, active);
    }

    function runStep(stepScript: string, installed: "changed" | "unchanged", active: boolean) {
        const s = scratch("unit-step-");
        try {
            if (active) fs.writeFileSync(path.join(s.dir, "active"), "");
            s.stub(
                "systemctl",
                [
                    `case "$1" in`,
                    `  is-active) [ -e ${s.dir}/active ] ;;`,
                    `  restart) echo "$*" >> ${s.dir}/calls; touch ${s.dir}/active ;;`,
                    `  show) echo 4242 ;;`,
                    `esac`,
                ].join("\n"),
            );
            const script = stepScript.replace(
                HOST_LIB,
                [
                    `sc_install_file() { cat > /dev/null; echo "${installed} $1"; }`,
                    `sc_log() { echo "log: $*"; }`,
                    `sc_wait() { shift 2; "$@"; }`,
                    `sc_remove_file() { :; }`,
                    `sc_cleanup_state() { :; }`,
                ].join("\n"),
            );
            assert.ok(!script.includes("sc_install_file() {\n"), "the host library is replaced by the stubs");
            const run = spawnSync("bash", ["-c", script], {
                encoding: "utf8",
                input: "",
                timeout: 20_000,
                env: { ...process.env, PATH: `${s.dir}:${process.env.PATH}` },
            });
            assert.equal(run.status, 0, run.stderr);
            const calls = fs.existsSync(path.join(s.dir, "calls")) ? fs.readFileSync(path.join(s.dir, "calls"), "utf8").trim().split("\n") : [];
            return { restarts: calls.filter((c) => c.startsWith(`restart ${UNITS.vllm}.service`)).length, output: run.stdout };
        } finally {
            s.done();
        }
    }

    it("a running rank 1 whose unit changed is left running for its follower; a stopped one is started; rank 0 restarts at once", () => {
        const rank1 = vllmPlan(RANK1, VENV);
        const changed = unitStep(rank1, "changed", true);
        assert.equal(changed.restarts, 0, "the step leaves the running rank to its follower");
        assert.match(changed.output, /spark-cluster-vllm changed: it restarts, from the new file, when its head's engine restarts next/);
        assert.equal(unitStep(rank1, "changed", false).restarts, 1, "a rank that is not running starts from its new file");
        assert.equal(unitStep(rank1, "unchanged", false).restarts, 1, "nor one that stopped");
        assert.equal(unitStep(rank1, "unchanged", true).restarts, 0);
        const head = vllmPlan({ ...RANK1, multiNode: { ...RANK1.multiNode, rank: 0 } }, VENV);
        assert.equal(unitStep(head, "changed", true).restarts, 1, "the head restarts at once: its ranks follow it");
        assert.equal(unitStep(head, "unchanged", true).restarts, 0);
        const sglangRank1 = sglangPlan(RANK1, VENV);
        assert.match(
            sglangRank1.unitStep.create(sglangRank1.unit("h", [])),
            /spark-cluster-sglang changed: it restarts, from the new file, when its head's engine restarts next/,
        );
    });

    it("a running rank 1 whose secrets file changed is left running too (its head's secrets restart the head); rank 0 restarts at once", () => {
        const rank1 = vllmPlan(RANK1, VENV);
        const changed = secretsStep(rank1, "changed", true);
        assert.equal(changed.restarts, 0, "the step leaves the running rank to its follower");
        assert.match(changed.output, /spark-cluster-vllm reads the new \/etc\/spark-cluster\/vllm\.env when its head's engine restarts next/);
        assert.equal(secretsStep(rank1, "unchanged", true).restarts, 0);
        const head = vllmPlan({ ...RANK1, multiNode: { ...RANK1.multiNode, rank: 0 } }, VENV);
        assert.equal(secretsStep(head, "changed", true).restarts, 1, "the head restarts at once for its new key");
        assert.equal(secretsStep(head, "changed", false).restarts, 0, "a head that is not running is left to its unit step");
        assert.equal(secretsStep(head, "unchanged", true).restarts, 0);
        const single = vllmPlan({ ...RANK1, multiNode: undefined }, VENV);
        assert.equal(secretsStep(single, "changed", true).restarts, 1, "a single-node server restarts for its new key");
        const sglangRank1 = sglangPlan(RANK1, VENV);
        assert.match(sglangRank1.secrets.create, /spark-cluster-sglang reads the new \S+ when its head's engine restarts next/);
    });
});

describe("status: a unit the gate stopped", () => {
    it("the node's script reports the cause; the verdict names it and the next step, and the node is unhealthy", () => {
        const config = configWith({ model: { source: "Qwen/Qwen2.5-7B-Instruct", executor: "ray" } });
        const head = statusExpectations(config).find((e) => e.node === "spark-a")!;
        const script = nodeStatusScript(head);
        assert.ok(script.includes(`< ${gateDir(UNITS.vllm)}/stopped | sed 's/^/gate spark-cluster-vllm /'`), "the script reads the gate's cause, scrubbed");
        const report = parseNodeReport(
            [
                "unit spark-cluster-vllm LoadState=loaded",
                "unit spark-cluster-vllm ActiveState=inactive",
                "unit spark-cluster-vllm SubState=dead",
                "gate spark-cluster-vllm spark-cluster-vllm was stopped by its restart gate at 2026-11-28T04:00:00Z: 6 starts in a row never answered (restarts.maxFailedStarts: 6)",
                "gate spark-cluster-vllm ValueError: lab/tiny-chat is not in the cache",
                "gate spark-cluster-vllm Main process exited, code=exited, status=1/FAILURE",
            ].join("\n"),
        );
        const verdict = judgeNode(head, report);
        const problem = verdict.problems.find((p) => p.includes("restart gate"));
        assert.equal(
            problem,
            "spark-a: spark-cluster-vllm was stopped by its restart gate at 2026-11-28T04:00:00Z: 6 starts in a row never answered (restarts.maxFailedStarts: 6). " +
                "Last lines of its journal: ValueError: lab/tiny-chat is not in the cache | Main process exited, code=exited, status=1/FAILURE. " +
                "Next: fix the cause (journalctl -u spark-cluster-vllm.service on spark-a), then run pulumi up --refresh, which starts it again",
        );
        assert.equal(statusExitCode([verdict]), 1);
    });
});
