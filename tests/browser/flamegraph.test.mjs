// Drives a cprof flame graph SVG in headless Chromium, the way a person
// would: click a frame to zoom, "Reset zoom", search with the Search control,
// Ctrl-F and F3, toggle match case, hover a frame.  The document's ids and
// classes are the ones documented at the top of src/formats/svg.c; everything is
// checked in the DOM the page shows, and widths in rendered pixels.
//
// Input: an SVG that cprof drew from fixtures/data/browser.folded:
//
//   main;a;b 60
//   main;a;c 30
//   main;d 10
//
// Usage (run.sh does all this):
//   node flamegraph.test.mjs --svg FILE.svg --screenshot OUT.png
//        [--chromium /usr/bin/chromium] [--modules DIR]
// where DIR holds node_modules/playwright-core (default: this folder).
//
// Prints "ok - ..." or "not ok - ..." per check, then "N passed, M failed";
// exits 1 if any check failed or the browser could not be driven.

import { mkdirSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
	options: {
		svg: { type: "string" },
		screenshot: { type: "string" },
		chromium: { type: "string", default: "/usr/bin/chromium" },
		modules: { type: "string", default: here },
	},
});
if (!opt.svg || !opt.screenshot) {
	console.error("usage: node flamegraph.test.mjs --svg FILE.svg " +
		"--screenshot OUT.png [--chromium PATH] [--modules DIR]");
	process.exit(2);
}
if (!existsSync(opt.svg)) {
	console.error(`no SVG at ${opt.svg}: draw it first ` +
		"(cprof flamegraph fixtures/data/browser.folded -o FILE.svg)");
	process.exit(2);
}

// Never let a hung browser hang `make check`: past the limit, close the
// browser (run() then fails and the count is printed as usual), and leave
// for good if even that hangs.
const limitMs = +(process.env.CPROF_BROWSER_TIMEOUT_MS || 120_000);
let timedOut = false;
const watchdog = setTimeout(() => {
	timedOut = true;
	failed++;
	console.log(`not ok - the test finished within ${limitMs / 1000} s`);
	context?.close().catch(() => {});
	setTimeout(() => {
		console.log(`${passed} passed, ${failed} failed`);
		rmSync(userDataDir, { recursive: true, force: true });
		process.exit(1);
	}, 10_000).unref();
}, limitMs);

let passed = 0;
let failed = 0;
// A stray promise of ours that failed is a failed check, not a crash that
// would lose the count.
process.on("unhandledRejection", (e) => {
	failed++;
	console.log(`not ok - no unexpected error: ${e && e.stack || e}`);
});

function check(name, ok, detail) {
	if (ok) {
		passed++;
		console.log(`ok - ${name}`);
	} else {
		failed++;
		console.log(`not ok - ${name}${detail === undefined ? "" : ": " + detail}`);
	}
}

function near(a, b, tol = 1) {
	return typeof a === "number" && Math.abs(a - b) <= tol;
}

// playwright-core from wherever run.sh installed it (the build directory,
// so concurrent builds never share one node_modules).
let chromium;
try {
	const require = createRequire(join(resolve(opt.modules), "package.json"));
	({ chromium } = require("playwright-core"));
} catch (e) {
	console.error(`cannot load playwright-core from ${opt.modules}/node_modules ` +
		`(${e.message}); run "npm ci" there, or tests/browser/run.sh`);
	process.exit(1);
}

const userDataDir = mkdtempSync(join(tmpdir(), "cprof-chromium-"));
let context = null;
try {
	// Debian's Chromium, never a browser Playwright would download.  A fresh
	// profile each run; no network beyond the file:// page.
	context = await chromium.launchPersistentContext(userDataDir, {
		executablePath: opt.chromium,
		headless: true,
		args: [
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking",
			"--disable-component-update", "--disable-sync",
		],
		timeout: 60_000,
	});
	context.setDefaultTimeout(10_000);
	const page = context.pages()[0] ?? await context.newPage();
	await run(page);
} catch (e) {
	if (timedOut) {
		console.log(`# stopped: ${e.message.split("\n")[0]}`);
	} else {
		failed++;
		console.log(`not ok - the browser ran the whole test: ${e.stack || e}`);
	}
} finally {
	if (context)
		await context.close().catch(() => {});
	rmSync(userDataDir, { recursive: true, force: true });
	clearTimeout(watchdog);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);

