// Drives Open WebUI 0.12.4's page in a real headless Chromium (Debian's, scripts/chromium.sh)
// through puppeteer-core, as a person would: sign in, pick the model, send a message, read the
// answer off the page. Selectors are the page's own ids and ARIA labels (#email, #password,
// #model-selector-model-button, the option "Select MODEL model", #chat-input), checked against the
// real page of 0.12.4.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";

/** Debian's chromium, installed (and its .debs cached) by scripts/chromium.sh when missing. */
export function chromiumPath(repoRoot: string): string {
    return execFileSync(path.join(repoRoot, "scripts", "chromium.sh"), { encoding: "utf8", timeout: 15 * 60_000, stdio: ["ignore", "pipe", "inherit"] }).trim();
}

export interface ChatThroughPage {
    /** The assistant's answer as the page shows it. */
    answer: string;
    /** The page's HTML after the answer (document.documentElement.outerHTML). */
    html: string;
    /** Seconds from sending the message to the answer on the page. */
    answerSeconds: number;
}

/** One visit: sign in as `email`, pick `model` in the model selector, send `message`, wait for an answer containing every text of `expect`. */
export async function chatThroughPage(opts: {
    browserPath: string;
    baseUrl: string;
    email: string;
    password: string;
    model: string;
    message: string;
    /** Texts the answer must contain, all of them: the answer streams in, so its last words too (a page read mid-stream has only its first). */
    expect: string[];
    screenshot: string;
    timeoutMs?: number;
}): Promise<ChatThroughPage> {
    const timeout = opts.timeoutMs ?? 120_000;
    const browser: Browser = await puppeteer.launch({
        executablePath: opts.browserPath,
        headless: true,
        // The test runs as root: Chromium's sandbox refuses root without --no-sandbox.
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        timeout: 60_000,
    });
    let page: Page | undefined;
    try {
        page = await browser.newPage();
        await page.setViewport({ width: 1280, height: 900 });
        page.setDefaultTimeout(timeout);
        await page.goto(`${opts.baseUrl}/auth`, { waitUntil: "networkidle2" });
        await page.type("#email", opts.email);
        await page.type("#password", opts.password);
        await page.click("button[type=submit]");
        await page.waitForSelector("#chat-input");
        // The release notes dialog of a first sign-in covers the page.
        const notes = await page.waitForSelector(`xpath///button[normalize-space()="Okay, Let's Go!"]`, { timeout: 5_000 }).catch(() => null);
        if (notes) await notes.click();
        // A click on the model selector before the page's scripts have taken over the button is
        // lost (seen once in CI: the menu never opened); a click that did open it and a second one
        // would close it, so each click waits a while for the option before the next (bounded).
        const optionSelector = `button[role=option][aria-label=${JSON.stringify(`Select ${opts.model} model`)}]`;
        let option = null;
        for (let click = 1; click <= 5 && !option; click++) {
            await page.click("#model-selector-model-button");
            option = await page.waitForSelector(optionSelector, { timeout: Math.min(timeout, 15_000) }).catch(() => null);
        }
        if (!option) throw new Error(`the model selector did not list ${opts.model} after 5 clicks`);
        await option.click();
        await page.waitForSelector(`#model-selector-model-button[aria-label=${JSON.stringify(`Selected model: ${opts.model}`)}]`);
        await page.click("#chat-input");
        await page.keyboard.type(opts.message);
        const sent = Date.now();
        await page.keyboard.press("Enter");
        // Page-side code as text: this project compiles without the DOM's types.
        const answer = await page.waitForFunction(
            `[...document.querySelectorAll("#response-content-container, .chat-assistant")].map((e) => e.innerText).find((t) => ${JSON.stringify(opts.expect)}.every((x) => t.includes(x))) ?? false`,
            { polling: 500 },
        );
        const answerSeconds = Math.round((Date.now() - sent) / 100) / 10;
        const text = String(await answer.jsonValue());
        await page.screenshot({ path: opts.screenshot, fullPage: true });
        const html = String(await page.evaluate("document.documentElement.outerHTML"));
        return { answer: text, html, answerSeconds };
    } catch (err) {
        // The page as it was when it failed, for the report.
        await page?.screenshot({ path: opts.screenshot, fullPage: true }).catch(() => undefined);
        throw err;
    } finally {
        await browser.close();
    }
}
