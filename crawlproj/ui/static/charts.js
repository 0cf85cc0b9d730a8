// Line charts drawn as SVG by this app's own script: the pages' Content-
// Security-Policy allows no other, and a crawl's history needs no more than
// lines over time, a scale, and a legend with each line's last value.
// Every label goes in as text (textContent), never as markup.
"use strict";

const CrawlCharts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 640, H = 170, LEFT = 54, RIGHT = 10, TOP = 8, BOTTOM = 22;
  const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2",
                  "#edc948", "#ff9da7", "#9c755f", "#bab0ac"];

  function node(name, attrs, parent) {
    const el = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    if (parent) parent.appendChild(el);
    return el;
  }

  function text(parent, x, y, label, anchor) {
    const t = node("text", { x, y, "text-anchor": anchor || "start", class: "chart-label" }, parent);
    t.textContent = label;
    return t;
  }

  function compact(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(a >= 1 || a === 0 ? 2 : 3);
  }

  function clock(ms, span) {
    const d = new Date(ms);
    const hm = d.toLocaleTimeString("en-GB", span < 600e3
      ? { hour: "2-digit", minute: "2-digit", second: "2-digit" }
      : { hour: "2-digit", minute: "2-digit" });
    return span > 86400e3 ? d.toLocaleDateString("en-GB", { day: "numeric", month: "short" }) + " " + hm : hm;
  }

  // series: [{name, points: [[t_ms, value or null], ...]}]; a null breaks the line
  function line(container, series, opts) {
    while (container.firstChild) container.removeChild(container.firstChild);
    const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && isFinite(p[1])));
    if (all.length === 0) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = opts.empty || "no samples yet";
      container.appendChild(p);
      return;
    }
    const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
    const top = Math.max(opts.min || 0, ...all.map((p) => p[1])) || 1;
    const span = Math.max(1, t1 - t0);
    const x = (t) => LEFT + (W - LEFT - RIGHT) * (t1 === t0 ? 1 : (t - t0) / span);
    const y = (v) => TOP + (H - TOP - BOTTOM) * (1 - v / top);
    const svg = node("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img",
                              "data-points": all.length });
    const title = node("title", {}, svg);
    title.textContent = opts.title || "";
    for (const f of [0, 0.5, 1]) {
      node("line", { x1: LEFT, x2: W - RIGHT, y1: y(top * f), y2: y(top * f), class: "chart-grid" }, svg);
      text(svg, LEFT - 4, y(top * f) + 4, compact(top * f), "end");
    }
    text(svg, LEFT, H - 6, clock(t0, span), "start");
    if (t1 > t0) {
      text(svg, (LEFT + W - RIGHT) / 2, H - 6, clock(t0 + span / 2, span), "middle");
      text(svg, W - RIGHT, H - 6, clock(t1, span), "end");
    }
    const legend = document.createElement("div");
    legend.className = "legend";
    series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      let d = "", pen = false, last = null, count = 0;
      for (const [t, v] of s.points) {
        if (v === null || !isFinite(v)) { pen = false; continue; }
        d += (pen ? " L" : " M") + x(t).toFixed(1) + " " + y(v).toFixed(1);
        pen = true;
        last = v;
        count += 1;
      }
      if (count === 1) d += " h2";  // a lone sample still shows
      if (d) node("path", { d: d.trim(), stroke: color, class: "series", "data-series": s.name }, svg);
      const item = document.createElement("span");
      item.className = "legend-item";
      const swatch = document.createElement("i");
      swatch.style.background = color;
      const name = document.createElement("span");
      name.textContent = s.name + " " + compact(last);
      item.append(swatch, name);
      legend.appendChild(item);
    });
    container.append(svg, legend);
  }

  return { line, compact, COLORS };
})();
