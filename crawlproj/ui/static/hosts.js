// The hosts page: reads /api/hosts (sorted and searched by the server, the
// list may be long) every REFRESH_MS. Every value goes in as text.
"use strict";

const REFRESH_MS = 5000;
const params = new URLSearchParams(window.location.search);
const crawl = params.get("crawl") || "";
const $ = (id) => document.getElementById(id);
const view = { sort: params.get("sort") || "queue", q: params.get("q") || "" };

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function num(x) { return x === null || x === undefined ? "-" : Number(x).toLocaleString("en"); }

function wait(row, now) {
  if (row.state !== "waiting" || row.until_ms === null) return "-";
  const s = Math.max(0, (row.until_ms - now) / 1000);
  return s < 60 ? s.toFixed(1) + " s" : s < 3600 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
}

function message(text) {
  $("message").textContent = text || "";
  $("message").hidden = !text;
}

function draw(body) {
  $("crawl").textContent = body.crawl_id;
  $("count").textContent = num(body.rows.length) + " shown of " + num(body.matched) +
    (body.search ? " matching" : "") + " (" + num(body.total) + " hosts with work, failures or downloads)";
  const tbody = $("hosts").tBodies[0];
  clear(tbody);
  for (const r of body.rows) {
    const row = tbody.insertRow();
    const a = document.createElement("a");
    a.href = "/host?name=" + encodeURIComponent(r.host) + (crawl ? "&crawl=" + encodeURIComponent(crawl) : "");
    a.textContent = r.host;
    row.insertCell().appendChild(a);
    cell(row, r.state);
    cell(row, num(r.queue), "num");
    cell(row, wait(r, body.now_ms), "num");
    cell(row, r.why, "why");
    cell(row, num(r.record ? r.record.fetched : 0), "num");
    cell(row, num(r.record ? r.record.errors : 0), "num");
    cell(row, num(r.fails), "num");
    cell(row, r.robots.crawl_delay ? r.robots.crawl_delay + " s" : "-", "num");
    cell(row, r.robots.status);
  }
  if (!body.rows.length) cell(tbody.insertRow(), body.search ? "no host matches" : "no hosts yet").colSpan = 10;
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.classList.toggle("sorted", th.dataset.sort === body.sort);
  }
}

async function refresh() {
  const q = new URLSearchParams({ sort: view.sort, n: "200" });
  if (crawl) q.set("crawl", crawl);
  if (view.q) q.set("q", view.q);
  try {
    const res = await fetch("/api/hosts?" + q.toString(), { cache: "no-store" });
    const body = await res.json();
    if (res.ok) {
      message("");
      draw(body);
      $("updated").textContent = new Date().toLocaleTimeString();
    } else {
      message(body.error);
    }
  } catch (err) {
    message("The app does not answer (" + err.message + "); trying again");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if (crawl) $("dashboard-link").href = "/dashboard?crawl=" + encodeURIComponent(crawl);
  $("q").value = view.q;
  let typing = null;
  $("q").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.q = $("q").value.trim(); refresh(); }, 250);
  });
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => { view.sort = th.dataset.sort; refresh(); });
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
});
