// One host's page: reads /api/host?name= every REFRESH_MS and says why the
// host waits and until when, how its downloads went, its robots.txt as the
// crawl holds it, its budgets and its last fetches. Every value goes in as
// text: a host name with markup stays the characters it is.
"use strict";

const REFRESH_MS = 5000;
const params = new URLSearchParams(window.location.search);
const crawl = params.get("crawl") || "";
const name = params.get("name") || "";
const $ = (id) => document.getElementById(id);

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }
function num(x) { return x === null || x === undefined ? "-" : Number(x).toLocaleString("en"); }
function when(ms) { return ms ? new Date(ms).toLocaleString() : "-"; }
function seconds(ms) { return (ms / 1000).toLocaleString("en", { maximumFractionDigits: 3 }) + " s"; }

function rows(table, pairs) {
  clear(table);
  for (const [k, v] of pairs) {
    const row = table.insertRow();
    row.insertCell().textContent = k;
    row.insertCell().textContent = v;
  }
}

function message(text) {
  $("message").textContent = text || "";
  $("message").hidden = !text;
}

const FATES = { busy: "429/503 answers", fail: "connection errors or timeouts" };

function draw(h) {
  $("host").textContent = h.host;
  document.title = "crawlproj host " + h.host;
  $("crawl").textContent = h.crawl_id;
  $("state").textContent = h.state;
  $("state").className = "state " + h.state;
  $("why").textContent = h.why;
  $("until").textContent = h.until_ms && h.until_ms > h.now_ms ?
    (h.state === "leased" ? "lease ends " : "next contact not before ") + when(h.until_ms) : "";
  const r = h.record;
  $("backoffs").textContent = r ? num(r.backoffs) + " back-off(s) so far; " + num(h.fails) + " failure(s) in a row now" : "no download has ended yet";
  const b = r && r.last_backoff;
  $("last-backoff").textContent = b ? "the last at " + when(b.at_ms) + ", for " + seconds(b.ms) +
    " after " + (FATES[b.fate] || b.fate) : "";
  const delay = h.robots.crawl_delay;
  $("crawl-delay").textContent = delay ? "Crawl-delay " + delay + " s (robots.txt)" : "no Crawl-delay";
  $("pace").textContent = (r ? "last delay after a download " + seconds(r.delay_ms) : "") +
    (h.interval_s !== null ? "; one download per " + h.interval_s.toFixed(3) + " s on average" : "");
  rows($("facts"), [
    ["queued URLs", num(h.queue)], ["recrawls scheduled", num(h.scheduled)],
    ["downloads", r ? num(r.fetched) + " (" + num(r.ok) + " answered, " + num(r.busy) + " 429/503, " + num(r.fail) + " failed)" : "0"],
    ["first download ended", when(r && r.first_ms)], ["last download ended", when(r && r.last_ms)],
    ["last Retry-After", r && r.retry_after_ms >= 0 ? seconds(r.retry_after_ms) : "-"],
    ["partition", String(h.partition)]]);
  const g = h.budgets;
  rows($("budgets"), [
    ["queued / TRAPGUARD_HOST_MAX_QUEUED", num(g.queued) + " / " + (g.max_queued ? num(g.max_queued) : "none")],
    ["pages leased / TRAPGUARD_HOST_MAX_PAGES", (g.pages_leased === null ? "not counted" : num(g.pages_leased)) + " / " + (g.max_pages ? num(g.max_pages) : "none")],
    ["near-duplicate pages (trap guard)", g.trapped === null ? "not trapped" : "trapped: " + num(g.trapped)],
    ["sitemap files / SITEMAP_MAX_FILES", num(g.sitemap_files) + " / " + num(g.max_sitemap_files)],
    ["reached", g.reached || "no budget reached"]]);
  const robots = $("robots");
  clear(robots);
  if (!h.robots.origins.length) {
    const p = document.createElement("p");
    p.textContent = "not fetched yet (or expired: kept " + seconds(h.robots_expiry_s * 1000) + ")";
    robots.appendChild(p);
  }
  for (const o of h.robots.origins) {
    const p = document.createElement("p");
    p.textContent = o.origin + ": " + ({ rules: "rules", allow: "allows everything (none, or a 4xx)",
      disallow: "disallows everything (unreachable too often)", failed: "unreachable " + o.failures + " time(s), asked again",
      unresolved: "its name did not resolve " + o.failures + " time(s), asked again",
      "no host": "its name does not resolve: nothing fetched" })[o.status] +
      (o.crawl_delay ? ", Crawl-delay " + o.crawl_delay + " s" : "") +
      (o.expires_in_s !== null ? "; kept " + num(o.expires_in_s) + " s more" : "");
    robots.appendChild(p);
    if (o.rules) {
      const pre = document.createElement("pre");
      pre.textContent = o.rules;
      robots.appendChild(pre);
    }
  }
  const next = $("next");
  clear(next);
  for (const u of h.next_urls) next.appendChild(document.createElement("li")).textContent = u;
  if (!h.next_urls.length) next.appendChild(document.createElement("li")).textContent = "none queued";
  fetches($("fetches"), h.last_fetches, "none in the crawl logs on this machine");
  fetches($("errors"), h.last_errors, "none in the crawl logs on this machine");
  $("story").hidden = false;
}

function fetches(table, lines, none) {
  const body = table.tBodies[0];
  clear(body);
  for (const f of lines) {
    const row = body.insertRow();
    for (const v of [f.time, String(f.status), f.size === null ? "-" : num(f.size), f.url, f.notes]) row.insertCell().textContent = v;
  }
  if (!lines.length) body.insertRow().insertCell().textContent = none;
}

async function refresh() {
  const q = new URLSearchParams({ name });
  if (crawl) q.set("crawl", crawl);
  try {
    const res = await fetch("/api/host?" + q.toString(), { cache: "no-store" });
    const body = await res.json();
    if (res.ok) {
      message("");
      draw(body);
      $("updated").textContent = new Date().toLocaleTimeString();
    } else {
      message(body.error);
      $("story").hidden = true;
      $("state").textContent = "unknown";
    }
  } catch (err) {
    message("The app does not answer (" + err.message + "); trying again");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("host").textContent = name || "-";
  const q = crawl ? "?crawl=" + encodeURIComponent(crawl) : "";
  $("dashboard-link").href = "/dashboard" + q;
  $("hosts-link").href = "/hosts" + q;
  refresh();
  setInterval(refresh, REFRESH_MS);
});
