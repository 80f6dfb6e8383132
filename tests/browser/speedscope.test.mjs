// Opens what cprof-attach wrote in the real speedscope (the npm package's
// release build, as its own command line opens a file: a script that calls
// speedscope.loadFileFromBase64, named in #localProfilePath) in headless
// Chromium, and checks what a person would see:
//
//   --speedscope FILE  python3 doing zlib, then sha256, then zlib
//                      (phases.py zhz), written by cprof-attach -o
//                      x.speedscope.json.  Imported as speedscope's own
//                      format without a warning; the tooltip of a frame
//                      gives a time (ms, s), not a bare count; in the
//                      default Time Order view, hovering down the chart at
//                      a sixth, a half and five sixths of its width meets
//                      zlib, sha256 and zlib: the samples are in time order.
//   --trace FILE       python3 compressing (phases.py z), written by
//                      cprof-attach --format trace.  Imported as a trace
//                      without one warning (no "Tried to end ..." from
//                      B/E events it cannot pair, no frame "still open at
//                      end of profile"), the profile named after the
//                      process and the thread (process_name, thread_name).
//
// Usage (run.sh does all this):
//   node speedscope.test.mjs --speedscope F --trace F --release DIR
//        [--chromium /usr/bin/chromium] [--modules DIR]
// where DIR (--release) is speedscope's dist/release and --modules holds
// node_modules/playwright-core.
//
// Prints "ok - ..." or "not ok - ..." per check, then "N passed, M failed";
// exits 1 if any check failed or the browser could not be driven.

import { mkdtempSync, rmSync, writeFileSync, readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
	options: {
		speedscope: { type: "string" },
		trace: { type: "string" },
		release: { type: "string" },
		chromium: { type: "string", default: "/usr/bin/chromium" },
		modules: { type: "string", default: here },
	},
});
for (const key of ["speedscope", "trace", "release"]) {
	if (!opt[key] || !existsSync(opt[key])) {
		console.error("usage: node speedscope.test.mjs --speedscope FILE " +
			"--trace FILE --release DIR [--chromium PATH] [--modules DIR]" +
			` (no ${key}: ${opt[key]})`);
		process.exit(2);
	}
}

const limitMs = +(process.env.CPROF_BROWSER_TIMEOUT_MS || 120_000);
let timedOut = false;
let context = null;
const userDataDir = mkdtempSync(join(tmpdir(), "cprof-speedscope-"));
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

let chromium;
try {
	const require = createRequire(join(resolve(opt.modules), "package.json"));
	({ chromium } = require("playwright-core"));
} catch (e) {
	console.error(`cannot load playwright-core from ${opt.modules}/node_modules ` +
		`(${e.message}); run "npm ci" there, or tests/browser/run.sh`);
	process.exit(1);
}

