// The dashboard: reads /api/status every REFRESH_MS and redraws the page.
// Served as a file of its own because the page's Content-Security-Policy
// allows scripts from this app only, never inline ones. Every value from the
// crawl goes into the page as text (textContent), never as HTML.
"use strict";

const REFRESH_MS = 2000;
const params = new URLSearchParams(window.location.search);
const crawl = params.get("crawl") || "";
const $ = (id) => document.getElementById(id);

function num(x, digits) {
  if (x === null || x === undefined) return "-";
  return digits === undefined ? Number(x).toLocaleString("en") : Number(x).toFixed(digits);
}

function duration(s) {
  if (s === null || s === undefined) return "-";
  if (s < 60) return Math.round(s) + " s";
  if (s < 3600) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
  return td;
}

function bars(el, rows) {  // rows: [[label, value], ...]
  clear(el);
  const top = Math.max(1, ...rows.map((r) => r[1]));
  for (const [label, value] of rows) {
    const row = document.createElement("div");
    row.className = "bar-row";
    const name = document.createElement("span");
    name.textContent = label;
    const track = document.createElement("span");
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = (100 * value / top) + "%";
    track.appendChild(bar);
    const n = document.createElement("span");
    n.className = "n";
    n.textContent = num(value);
    row.append(name, track, n);
    el.appendChild(row);
  }
}

function sizeLabel(b) {
  if (b >= 1 << 20) return (b >> 20) + "M";
  if (b >= 1 << 10) return (b >> 10) + "K";
  return String(b);
}

function banner(text) {
  const el = $("banner");
  el.textContent = text || "";
  el.hidden = !text;
}

let access = { control: false, token_required: false };

function draw(s) {
  $("crawl").textContent = s.crawl_id;
  const state = $("state");
  state.textContent = s.state;
  state.className = "state " + s.state;
  $("pages-now").textContent = num(s.rates.pages_s_now, 1);
  $("pages-avg").textContent = num(s.rates.pages_s_avg, 1);
  $("mb-now").textContent = num(s.rates.mb_s_now, 3);
  $("mb-avg").textContent = num(s.rates.mb_s_avg, 3);
  $("fetched").textContent = num(s.fetched);
  $("queued").textContent = num(s.queued);
  $("discovered").textContent = num(s.discovered);
  $("sitemap-urls").textContent = num(s.sitemaps.urls_found);
  $("sitemaps").textContent = num(s.sitemaps.fetched);
  $("sitemap-admitted").textContent = num(s.sitemaps.urls_admitted);
  $("sitemaps-invalid").textContent = num(s.sitemaps.invalid);
  $("eta").textContent = s.eta_s === null ? "- (nothing fetched now)" : duration(s.eta_s) + " at the current rate";
  $("crawl-delay").textContent = num(s.politeness.hosts_crawl_delay);
  $("backed-off").textContent = num(s.politeness.hosts_backed_off);
  $("noindex").textContent = num(s.politeness.pages_noindex);
  $("nofollow-pages").textContent = num(s.politeness.pages_nofollow);
  $("nofollow-links").textContent = num(s.politeness.links_nofollow);

  const f = s.frontier;
  const table = $("frontier");
  clear(table);
  for (const [k, v] of [["queued URLs", f.queued], ["hosts ready", f.hosts_ready],
      ["hosts waiting", f.hosts_waiting], ["hosts leased", f.hosts_leased],
      ["hosts backed off", f.hosts_backed_off], ["pages pending", f.pages_pending],
      ["deepest host queue", f.deepest_queue + " (of " + f.deepest_of_hosts + " hosts)"],
      ["average host queue", f.average_queue], ["leases handed out", f.leased],
      ["leases expired", f.expired_leases]]) {
    const row = table.insertRow();
    cell(row, k);
    cell(row, typeof v === "number" ? num(v) : v);
  }

  const body = $("workers").tBodies[0];
  clear(body);
  for (const w of s.workers) {
    const row = body.insertRow();
    row.className = w.state;
    cell(row, w.id);
    cell(row, w.state + (w.finish_reason ? " (" + w.finish_reason + ")" : ""));
    cell(row, num(w.pages_s, 1));
    cell(row, num(w.pages));
    cell(row, num(w.leases));
    cell(row, num(w.age_s, 1) + " s ago");
    cell(row, w.leases_fate);
  }

  const fig = s.figures;
  bars($("outcomes"), Object.entries(fig.outcomes));
  bars($("types"), Object.entries(fig.content_types).slice(0, 8));
  bars($("sizes"), fig.sizes.map(([b, n]) => [sizeLabel(b), n]));
  bars($("per-host"), fig.pages_per_host.map(([y, x]) => [">= " + num(y) + " pages", x]));
  $("ranker").textContent = s.ranker.runs + " run(s), " + num(s.ranker.rescored) + " URLs rescored" +
    (s.ranker.last_run ? "; last " + new Date(s.ranker.last_run).toLocaleString() : "") +
    (s.ranker.holder ? "; lock held by " + s.ranker.holder : "");
  $("indexer").textContent = num(s.indexer.written) + " documents written" +
    (s.indexer.last_batch ? "; last batch " + new Date(s.indexer.last_batch).toLocaleString() : "") +
    (s.indexer.holder ? "; lock held by " + s.indexer.holder : "");
  $("log").textContent = s.log_tail.join("\n");

  access = s.access;
  $("token-label").hidden = !access.token_required;
  for (const id of ["pause", "resume", "stop"]) $(id).disabled = !access.control;
  if (!access.control) $("control-message").textContent = "control is off: the app listens beyond loopback without UI_TOKEN";
}

async function refresh() {
  try {
    const res = await fetch("/api/status" + (crawl ? "?crawl=" + encodeURIComponent(crawl) : ""),
                            { cache: "no-store" });
    const body = await res.json();
    if (res.ok) {
      banner("");
      draw(body);
      $("updated").textContent = new Date().toLocaleTimeString();
    } else if (res.status === 503) {
      banner(body.error + " (trying again every " + REFRESH_MS / 1000 + " s)");
    } else {
      banner(body.error);
    }
  } catch (err) {
    banner("The app does not answer (" + err.message + "); trying again");
  }
}

async function send(action) {
  const headers = { "content-type": "application/json" };
  if (access.token_required) headers.authorization = "Bearer " + $("token").value;
  const msg = $("control-message");
  try {
    const res = await fetch("/api/control", {
      method: "POST", headers, body: JSON.stringify({ crawl: $("crawl").textContent, action }) });
    const body = await res.json();
    msg.textContent = res.ok ? action + " sent" : body.error;
  } catch (err) {
    msg.textContent = "not sent: " + err.message;
  }
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["pause", "resume", "stop"]) $(id).addEventListener("click", () => send(id));
  refresh();
  setInterval(refresh, REFRESH_MS);
});