async function run(page) {
	const errors = [];
	page.on("pageerror", (e) => errors.push(e.message));
	page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

	await page.goto(pathToFileURL(resolve(opt.svg)).href);
	const size = await page.evaluate(() => {
		const svg = document.documentElement;
		return { width: +svg.getAttribute("width"), height: +svg.getAttribute("height") };
	});
	await page.setViewportSize(size);

	const box = page.locator("#frames");
	const xpad = +(await box.getAttribute("data-xpad"));
	const full = +(await box.getAttribute("data-width"));
	check("the graph is 1180 px wide from x=10", xpad === 10 && full === 1180,
		`data-xpad ${xpad}, data-width ${full}`);

	// The frames in document order, found by their <title> ("NAME (...)").
	const frameG = box.locator(":scope > g.frame");
	const titles = await frameG.locator("title").allTextContents();
	const names = titles.map((t) => t.substring(0, t.lastIndexOf(" (")));
	check("one frame each for all, main, a, b, c, d",
		[...names].sort().join(",") === "a,all,b,c,d,main", names.join(","));
	const frame = (name) => {
		const i = names.indexOf(name);
		if (i < 0)
			throw new Error(`no frame named ${name}`);
		return frameG.nth(i);
	};
	const rectOf = (name) => frame(name).locator("rect");
	const bbox = (name) => rectOf(name).boundingBox(); // null when not drawn
	const classOf = async (name) => (await frame(name).getAttribute("class")) || "";
	const text = (sel) => page.locator(sel).textContent();
	const matchedFrames = async () => {
		const out = [];
		for (const n of names)
			if ((await classOf(n)).split(/\s+/).includes("match"))
				out.push(n);
		return out.join(",");
	};
	// The text of SEL once it equals WANT (a string, or a test of the
	// text), or whatever it is after 3 s.
	const textSoon = async (sel, want) => {
		const ok = typeof want === "function" ? want : (t) => t === want;
		const end = Date.now() + 3000;
		let got;
		do {
			got = await text(sel);
			if (ok(got))
				break;
			await page.waitForTimeout(25);
		} while (Date.now() < end);
		return got;
	};
	// Open the search prompt with OPEN() and answer it with ANSWER.
	const searchWith = async (open, answer) => {
		let dialog = null;
		const answerIt = async (d) => {
			dialog = { type: d.type(), message: d.message(), value: d.defaultValue() };
			await d.accept(answer).catch(() => {});
		};
		page.once("dialog", answerIt);
		await open();
		const end = Date.now() + 3000;
		while (!dialog && Date.now() < end)
			await page.waitForTimeout(25);
		page.off("dialog", answerIt); // none came: do not answer the next one
		return dialog;
	};
	const clickSearch = () => page.locator("#search").click();

	// What the file drew, to compare after a reset.
	const drawn = {};
	for (const n of names)
		drawn[n] = { x: await rectOf(n).getAttribute("x"), width: await rectOf(n).getAttribute("width") };

	// (5) hover: the <title> and the details line say name, count and share.
	const wantTitle = {
		all: "all (100 samples, 100.00%)", main: "main (100 samples, 100.00%)",
		a: "a (90 samples, 90.00%)", b: "b (60 samples, 60.00%)",
		c: "c (30 samples, 30.00%)", d: "d (10 samples, 10.00%)",
	};
	for (const n of Object.keys(wantTitle))
		check(`<title> of ${n}`, titles[names.indexOf(n)] === wantTitle[n], titles[names.indexOf(n)]);
	for (const n of ["b", "d"]) {
		await rectOf(n).hover();
		const got = await textSoon("#details", wantTitle[n]);
		check(`hovering ${n} shows "${wantTitle[n]}" in the details line`, got === wantTitle[n], got);
	}
	await page.mouse.move(size.width / 2, 5); // off the frames
	const blank = await textSoon("#details", " ");
	check("leaving the frames clears the details line", blank.trim() === "", JSON.stringify(blank));

	// (1) zoom: a is narrower than the graph; clicked, it fills it.
	const aBefore = await bbox("a");
	check("before the zoom, a is narrower than the graph",
		aBefore && aBefore.width < full - 1, JSON.stringify(aBefore));
	check("before the zoom, Reset zoom is off", (await page.locator("#reset").getAttribute("class")).includes("off"));
	await rectOf("a").click();
	const aAfter = await bbox("a");
	check("after clicking a, its rect spans the full width (within 1 px)",
		aAfter && near(aAfter.x, xpad) && near(aAfter.width, full), JSON.stringify(aAfter));
	for (const n of ["main", "all"]) {
		const b = await bbox(n);
		check(`after clicking a, its ancestor ${n} is still drawn, full width and faded`,
			b && near(b.width, full) && (await classOf(n)).includes("anc") &&
			await frame(n).isVisible(), `${JSON.stringify(b)} class "${await classOf(n)}"`);
	}
	const bZ = await bbox("b"), cZ = await bbox("c");
	check("after clicking a, b and c share its width 60:30",
		bZ && cZ && near(bZ.x, xpad) && near(bZ.width, full * 60 / 90) &&
		near(cZ.x, xpad + full * 60 / 90) && near(cZ.width, full * 30 / 90),
		`b ${JSON.stringify(bZ)} c ${JSON.stringify(cZ)}`);
	check("after clicking a, d (not under a) is hidden",
		!(await frame("d").isVisible()) && (await classOf("d")).includes("hide"), await classOf("d"));
	check("after clicking a, Reset zoom is on",
		!(await page.locator("#reset").getAttribute("class")).includes("off"));
	mkdirSync(dirname(resolve(opt.screenshot)), { recursive: true });
	await page.screenshot({ path: opt.screenshot });
	console.log(`# screenshot of the zoomed graph: ${opt.screenshot}`);

	// A deeper zoom, then (2) "Reset zoom" puts back what the file drew.
	await rectOf("b").click();
	const bDeep = await bbox("b");
	check("clicking b in the zoomed graph zooms to b", bDeep && near(bDeep.width, full) &&
		(await classOf("a")).includes("anc") && !(await frame("c").isVisible()), JSON.stringify(bDeep));
	await page.locator("#reset").click();
	let same = [];
	for (const n of names) {
		const x = await rectOf(n).getAttribute("x"), w = await rectOf(n).getAttribute("width");
		const c = await classOf(n);
		if (x !== drawn[n].x || w !== drawn[n].width || c !== "frame" || !(await frame(n).isVisible()))
			same.push(`${n}: x ${x} width ${w} class "${c}"`);
	}
	check("Reset zoom puts every frame back where the file drew it", same.length === 0, same.join("; "));
	const aReset = await bbox("a");
	check("after Reset zoom, a is as wide as before", aReset && near(aReset.width, aBefore.width), JSON.stringify(aReset));
	check("after Reset zoom, Reset zoom is off", (await page.locator("#reset").getAttribute("class")).includes("off"));
	// Clicking the root and pressing Escape also go back.
	await rectOf("a").click();
	await rectOf("all").click();
	check("clicking the root while zoomed resets the zoom", near((await bbox("a")).width, aBefore.width));
	await rectOf("a").click();
	await page.keyboard.press("Escape");
	check("Escape resets the zoom", near((await bbox("a")).width, aBefore.width));

	// (3) search: the Search control, Ctrl-F and F3 ask for a regex.
	check("no search: the matched text is empty", (await text("#matched")) === "");
	let dialog = await searchWith(clickSearch, "^(b|c)$");
	check("the Search control asks for a regular expression",
		dialog && dialog.type === "prompt" && /regular expression/.test(dialog.message), JSON.stringify(dialog));
	let got = await textSoon("#matched", "Matched: 90.00 %");
	check('Search ^(b|c)$ shows "Matched: 90.00 %"', got === "Matched: 90.00 %", got);
	check("Search ^(b|c)$ highlights b and c only", (await matchedFrames()) === "b,c", await matchedFrames());
	check("an active search marks the Search control",
		(await page.locator("#search").getAttribute("class")).split(/\s+/).includes("on"));
	await page.keyboard.press("Escape");
	got = await textSoon("#matched", "");
	check("Escape clears the search", got === "" && (await matchedFrames()) === "", `${got} ${await matchedFrames()}`);

	dialog = await searchWith(() => page.keyboard.press("Control+f"), "^(b|c)$");
	check("Ctrl-F asks for a regular expression", dialog && dialog.type === "prompt", JSON.stringify(dialog));
	got = await textSoon("#matched", "Matched: 90.00 %");
	check('Ctrl-F ^(b|c)$ shows "Matched: 90.00 %"', got === "Matched: 90.00 %", got);
	check("Ctrl-F ^(b|c)$ highlights b and c only", (await matchedFrames()) === "b,c", await matchedFrames());

	dialog = await searchWith(() => page.keyboard.press("F3"), "^d$");
	check("F3 asks again, offering the last pattern",
		dialog && dialog.value === "^(b|c)$", JSON.stringify(dialog));
	got = await textSoon("#matched", "Matched: 10.00 %");
	check('F3 ^d$ shows "Matched: 10.00 %"', got === "Matched: 10.00 %", got);

	await searchWith(clickSearch, "^(a|b)$");
	got = await textSoon("#matched", "Matched: 90.00 %");
	check("b inside a (both matching) is counted once: 90.00 %", got === "Matched: 90.00 %", got);

	await searchWith(clickSearch, "(");
	const err = await textSoon("#details", (t) => t.startsWith("Search: "));
	check("a bad regular expression is reported in the details line", err.startsWith("Search: "), err);
	check("a bad regular expression leaves the last search", (await text("#matched")) === "Matched: 90.00 %");

	await searchWith(clickSearch, "");
	got = await textSoon("#matched", "");
	check("an empty answer clears the search", got === "" && (await matchedFrames()) === "", got);

	// (4) match case: B matches nothing until case is ignored.
	const caseEl = page.locator("#case");
	check("match case is on at first", (await caseEl.getAttribute("aria-pressed")) === "true");
	await searchWith(clickSearch, "B");
	got = await textSoon("#matched", "Matched: 0.00 %");
	check('matching case, B finds nothing: "Matched: 0.00 %"',
		got === "Matched: 0.00 %" && (await matchedFrames()) === "", `${got} [${await matchedFrames()}]`);
	await caseEl.click();
	check("clicking Aa turns match case off", (await caseEl.getAttribute("aria-pressed")) === "false");
	got = await textSoon("#matched", "Matched: 60.00 %");
	check('ignoring case, the same search B finds b: "Matched: 60.00 %"',
		got === "Matched: 60.00 %" && (await matchedFrames()) === "b", `${got} [${await matchedFrames()}]`);
	dialog = await searchWith(clickSearch, "^A$");
	check("the prompt says it ignores case", dialog && /ignoring case/.test(dialog.message), JSON.stringify(dialog));
	got = await textSoon("#matched", "Matched: 90.00 %");
	check('ignoring case, ^A$ finds a: "Matched: 90.00 %"', got === "Matched: 90.00 %", got);
	await caseEl.click();
	check("clicking Aa again turns match case back on", (await caseEl.getAttribute("aria-pressed")) === "true");
	got = await textSoon("#matched", "Matched: 0.00 %");
	check('matching case again, ^A$ finds nothing: "Matched: 0.00 %"', got === "Matched: 0.00 %", got);

	check("the page's script raised no error", errors.length === 0, errors.join("; "));
}
