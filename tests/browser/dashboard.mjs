// The dashboard used in a real, headless Chromium (Debian's, driven by playwright-core) as a
// new operator would: sign in with the first start's link, make keys (each shown once, a
// reload making no second) and use them, revoke,
// scopes, the key limit, CSRF, the wallets and transactions pages, approving a held write,
// phone width, sign-out and the failed sign-in throttle. A screenshot of each page goes to OUT.
//
// Run by the Rust test `e2e::dashboard::browser`, which starts the service and passes:
//   BASE     the REST edge, http://127.0.0.1:<port>
//   LINK     the sign-in link the first start printed
//   EXPIRED  the prefix of a key whose expiry the test moved into the past
//   WALLET   the owner's default EVM wallet
//   TX       the id of a transaction the test sent
//   HELD     the id of a write the test had held for approval
//   DEPOSIT  the hash of a transaction that sent the wallet money from outside
//   OUT      where screenshots go
// Exits non-zero, saying what failed, at the first broken expectation.

import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";

const { BASE, LINK, EXPIRED, WALLET, TX, HELD, DEPOSIT, OUT } = process.env;
for (const [name, value] of Object.entries({ BASE, LINK, EXPIRED, WALLET, TX, HELD, DEPOSIT, OUT })) {
  assert.ok(value, `${name} is not set`);
}
mkdirSync(OUT, { recursive: true });
const PASSWORD = "a long dashboard password";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});

async function shot(page, name) {
  await page.screenshot({ path: `${OUT}/${name}.png`, fullPage: true });
}

// Every visible field has a label, so a screen reader can name it.
async function assertLabelled(page) {
  const unlabelled = await page.$$eval("input:not([type=hidden]), select", (els) =>
    els.filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).map((e) => e.outerHTML),
  );
  assert.deepEqual(unlabelled, [], `unlabelled fields on ${page.url()}`);
}

async function api(path, key, init = {}) {
  const response = await fetch(`${BASE}/api/v1${path}`, {
    ...init,
    headers: { "x-api-key": key, "content-type": "application/json", ...(init.headers ?? {}) },
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}

function row(page, name) {
  return page.locator("#keys tbody tr", { has: page.locator("td:first-child", { hasText: new RegExp(`^${name}$`) }) });
}

async function generate(page, name, { expiration = "never", scopes = ["read", "trade", "write"] } = {}) {
  await page.goto(`${BASE}/dashboard/keys`);
  await page.fill("#name", name);
  await page.selectOption("#expiration", expiration);
  for (const scope of ["read", "trade", "write"]) {
    await page.setChecked(`input[name=scopes][value=${scope}]`, scopes.includes(scope));
  }
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url() === `${BASE}/dashboard/keys` && r.request().method() === "POST"),
    page.click("button:has-text('Generate API Key')"),
  ]);
  // Made, the form answers 303 and the browser GETs the keys page; refused, it is the page.
  await page.waitForLoadState();
  return response.status();
}

async function createdValue(page) {
  return page.inputValue("#new-key");
}

