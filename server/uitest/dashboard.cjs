// Browser test of Sluice's dashboard: Debian's chromium driven by
// playwright-core (never a downloaded browser). The Go harness
// (browser_test.go) starts the servers and runs this script:
//
//   node dashboard.cjs test --url URL --ro-url URL --keyed-url URL --api-only-url URL --out DIR
//     opens the dashboard of a management server with fixture models and
//     checks it: rows, unload and load (by keyboard), a refused slot count
//     with its 400 message, a catalogue registration, the narrow layout,
//     no console errors; then the read-only server shows no buttons; then
//     the servers with keys: the page asks for a key, a wrong one is
//     refused, the API key shows the models with the buttons disabled and
//     a note, the management key's session unloads a model, sign-out
//     returns to the sign-in form.
//
//   node dashboard.cjs screenshot --url URL --out FILE
//     opens the page, prints READY, waits for a line on stdin (the harness
//     has set the scene), saves a 1280x800 screenshot, prints DONE.
//
// playwright-core is found through NODE_PATH (make ui-test sets it).
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const readline = require("readline");
const { chromium } = require("playwright-core");

const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const WAIT = 15000; // ms: bound of every wait for the page (a safety net, not a timing assertion)

function parseArgs(argv) {
  const out = { mode: argv[0] };
  for (let i = 1; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return out;
}

async function launch(viewport) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-ui-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: FLAGS,
    viewport,
    deviceScaleFactor: 1,
    timeout: 60000,
  });
  return {
    ctx,
    async close() {
      await ctx.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

function watchErrors(page, errors, expected) {
  // The refused slot count is a 400 on purpose (and, with keys, the 401 of
  // a signed-out page and a wrong key); Chromium logs every failed fetch.
  const ok = expected || /status of 400 \(Bad Request\)/;
  page.on("console", (m) => {
    if (m.type() === "error" && !ok.test(m.text())) errors.push("console: " + m.text());
  });
  page.on("pageerror", (e) => errors.push("page error: " + e.message));
}

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  console.log("ok   " + what);
}

const row = (page, id) => page.locator(`tr[data-model="${id}"]`);
const stateOf = (page, id) => row(page, id).locator(".badge");

async function expectText(locator, re, what) {
  await locator.filter({ hasText: re }).first().waitFor({ timeout: WAIT });
  console.log("ok   " + what);
}

async function testMode(a) {
  fs.mkdirSync(a.out, { recursive: true });
  const b = await launch({ width: 1280, height: 800 });
  const errors = [];
  try {
    const page = await b.ctx.newPage();
    watchErrors(page, errors);
    await page.goto(a.url);
    await page.locator("#conn.live").waitFor({ timeout: WAIT });
    console.log("ok   the event stream is live");
    for (const [id, state] of [["alpha", "ready"], ["beta", "ready"], ["gamma", "unloaded"]]) {
      await expectText(stateOf(page, id), new RegExp("^" + state + "$"), `row ${id} shows ${state}`);
    }
    check(await page.locator("#model-rows tr").count() === 3, "three model rows");
    check(await page.locator("th", { hasText: "Actions" }).isVisible(), "the actions column is shown with management");
    check(/slots busy/.test(await row(page, "beta").locator(".bar").getAttribute("aria-label")), "the slot bar has a text alternative");

    // Unload by pointer: the state changes through the event stream.
    await row(page, "alpha").getByRole("button", { name: "Unload", exact: true }).click();
    await expectText(stateOf(page, "alpha"), /^unloaded$/, "unload: alpha becomes unloaded");
    await expectText(row(page, "alpha").locator(".msg"), /unload: done/, "unload: the row says done");

    // Load by keyboard: focus the button and press Enter.
    await row(page, "alpha").getByRole("button", { name: "Load", exact: true }).focus();
    await page.keyboard.press("Enter");
    await expectText(stateOf(page, "alpha"), /^ready$/, "load by keyboard: alpha is ready again");

    // An unsupported slot count: the server's 400 message is shown.
    const input = row(page, "beta").getByLabel("Slots", { exact: true });
    await input.fill("8");
    await input.press("Enter");
    const msg = row(page, "beta").locator(".msg.error");
    await msg.waitFor({ timeout: WAIT });
    const text = await msg.textContent();
    check(/^400 /.test(text), "slots=8 on capacity 4 shows the 400 message: " + JSON.stringify(text));
    await expectText(stateOf(page, "beta"), /^ready$/, "beta keeps serving on its old pool");
    check((await row(page, "beta").locator(".bar .cell").count()) === 2, "beta keeps its 2 slots");

    // A supported slot count is applied.
    await input.fill("3");
    await input.press("Enter");
    await expectText(row(page, "beta").locator(".msg.ok"), /done/, "slots=3 is applied");
    await page.waitForFunction(() => document.querySelectorAll('tr[data-model="beta"] .bar .cell').length === 3, null, { timeout: WAIT });
    console.log("ok   beta shows 3 slots");

    // Register a catalogue checkpoint.
    const cp = page.locator(".cp", { hasText: "voice-demo" });
    await cp.getByLabel("Model id", { exact: true }).fill("delta");
    await cp.getByLabel("Slots", { exact: true }).fill("2");
    await cp.getByRole("button", { name: "Register" }).click();
    await expectText(stateOf(page, "delta"), /^ready$/, "a registered checkpoint gets a ready row");
    check((await page.locator("#events li").count()) > 5, "the recent-events list fills");
    await page.screenshot({ path: path.join(a.out, "dashboard-1280x800.png") });

    // Narrow screen: no horizontal scrolling, rows become cards.
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, "no horizontal overflow at 390 px (" + overflow + ")");
    const spill = await page.evaluate(() => {
      let worst = 0;
      for (const tr of document.querySelectorAll("#model-rows tr")) {
        const edge = tr.getBoundingClientRect().right;
        for (const el of tr.querySelectorAll("td *")) worst = Math.max(worst, el.getBoundingClientRect().right - edge);
      }
      return worst;
    });
    check(spill <= 1, "narrow: nothing spills out of a model card (" + spill.toFixed(1) + " px)");
    await page.screenshot({ path: path.join(a.out, "dashboard-390.png"), fullPage: true });
    await page.screenshot({ path: path.join(a.out, "dashboard-390x844.png") });
    check(errors.length === 0, "no console errors" + (errors.length ? ": " + errors.join("; ") : ""));

    // Read-only server: the same rows, no buttons.
    const ro = await b.ctx.newPage();
    watchErrors(ro, errors);
    await ro.goto(a["ro-url"]);
    await expectText(stateOf(ro, "ro-model"), /^ready$/, "read-only: the row is shown");
    check(await ro.locator("button:visible").count() === 0, "read-only: no buttons shown");
    check(!(await ro.locator("th", { hasText: "Actions" }).isVisible()), "read-only: no actions column");
    await ro.screenshot({ path: path.join(a.out, "dashboard-readonly.png") });
    check(errors.length === 0, "no console errors" + (errors.length ? ": " + errors.join("; ") : ""));
    await ro.close();

    await signInMode(b.ctx, a, errors);
  } finally {
    await b.close();
  }
}