try {
	context = await chromium.launchPersistentContext(userDataDir, {
		executablePath: opt.chromium,
		headless: true,
		viewport: { width: 1200, height: 900 },
		args: [
			"--headless", "--no-sandbox", "--disable-quic",
			"--no-first-run", "--disable-background-networking",
			"--disable-component-update", "--disable-sync",
			// speedscope's page loads the profile's script from a file.
			"--allow-file-access-from-files",
		],
		timeout: 60_000,
	});
	context.setDefaultTimeout(20_000);
	await checkSpeedscope(await context.newPage());
	await checkTrace(await context.newPage());
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

// Open FILE in speedscope on PAGE, as `speedscope FILE` does.  Returns the
// console messages (warnings and errors of the page, and its log lines).
async function open(page, file) {
	const messages = [];
	page.on("console", (m) => messages.push({ type: m.type(), text: m.text() }));
	page.on("pageerror", (e) => messages.push({ type: "error", text: e.message }));
	const script = join(userDataDir, `${basename(file)}.js`);
	const base64 = readFileSync(file).toString("base64");
	writeFileSync(script, `speedscope.loadFileFromBase64(${JSON.stringify(basename(file))}, ` +
		`${JSON.stringify(base64)})`);
	const url = pathToFileURL(join(resolve(opt.release), "index.html")).href +
		`#localProfilePath=${encodeURIComponent(script)}`;
	await page.goto(url);
	await page.waitForFunction(() => /Time Order/.test(document.body.innerText) &&
		/Export/.test(document.body.innerText));
	await page.waitForTimeout(500);
	return messages;
}

// Warnings and errors, leaving out the GPU driver's chatter.
function complaints(messages) {
	return messages.filter((m) => (m.type === "warning" || m.type === "error") &&
		!/GL Driver Message|WebGL|GPU stall/.test(m.text));
}

// The tooltip speedscope shows for the frame under the mouse: "1.34s (97%)
// name", or "" when there is none.
async function tooltip(page) {
	return page.evaluate(() => {
		const tips = [...document.querySelectorAll("div")].filter((d) =>
			d.children.length <= 3 && /^\S+ \(\d+(\.\d+)?%\) /.test(d.innerText || ""));
		return tips.length ? tips[tips.length - 1].innerText.replace(/\n/g, " | ") : "";
	});
}

// Hover down the chart at X; the tooltips met, in order.
async function column(page, x) {
	const seen = [];
	for (let y = 20; y < 900; y += 8) {
		await page.mouse.move(x, y);
		const t = await tooltip(page);
		if (t && seen[seen.length - 1] !== t)
			seen.push(t);
	}
	return seen;
}

async function checkSpeedscope(page) {
	const messages = await open(page, opt.speedscope);
	check("speedscope imports the file as its own format",
		messages.some((m) => /Importing as speedscope json file/.test(m.text)),
		JSON.stringify(messages.map((m) => m.text)));
	const bad = complaints(messages);
	check("without a warning or an error", bad.length === 0,
		bad.slice(0, 5).map((m) => m.text).join("; "));
	const body = await page.evaluate(() => document.body.innerText);
	check("the profile is named after its thread (TID name)",
		/\n\d+ \S+/.test(body), body.slice(0, 200));

	const width = 1200;
	const phases = [];
	const tips = [];
	for (const x of [width / 6, width / 2, width * 5 / 6]) {
		const seen = await column(page, Math.round(x));
		tips.push(...seen);
		const zlib = seen.some((t) => /zlib_compress|deflate/.test(t));
		const sha = seen.some((t) => /sha256/i.test(t));
		phases.push(zlib && !sha ? "z" : sha && !zlib ? "h" : "?");
	}
	check("hovering the Time Order view meets a time, not a bare count",
		tips.length > 0 && tips.every((t) => /^[\d.]+(ns|µs|ms|s|min|h) /.test(t)),
		tips.slice(0, 3).join(" / "));
	check("left to right, the thread did zlib, sha256, zlib (time order)",
		phases.join("") === "zhz", phases.join(""));
}

async function checkTrace(page) {
	const messages = await open(page, opt.trace);
	check("speedscope imports the trace as Trace Event Format",
		messages.some((m) => /Importing as Trace Event Format/.test(m.text)),
		JSON.stringify(messages.map((m) => m.text)));
	const bad = complaints(messages);
	check("every B and E pairs up, nothing is left open (no warning)",
		bad.length === 0,
		`${bad.length} warnings: ` + bad.slice(0, 3).map((m) => m.text).join("; "));
	const body = await page.evaluate(() => document.body.innerText);
	check("the profile is named after the process and the thread",
		/\(pid \d+\), \S+ \(tid \d+\)/.test(body), body.slice(0, 200));
	await page.mouse.move(600, 300);
	await page.waitForTimeout(200);
	const seen = await column(page, 600);
	check("a frame's tooltip gives a time",
		seen.length > 0 && seen.every((t) => /^[\d.]+(ns|µs|ms|s|min|h) /.test(t)),
		seen.slice(0, 3).join(" / "));
}