try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();

  // Not signed in: the dashboard sends the visitor to sign in.
  await page.goto(`${BASE}/dashboard/keys`);
  assert.match(page.url(), /\/dashboard\/sign-in/);
  await assertLabelled(page);
  await shot(page, "sign-in");

  // A wrong password is refused (the owner has none yet: the same answer).
  await page.fill("#user_name", "owner");
  await page.fill("#password", "not the password at all");
  const [refused] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click("button[type=submit]")]);
  assert.equal(refused.status(), 401);
  assert.match(await page.textContent("#sign-in-error"), /wrong user name or password/);

  // The first start's link sets the password and signs in.
  await page.goto(LINK);
  await assertLabelled(page);
  await shot(page, "set-password");
  await page.fill("#password", PASSWORD);
  await page.fill("#confirm", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL(`${BASE}/dashboard/keys`);

  // The session cookie's flags.
  const session = (await context.cookies()).find((c) => c.name === "walletops_session");
  assert.ok(session, "no session cookie");
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, "Strict");
  assert.equal(session.secure, false, "plain http on loopback");
  assert.equal(session.path, "/dashboard");

  // Generate a key: the form answers 303, so the page shown is a GET; its value is shown
  // once, and works against the REST API.
  assert.equal(await generate(page, "ci bot"), 303);
  assert.equal(page.url(), `${BASE}/dashboard/keys`, "the value is not in the URL");
  const ciKey = await createdValue(page);
  assert.match(ciKey, /^wops_[A-Za-z0-9]{4}_[A-Za-z0-9]{32}$/);
  assert.match(await page.textContent(".created"), /will not be shown again/);
  assert.ok(await page.isVisible("button.copy[data-copy=new-key]"));
  await assertLabelled(page);
  await shot(page, "keys-created");
  assert.equal((await api("/wallets", ciKey)).status, 200);
  assert.ok(!(await context.cookies()).some((c) => c.name === "walletops_flash"), "the flash went with its page");
  // Reloading shows the value no more and makes no second key.
  await page.reload();
  assert.equal(await page.locator("#new-key").count(), 0, "the value is shown only once");
  assert.equal(await row(page, "ci bot").count(), 1, "exactly one new key");
  assert.ok(!(await page.content()).includes(ciKey), "the value is gone from the page");
  assert.match(await row(page, "ci bot").textContent(), /Active/);
  assert.match(await row(page, "ci bot").textContent(), /read, trade, write/);
  assert.match(await page.locator(`#keys tr[data-prefix="${EXPIRED}"]`).textContent(), /Expired/);
  // Spend limits, with what is left of a budget.
  assert.match(await row(page, "ci bot").locator("td.limits").textContent(), /none/);
  assert.match(
    await page.locator(`#keys tr[data-prefix="${EXPIRED}"] td.limits`).textContent(),
    /anvil native: 24 h: 5 ETH of 5 ETH left/,
  );

  // A key expiring within 7 days is labelled so.
  assert.equal(await generate(page, "weekly", { expiration: "7d" }), 303);
  await page.goto(`${BASE}/dashboard/keys`);
  assert.match(await row(page, "weekly").textContent(), /Expiring soon/);

  // Spend limits are set and removed on the key's limits page.
  await row(page, "weekly").locator("a:has-text('Limits')").click();
  await page.waitForURL(/\/dashboard\/keys\/[^/]+\/limits$/);
  await assertLabelled(page);
  await page.fill("#chain", "anvil");
  await page.fill("#daily_budget", "lots");
  await page.click("button:has-text('Set limit')");
  assert.match(await page.textContent("#limit-error"), /daily_budget/);
  await page.fill("#chain", "anvil");
  await page.fill("#max_per_transaction", "100000000000000000");
  await page.fill("#daily_budget", "5000000000000000000");
  await page.click("button:has-text('Set limit')");
  await page.waitForURL(/\/limits\?saved=/);
  const limit = page.locator('#limits tr[data-limit="anvil native"]');
  // In the asset's units, base units on hover.
  assert.match(await limit.textContent(), /0\.1 ETH\s*5 ETH\s*0 ETH\s*5 ETH/);
  assert.equal(await limit.locator("td").nth(2).getAttribute("title"), "100000000000000000 base units");
  await shot(page, "limits");
  await limit.locator("button:has-text('Remove')").click();
  await page.waitForURL(/\/limits\?removed=/);
  assert.equal(await page.locator('#limits tr[data-limit="anvil native"]').count(), 0);
  // So is its policy: a bad address is named, a good rule is listed and removed.
  await page.selectOption("#rule-kind", "recipient");
  await page.fill("#rule-chain", "anvil");
  await page.fill("#rule-address", "0x1234");
  await page.click("button:has-text('Add rule')");
  assert.match(await page.textContent("#limit-error"), /address/);
  await page.selectOption("#rule-kind", "recipient");
  await page.fill("#rule-chain", "anvil");
  await page.fill("#rule-address", WALLET);
  await page.click("button:has-text('Add rule')");
  await page.waitForURL(/\/limits\?allowed=/);
  const rule = page.locator(`#policy tr[data-rule^="recipient anvil"]`);
  assert.match(await rule.textContent(), /Recipient\s*anvil/);
  await assertLabelled(page);
  await shot(page, "policy");
  await rule.locator("button:has-text('Remove')").click();
  await page.waitForURL(/\/limits\?disallowed=/);
  assert.equal(await page.locator(`#policy tr[data-rule^="recipient anvil"]`).count(), 0);

  // A read-only key reads and is refused a send, naming the scope.
  assert.equal(await generate(page, "reader", { scopes: ["read"] }), 303);
  const readKey = await createdValue(page);
  assert.equal((await api("/wallets", readKey)).status, 200);
  const send = await api("/send", readKey, {
    method: "POST",
    headers: { "idempotency-key": crypto.randomUUID() },
    body: JSON.stringify({ chain: "anvil", from: WALLET, to: WALLET, asset: "native", amount: "1" }),
  });
  assert.equal(send.status, 403);
  assert.equal(send.body.code, "FORBIDDEN");
  assert.match(send.body.error, /`write`/);

  // Revoke asks first, then holds at once.
  await page.goto(`${BASE}/dashboard/keys`);
  await row(page, "ci bot").locator("a:has-text('Revoke')").click();
  await assertLabelled(page);
  await shot(page, "revoke");
  await page.click("button:has-text('Revoke key')");
  await page.waitForURL(/\/dashboard\/keys\?revoked=/);
  assert.match(await row(page, "ci bot").textContent(), /Revoked/);
  assert.equal((await api("/wallets", ciKey)).status, 401);

  // Active now: the first key, weekly, reader. Seven more make ten; the eleventh is refused.
  for (let i = 1; i <= 7; i++) {
    assert.equal(await generate(page, `filler ${i}`), 303);
  }
  assert.equal(await generate(page, "eleventh"), 403);
  assert.match(await page.textContent("#key-error"), /revoke one first/);
  await shot(page, "keys-limit");

  // A form without its CSRF token is refused, from the page and from a script alike.
  await page.goto(`${BASE}/dashboard/keys`);
  await page.evaluate(() => document.querySelector("form.generate input[name=csrf]").remove());
  await page.fill("#name", "forged");
  const [forged] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click("button:has-text('Generate API Key')")]);
  assert.equal(forged.status(), 403);
  assert.match(await page.textContent("main"), /CSRF/);
  await shot(page, "csrf-refused");
  const scripted = await page.request.post(`${BASE}/dashboard/keys`, { form: { name: "forged" } });
  assert.equal(scripted.status(), 403);

  // Wallets: each wallet, its flags, and balances per chain.
  await page.goto(`${BASE}/dashboard/wallets`);
  assert.ok(await page.locator(`input[value="${WALLET}" i]`).count(), "the EVM wallet is listed");
  assert.match(await page.textContent("main"), /Anvil/i);
  assert.match(await page.textContent("main"), /delegated/);
  assert.ok(await page.locator("a[href*='/address/']").count(), "explorer links");
  // Only the chains in use are read; the others are a link away, without JavaScript.
  assert.doesNotMatch(await page.textContent("main"), /Sepolia/);
  await page.click("#chains-toggle a");
  await page.waitForURL(/\/dashboard\/wallets\?all=1$/);
  assert.match(await page.textContent("main"), /Sepolia/);
  await page.click("#chains-toggle a");
  await page.waitForURL(`${BASE}/dashboard/wallets`);
  await assertLabelled(page);
  await shot(page, "wallets");

  // Transactions: the send, its badge and history; open records refresh themselves.
  await page.goto(`${BASE}/dashboard/transactions`);
  const tx = page.locator(`#transactions tr[data-id="${TX}"]`);
  assert.match(await tx.textContent(), /Send/);
  assert.match(await tx.textContent(), /Confirmed|Submitted/);
  // Its amount in ETH, the base units on hover.
  const amount = tx.locator("td.amount");
  assert.equal((await amount.textContent()).trim(), "0.001 ETH");
  assert.equal(await amount.getAttribute("title"), "1000000000000000 base units");
  await tx.locator("summary").click();
  assert.match(await tx.locator("details").textContent(), /Submitted/);
  await page.goto(`${BASE}/dashboard/transactions?status=reverted`);
  assert.match(await page.textContent("#transactions"), /No transactions match/);
  await page.goto(`${BASE}/dashboard/transactions`);
  await assertLabelled(page);
  await shot(page, "transactions");

  // Approvals: the held write waits unsigned; approved here, it is recorded with who did it.
  await page.goto(`${BASE}/dashboard/approvals`);
  const held = page.locator(`#pending tr[data-id="${HELD}"]`);
  assert.match(await held.textContent(), /send 2000000000000000 native/);
  assert.match(await held.locator("td.amount").textContent(), /0\.002 ETH\s*above 0\.001 ETH/);
  await assertLabelled(page);
  await shot(page, "approvals");
  // The Approve button says what the write's simulation showed it does.
  assert.match(await held.locator("button.approve").textContent(), /^Approve: sends 2000000000000000 of native to 0x/);
  // The page refreshes itself, but not under a person deciding: a field typed in holds it.
  const reason = held.locator("input[name=reason]");
  await page.evaluate(() => { document.querySelector("[data-refresh]").dataset.refresh = "1"; });
  await reason.fill("checking");
  await page.waitForFunction(() => Number(document.querySelector("[data-refresh]").dataset.refreshHeld || 0) >= 2);
  assert.equal(await reason.inputValue(), "checking", "not reloaded while typed in");
  const reloaded = page.waitForEvent("load");
  await reason.fill("");
  await reason.evaluate((field) => field.blur());
  await reloaded;
  await held.locator("button.approve").click();
  await page.waitForURL(/\/dashboard\/approvals\?approved=1/);
  assert.equal(await page.locator(`#pending tr[data-id="${HELD}"]`).count(), 0);
  assert.match(await page.locator(`#decided tr[data-id="${HELD}"]`).textContent(), /dashboard:owner/);

  // Deposits: the money from outside, in its units, its transaction linked.
  await page.click("nav a:has-text('Deposits')");
  await page.waitForURL(/\/dashboard\/deposits$/);
  const deposit = page.locator("#deposits tr", { hasText: DEPOSIT });
  assert.equal(await deposit.count(), 1, "the deposit is listed once");
  assert.match(await deposit.locator("td.amount").textContent(), /0\.003 ETH/);
  await assertLabelled(page);
  await shot(page, "deposits");

  // Payouts: a CSV file checked row by row and previewed; nothing is paid until Pay.
  await page.click("nav a:has-text('Payouts')");
  await page.waitForURL(/\/dashboard\/payouts$/);
  await page.fill("#chain", "anvil");
  await page.fill("#csv", "to,asset,amount\n0x2222222222222222222222222222222222222201,native,1000\n0x12,native,5\n");
  const [checked] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click("#check")]);
  assert.equal(checked.status(), 400);
  assert.match(await page.textContent("#problems"), /row 3, to/);
  assert.equal(await page.inputValue("#chain"), "anvil", "what was typed stays");
  // The answer is a new page: its deferred script, which fills the text from a chosen file,
  // must have run before a file is chosen (under load it once had not, and the file was lost).
  await page.waitForLoadState("load");
  const payroll = "to,asset,amount,reference\n0x2222222222222222222222222222222222222201,native,1000,march\n0x2222222222222222222222222222222222222202,native,2000,april\n";
  await page.setInputFiles("#csv-file", { name: "payroll.csv", mimeType: "text/csv", buffer: Buffer.from(payroll) });
  await page.waitForFunction(() => document.querySelector("#csv").value.includes("april"));
  await page.click("#check");
  await page.waitForSelector("#preview");
  assert.equal(await page.locator("#preview tbody tr").count(), 2);
  assert.match(await page.textContent("#pay"), /Pay 2 recipients/);
  await assertLabelled(page);
  await shot(page, "payouts-preview");
  await page.click("#pay");
  await page.waitForURL(/\/dashboard\/payouts\/[0-9a-f-]{36}$/);
  // The page reloads itself while the payout runs.
  await page.locator("#payout", { hasText: "Completed" }).waitFor({ timeout: 60000 });
  assert.equal(await page.locator("#items td.state", { hasText: "CONFIRMED" }).count(), 2);
  await shot(page, "payout");

  // Phone width: nothing wider than the screen but the tables' own scrolling.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, storageState: await context.storageState() });
  const small = await phone.newPage();
  for (const path of ["keys", "wallets", "transactions", "approvals", "deposits", "payouts"]) {
    await small.goto(`${BASE}/dashboard/${path}`);
    await shot(small, `${path}-phone`);
    const overflow = await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    const widest = await small.evaluate(() =>
      [...document.querySelectorAll("body *")]
        .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest(".table-wrap"))
        .map((e) => e.tagName + "." + e.className)
        .slice(0, 5),
    );
    assert.ok(overflow <= 1, `${path} overflows a phone screen by ${overflow}px: ${widest}`);
  }
  await phone.close();

  // Sign-out ends the session: its cookie, replayed, opens nothing.
  await page.click("button:has-text('Sign out')");
  await page.waitForURL(/signed_out=1/);
  const replay = await browser.newContext();
  await replay.addCookies([{ ...session, sameSite: "Strict" }]);
  const replayed = await replay.newPage();
  await replayed.goto(`${BASE}/dashboard/keys`);
  assert.match(replayed.url(), /\/dashboard\/sign-in/);
  await replay.close();

  // Wrong passwords from this browser back off: from the third failure each attempt waits
  // (2 s, doubling), and one made within the wait is refused 429 before it is checked.
  let throttled = null;
  for (let i = 0; i < 8 && throttled === null; i++) {
    await page.goto(`${BASE}/dashboard/sign-in`);
    await page.fill("#user_name", "owner");
    await page.fill("#password", `wrong guess ${i}`);
    const [answer] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click("button[type=submit]")]);
    await page.waitForSelector("#sign-in-error");
    if (answer.status() === 429) throttled = answer;
  }
  assert.ok(throttled, "wrong passwords were never throttled");
  assert.match(await page.textContent("#sign-in-error"), /too many failed sign-ins/);
  await shot(page, "sign-in-throttled");
  console.log("dashboard: every check passed");
} finally {
  await browser.close();
}