// The servers with keys (CONTRACT.md ui.shell, ui.sign-in,
// ui.api-key-only, ui.session-scope, ui.sign-out). Cookies are per host,
// not per port, so each server starts from a cleared jar.
async function signInMode(ctx, a, errors) {
  const expected = /status of (400 \(Bad Request\)|401 \(Unauthorized\))/;
  const signIn = async (page, key) => {
    await page.getByLabel("Key", { exact: true }).fill(key);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
  };

  // --api-key alone: sign in with the API key; management is refused.
  await ctx.clearCookies();
  const p = await ctx.newPage();
  watchErrors(p, errors, expected);
  await p.goto(a["api-only-url"]);
  await p.locator("#signin").waitFor({ timeout: WAIT });
  console.log("ok   api-key server: / shows the sign-in form");
  check(await p.locator("#main").isHidden(), "api-key server: no models before sign-in");
  await p.screenshot({ path: path.join(a.out, "dashboard-sign-in.png") });
  await signIn(p, "not-the-key");
  await expectText(p.locator("#signin-msg.error"), /^401 wrong key$/, "a wrong key is refused with 401");
  await signIn(p, "k-api");
  await expectText(stateOf(p, "lambda"), /^ready$/, "signed in with the API key: the model is shown");
  await p.locator("#conn.live").waitFor({ timeout: WAIT });
  console.log("ok   the event stream is live with the session cookie");
  const unload = row(p, "lambda").getByRole("button", { name: "Unload", exact: true });
  check(await unload.isVisible() && await unload.isDisabled(), "api-key session: the buttons are shown disabled");
  await expectText(p.locator("#mgmt-note"), /management needs --management-key when --api-key is set/, "the note says why");
  await expectText(p.locator("#auth-text"), /signed in with the API key/, "the header says which key");
  await p.screenshot({ path: path.join(a.out, "dashboard-api-key.png") });
  await p.close();

  // --api-key and --management-key: the management key's session manages.
  await ctx.clearCookies();
  const q = await ctx.newPage();
  watchErrors(q, errors, expected);
  await q.goto(a["keyed-url"]);
  await q.locator("#signin").waitFor({ timeout: WAIT });
  await signIn(q, "k-mgmt");
  await expectText(stateOf(q, "kappa"), /^ready$/, "signed in with the management key: the model is shown");
  await q.locator("#conn.live").waitFor({ timeout: WAIT });
  check(await q.locator("#mgmt-note").isHidden(), "management session: no note");
  await row(q, "kappa").getByRole("button", { name: "Unload", exact: true }).click();
  await expectText(stateOf(q, "kappa"), /^unloaded$/, "management session: unload works, kappa becomes unloaded");
  await expectText(row(q, "kappa").locator(".msg"), /unload: done/, "management session: the row says done");
  // The session ends behind the page's back: its next action is 401 and
  // the page asks for the key again.
  const st = await q.evaluate(async () => (await fetch("/v1/ui/session", { method: "DELETE", headers: { "X-Sluice-UI": "1" } })).status);
  check(st === 200, "the session is deleted on the server");
  await row(q, "kappa").getByRole("button", { name: "Load", exact: true }).click();
  await expectText(q.locator("#signin-hint"), /session has ended/, "an ended session brings the sign-in form back");
  await signIn(q, "k-mgmt");
  await expectText(stateOf(q, "kappa"), /^unloaded$/, "signed in again: kappa is still unloaded");
  await q.getByRole("button", { name: "Sign out", exact: true }).click();
  await q.locator("#signin").waitFor({ timeout: WAIT });
  console.log("ok   sign-out returns to the sign-in form");
  check((await ctx.cookies()).every((c) => c.name !== "sluice_session"), "sign-out cleared the session cookie");
  await q.close();
  check(errors.length === 0, "no console errors" + (errors.length ? ": " + errors.join("; ") : ""));
}

async function screenshotMode(a) {
  const b = await launch({ width: 1280, height: 800 });
  const errors = [];
  try {
    const page = await b.ctx.newPage();
    watchErrors(page, errors);
    await page.goto(a.url);
    await page.locator("#conn.live").waitFor({ timeout: WAIT });
    console.log("READY");
    const rl = readline.createInterface({ input: process.stdin });
    const it = rl[Symbol.asyncIterator]();
    await it.next(); // the harness has set the scene
    rl.close();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: a.out, animations: "disabled" });
    if (errors.length) throw new Error(errors.join("; "));
    console.log("DONE");
  } finally {
    await b.close();
  }
}

const args = parseArgs(process.argv.slice(2));
const run = args.mode === "screenshot" ? screenshotMode : testMode;
run(args).then(() => process.exit(0), (e) => {
  console.error("FAIL " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
