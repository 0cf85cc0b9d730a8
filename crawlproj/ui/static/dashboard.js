// The dashboard: reads /api/status every REFRESH_MS and redraws the page.
// Served as a file of its own because the page's Content-Security-Policy
// allows scripts from this app only, never inline ones. Every value from the
// crawl goes into the page as text (textContent), never as HTML. The
// crawl's history comes whole on the first read and then only its newer
// samples (since=), kept here by slot; charts.js draws it.
"use strict";

const REFRESH_MS = 2000;
// At most this many samples are drawn: more are thinned, rates taken over
// the samples kept (the counters are cumulative, so nothing is lost).
const MAX_DRAWN = 600;
const ERROR_KINDS = ["dns", "tcp", "timeout", "4xx", "5xx", "robots"];
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
  const e = s.eta;
  $("eta").textContent = e.eta_s === null ? "-" : (e.lower_bound ? "at least " : "") + duration(e.eta_s);
  $("eta-basis").textContent = e.basis;
  $("crawl-delay").textContent = num(s.politeness.hosts_crawl_delay);
  $("backed-off").textContent = num(s.politeness.hosts_backed_off);
  $("noindex").textContent = num(s.politeness.pages_noindex);
  $("nofollow-pages").textContent = num(s.politeness.pages_nofollow);
  $("nofollow-links").textContent = num(s.politeness.links_nofollow);

  drawHolding(s);
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

function hostLink(name) {
  const a = document.createElement("a");
  a.href = "/host?name=" + encodeURIComponent(name) + (crawl ? "&crawl=" + encodeURIComponent(crawl) : "");
  a.textContent = name;
  return a;
}

function drawHolding(s) {
  const body = $("holding").tBodies[0];
  clear(body);
  for (const h of s.holding) {
    const row = body.insertRow();
    row.insertCell().appendChild(hostLink(h.host));
    cell(row, h.state);
    cell(row, num(h.queue));
    cell(row, num(h.step_s, 2) + " s");
    cell(row, duration(h.seconds));
  }
  if (!s.holding.length) cell(body.insertRow(), "no host has URLs queued").colSpan = 5;
}

// -- the history -------------------------------------------------------------

const past = { samples: new Map(), step: null, span: "", last: 0, every: 1 };

function keep(h) {
  if (h.step_s !== past.step) {  // another ring: start again from its samples
    past.samples.clear();
    past.step = h.step_s;
  }
  for (const x of h.samples) past.samples.set(x.s, x);
  const all = [...past.samples.values()];
  past.last = all.length ? Math.max(...all.map((x) => x.t)) : 0;
  if (past.span) {
    const oldest = past.last - past.span * 1000;
    for (const [slot, x] of past.samples) if (x.t < oldest) past.samples.delete(slot);
  }
}

function thinned() {
  const all = [...past.samples.values()].sort((a, b) => a.t - b.t);
  past.every = Math.max(1, Math.ceil(all.length / MAX_DRAWN));
  const picked = past.every === 1 ? all : all.filter((_, i) => i % past.every === 0);
  // the newest sample always, in place of a picked one less than half a
  // step before it (a rate over a sliver of time is noise: a worker's
  // goodbye comes moments after its last heartbeat)
  const last = all[all.length - 1];
  const half = 500 * (past.step || 10) * past.every;
  while (picked.length > 1 && last && last.t - picked[picked.length - 1].t < half) picked.pop();
  if (last && picked[picked.length - 1] !== last) picked.push(last);
  return picked;
}

// Rates between consecutive samples drawn; a gap of more than 3 of their
// steps (no worker wrote: none ran) breaks the line.
function rates(samples, per) {
  const gap = 3 * (past.step || 10) * 1000 * past.every;
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dt = (b.t - a.t) / 1000;
    if (dt <= 0) continue;
    out.push([b.t, b.t - a.t > gap ? null : per(a, b, dt)]);
  }
  return out;
}

function drawHistory(h) {
  const samples = thinned();
  const empty = "no history yet: no worker of this crawl has sent a heartbeat with it";
  $("history-note").textContent = h.step_s === null ? "" :
    samples.length + " samples, one per " + h.step_s + " s" + (h.first_ms ? ", since " + new Date(h.first_ms).toLocaleString() : "");
  const workers = new Set(samples.flatMap((x) => Object.keys(x.workers)));
  const perWorker = [...workers].sort().map((w) => ({ name: w, points: rates(samples, (a, b, dt) =>
    (a.workers[w] && b.workers[w]) ? (b.workers[w][0] - a.workers[w][0]) / dt : null) }));
  CrawlCharts.line($("chart-pages"), [{ name: "all", points: rates(samples, (a, b, dt) => (b.fetched - a.fetched) / dt) },
    ...perWorker], { title: "pages/s", empty });
  CrawlCharts.line($("chart-mb"), [{ name: "MB/s", points: rates(samples, (a, b, dt) => (b.bytes - a.bytes) / dt / 1e6) }],
    { title: "MB/s", empty });
  const gauge = (f) => samples.map((x) => [x.t, f(x)]);
  const has = (x) => x.queued !== null && x.queued !== undefined;
  CrawlCharts.line($("chart-urls"), [
    { name: "queued", points: gauge((x) => has(x) ? x.queued : null) },
    { name: "discovered", points: gauge((x) => has(x) ? x.fetched + x.queued + x.leased + x.pending : null) },
    { name: "fetched", points: gauge((x) => x.fetched) }], { title: "URLs", empty });
  CrawlCharts.line($("chart-hosts"), ["ready", "waiting", "leased", "backed_off"].map((k) => (
    { name: k.replace("_", " "), points: gauge((x) => x[k] === undefined ? null : x[k]) })), { title: "hosts", empty });
  CrawlCharts.line($("chart-errors"), ERROR_KINDS.map((k) => (
    { name: k, points: rates(samples, (a, b, dt) => 60 * (b[k] - a[k]) / dt) })), { title: "errors per minute", empty });
}

function statusUrl() {
  const q = new URLSearchParams();
  if (crawl) q.set("crawl", crawl);
  if (past.span) q.set("span", past.span);
  if (past.last) q.set("since", past.last);
  const text = q.toString();
  return "/api/status" + (text ? "?" + text : "");
}

async function refresh() {
  try {
    const res = await fetch(statusUrl(), { cache: "no-store" });
    const body = await res.json();
    if (res.ok) {
      banner("");
      keep(body.history);
      draw(body);
      drawHistory(body.history);
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
  if (crawl) {
    const q = "?crawl=" + encodeURIComponent(crawl);
    $("hosts-link").href = "/hosts" + q;
    $("all-hosts").href = "/hosts" + q;
  }
  $("span").addEventListener("change", () => {
    past.span = $("span").value ? Number($("span").value) : "";
    past.samples.clear();
    past.last = 0;
    refresh();
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
});
