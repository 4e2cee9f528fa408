// A restart storm with the product's default restart settings (issue 36's acceptance, worded for
// ten minutes): on the lab's Spark pair (lab/lab.sh up first), the dev stack as committed (docker
// runtime, Ray executor, no `restarts` key: backoff 5 s doubling to 300 s, 6 starts that never
// answered, a memory wait of 120 s) is converged; the model's files are then taken from the head
// for MINUTES (default 10) and the engine ended, as a crash would end it. Every 5 s the unit's state
// is read; at the end its starts are counted from the journal, `npm run status` is run, the files go
// back, `up --refresh` runs and the time until a chat answers is taken; then destroy.
// Prints figures and exits 0 whatever they are (the suite's failures.test (b) asserts the gate, with
// a 1-4 s backoff to stay short):
//   node build/bench/restartStorm.js [MINUTES]
import { HF_HUB_DIR, UNITS } from "../config/hostPaths";
import { hubRepoDirName } from "../components/render/modelSync";
import { gateStoppedFile } from "../components/render/watchdog";
import { sleep } from "../test/lab/lab-harness";
import { apiKeyOf, chat, newSession, pulumi, pulumiWithConfig, removeSession, secondsUntilAnswering, ssh } from "../test/integration/stackSession";
import { npmRun } from "../test/integration/operationsOnPair";

const MODEL = "tiny-chat";
const HEAD = "spark-a";

function unitProperty(property: string): string {
    return ssh(HEAD, `systemctl show -p ${property} --value ${UNITS.vllm}.service`).trim();
}

async function main(): Promise<void> {
    const minutes = Number(process.argv[2] ?? "10");
    if (!(minutes > 0 && minutes <= 60)) throw new Error(`MINUTES: a number of minutes from 1 to 60, not ${process.argv[2]}`);
    const session = newSession();
    try {
        const upStart = Date.now();
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        const endpoint = pulumi(session, "stack", "output", "endpoint").trim();
        const apiKey = apiKeyOf(session);
        await chat(endpoint, apiKey, MODEL);
        console.log(`up and a chat: ${Math.round((Date.now() - upStart) / 1000)} s`);
        const model = `${HF_HUB_DIR}/${hubRepoDirName("lab/tiny-chat")}`;
        const since = ssh(HEAD, "date '+%Y-%m-%d %H:%M:%S'").trim();
        ssh(HEAD, `mv ${model} ${model}.aside`);
        let stoppedAt = -1;
        const states: string[] = [];
        try {
            const pid = ssh(HEAD, `ss -Htlnp 'sport = :8000' | sed -n 's/.*pid=\\([0-9]*\\).*/\\1/p' | head -n 1`).trim();
            if (pid === "") throw new Error("nothing listens on the head's API port");
            ssh(HEAD, `kill -9 ${pid}`);
            const began = Date.now();
            console.log(`the model's files taken from ${HEAD} and the engine ended (pid ${pid}); watching for ${minutes} min`);
            for (let i = 0; i < Math.ceil((minutes * 60) / 5); i++) {
                await sleep(5000);
                const t = Math.round((Date.now() - began) / 1000);
                const state = `${unitProperty("ActiveState")}/${unitProperty("SubState")}`;
                if (states.length === 0 || !states[states.length - 1].endsWith(` ${state}`)) states.push(`${t} s ${state}`);
                if (stoppedAt < 0 && ssh(HEAD, `test -e ${gateStoppedFile(UNITS.vllm)} && echo yes || true`).trim() === "yes") stoppedAt = t;
            }
        } finally {
            ssh(HEAD, `test -e ${model} || mv ${model}.aside ${model}`);
        }
        const journal = ssh(HEAD, `journalctl -u ${UNITS.vllm}.service --since '${since}' --no-pager -o cat`);
        const starts = journal.split("\n").filter((l) => /^Started /.test(l)).length;
        const gateLines = journal.split("\n").filter((l) => l.startsWith("gate: ") && l.includes("after a backoff"));
        console.log(
            `in ${minutes} min: ${starts} starts of ${UNITS.vllm}; the gate stopped it ${stoppedAt < 0 ? "never" : `${stoppedAt} s after the engine ended`}`,
        );
        console.log(`the unit's states (first seen): ${states.join("; ")}`);
        console.log(`the gate's backoffs:\n  ${gateLines.join("\n  ")}`);
        const status = npmRun(session, "status");
        const named = `${status.stdout}\n${status.stderr}`.split("\n").filter((l) => /restart gate|Next:/.test(l));
        console.log(`npm run status: exit ${status.status}\n  ${named.join("\n  ")}`);
        const back = Date.now();
        pulumiWithConfig(session, "up", "--refresh", "--yes", "--skip-preview");
        const { seconds } = await secondsUntilAnswering(endpoint, apiKey, MODEL, 300);
        console.log(`files back: up --refresh and a chat in ${Math.round((Date.now() - back) / 1000)} s (the chat ${seconds} s after up)`);
    } finally {
        removeSession(session);
    }
}

main().catch((err: Error) => {
    console.error(err.message);
    process.exit(1);
});
