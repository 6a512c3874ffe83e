"""The site's style sheet and its one script, written to ``DIR/assets/``.

The script is small and hand-written: no library, no network. On a suite's page it draws each
case's trend as inline SVG from the page's own JSON (``<script type="application/json">``, which
works from disk where ``fetch`` of a local file does not), filters the cases by name, and
compares two runs picked in the page. On the index it filters the runs. It builds every element
with ``textContent`` and attributes, never ``innerHTML``: a name from a suite stays text."""

from __future__ import annotations

SITE_CSS = """
nav.site { font-size: 13px; margin: 0 0 10px; padding: 6px 0; border-bottom: 1px solid var(--line); }
nav.site a { margin-right: 14px; }
input.filter { font: inherit; padding: 3px 6px; width: 320px; margin: 6px 0; }
.tabs button { font: inherit; padding: 3px 10px; margin: 0 4px 4px 0; border: 1px solid var(--line);
               background: #f6f6f6; border-radius: 4px; cursor: pointer; }
.tabs button.on { background: #1d1d1f; color: #fff; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; }
figure.trend { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px 6px; }
figure.trend figcaption { font-size: 13px; font-weight: 600; overflow-wrap: anywhere; }
figure.trend figcaption span { font-weight: 400; }
figure.trend svg { width: 100%; height: auto; display: block; }
svg text { font: 10px system-ui, sans-serif; fill: #555; }
svg .axis { stroke: #bbb; stroke-width: 1; }
svg .line { fill: none; stroke: #1f6feb; stroke-width: 1.3; }
svg .range { stroke: #9cbcf0; stroke-width: 1; }
svg a.pt circle { fill: #1f6feb; }
svg a.pt:hover circle { fill: #b3261e; }
svg line.step { stroke: #b3261e; stroke-dasharray: 4 3; }
svg line.step.good { stroke: #107a3e; }
svg text.step { fill: #b3261e; }
svg text.step.good { fill: #107a3e; }
td.steps { white-space: normal; text-align: left; max-width: 520px; font-size: 12px; }
td.msg { white-space: normal; text-align: left; max-width: 320px; font-size: 12px; color: var(--muted); }
.tag { background: #eef; border-radius: 3px; padding: 0 4px; margin-right: 3px; font-size: 12px; }
select { font: inherit; max-width: 420px; }
.note { color: var(--muted); font-size: 12px; }
"""

SITE_JS = r"""
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) {
    if (!isFinite(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString("en");
    return Number(v.toPrecision(3)).toString();
  }
  function matches(label, query) {
    return !query || label.toLowerCase().indexOf(query.toLowerCase()) >= 0;
  }
  function hashParams() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var i = part.indexOf("=");
      if (i > 0) out[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1));
    });
    return out;
  }
  function setHash(params) {
    var parts = [];
    for (var k in params) if (params[k]) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(params[k]));
    try {
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
    } catch (e) { /* a browser that refuses it on a page from disk: the link just keeps no state */ }
  }

  // ---- the index: filter the runs ---------------------------------------------------------
  function indexPage() {
    var input = document.getElementById("filter-runs");
    if (!input) return;
    var rows = document.querySelectorAll("tr.run");
    function apply() {
      var shown = 0;
      rows.forEach(function (row) {
        var ok = matches(row.getAttribute("data-search") || "", input.value);
        row.hidden = !ok;
        if (ok) shown++;
      });
      document.getElementById("shown-runs").textContent = String(shown);
    }
    input.addEventListener("input", apply);
    apply();
  }

  // ---- a suite's page: trends, filter, comparison -----------------------------------------
  function chart(data, s) {
    var W = 540, H = 210, L = 52, R = 10, T = 10, B = 26;
    var runs = data.runs, n = runs.length;
    var ys = s.y.slice();
    if (s.lo) ys = ys.concat(s.lo, s.hi);
    var lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys);
    if (!(hi > lo)) { lo = lo * 0.95; hi = hi * 1.05 + 1e-9; }
    var pad = (hi - lo) * 0.08; lo = Math.max(0, lo - pad); hi = hi + pad;
    var xmin = s.x[0], xmax = s.x[s.x.length - 1];
    function X(i) { return xmax > xmin ? L + (i - xmin) / (xmax - xmin) * (W - L - R) : (L + W - R) / 2; }
    function Y(v) { return T + (hi - v) / (hi - lo) * (H - T - B); }
    var svg = svgEl("svg", {viewBox: "0 0 " + W + " " + H, role: "img"});
    svg.appendChild(svgEl("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, "class": "axis"}));
    svg.appendChild(svgEl("line", {x1: L, y1: T, x2: L, y2: H - B, "class": "axis"}));
    for (var k = 0; k <= 3; k++) {
      var v = lo + (hi - lo) * k / 3;
      svg.appendChild(svgEl("text", {x: L - 4, y: Y(v) + 3, "text-anchor": "end"}, fmt(v)));
    }
    var every = Math.max(1, Math.ceil(s.x.length / 8));
    s.x.forEach(function (i, j) {
      if (j % every === 0 || j === s.x.length - 1)
        svg.appendChild(svgEl("text", {x: X(i), y: H - B + 12,
          "text-anchor": j === s.x.length - 1 ? "end" : j === 0 ? "start" : "middle"}, String(runs[i].id)));
    });
    svg.appendChild(svgEl("text", {x: L, y: H - 2}, "run"));
    svg.appendChild(svgEl("text", {x: 2, y: T + 8}, s.unit));
    var pts = s.x.map(function (i, j) { return X(i).toFixed(1) + "," + Y(s.y[j]).toFixed(1); });
    svg.appendChild(svgEl("polyline", {points: pts.join(" "), "class": "line"}));
    (s.steps || []).forEach(function (st) {
      var j = st.index, x = (X(s.x[j - 1]) + X(s.x[j])) / 2;
      var cls = st.verdict === "slower" ? "step" : "step good";
      svg.appendChild(svgEl("line", {x1: x, y1: T, x2: x, y2: H - B, "class": cls}));
      var right = x > W * 0.6;
      svg.appendChild(svgEl("text", {x: right ? x - 3 : x + 3, y: T + 9, "class": cls,
                                     "text-anchor": right ? "end" : "start"}, st.short));
    });
    var r = s.x.length > 300 ? 1.6 : 2.6;
    s.x.forEach(function (i, j) {
      if (s.lo && s.hi[j] > s.lo[j])
        svg.appendChild(svgEl("line", {x1: X(i), x2: X(i), y1: Y(s.lo[j]), y2: Y(s.hi[j]), "class": "range"}));
      var run = runs[i];
      var a = svgEl("a", {href: run.page, "class": "pt", "data-run": String(run.id)});
      a.setAttributeNS("http://www.w3.org/1999/xlink", "href", run.page);
      var c = svgEl("circle", {cx: X(i).toFixed(1), cy: Y(s.y[j]).toFixed(1), r: r});
      c.appendChild(svgEl("title", {}, "run " + run.id + " · " + run.rev + " · " + run.when + "\n" + fmt(s.y[j]) + " " + s.unit));
      a.appendChild(c);
      svg.appendChild(a);
    });
    return svg;
  }

  function suitePage() {
    var node = document.getElementById("site-data");
    if (!node) return;
    var data = JSON.parse(node.textContent);
    var params = hashParams();
    var metric = params.m || (data.metrics[0] && data.metrics[0].name);
    var input = document.getElementById("filter-cases");
    input.value = params.case || "";
    var tabs = document.getElementById("metric-tabs");
    var charts = document.getElementById("charts");
    var count = document.getElementById("shown-cases");

    function draw() {
      tabs.querySelectorAll("button").forEach(function (b) {
        b.className = b.getAttribute("data-metric") === metric ? "on" : "";
      });
      while (charts.firstChild) charts.removeChild(charts.firstChild);
      var shown = 0;
      data.series.forEach(function (s) {
        if (s.metric !== metric || !matches(s.case, input.value)) return;
        shown++;
        var fig = el("figure", {"class": "trend", "data-case": s.case, "data-metric": s.metric});
        var cap = el("figcaption", {}, s.case + " ");
        cap.appendChild(el("span", {}, s.note));
        fig.appendChild(cap);
        fig.appendChild(chart(data, s));
        charts.appendChild(fig);
      });
      count.textContent = String(shown);
      setHash({m: metric, "case": input.value});
    }
    data.metrics.forEach(function (m) {
      var b = el("button", {type: "button", "data-metric": m.name}, m.label);
      b.addEventListener("click", function () { metric = m.name; draw(); });
      tabs.appendChild(b);
    });
    input.addEventListener("input", draw);
    draw();
    comparePicker(data);
  }

  function comparePicker(data) {
    var a = document.getElementById("compare-a"), b = document.getElementById("compare-b");
    var out = document.getElementById("compare-out");
    if (!a || data.runs.length < 2) return;
    for (var i = data.runs.length - 1; i >= 0; i--) {
      var run = data.runs[i];
      var label = "run " + run.id + " · " + run.when + " · " + run.rev + (run.tags.length ? " · " + run.tags.join(", ") : "");
      a.appendChild(el("option", {value: String(i)}, label));
      b.appendChild(el("option", {value: String(i)}, label));
    }
    a.value = String(data.runs.length - 2);
    b.value = String(data.runs.length - 1);
    function show() {
      while (out.firstChild) out.removeChild(out.firstChild);
      var ia = Number(a.value), ib = Number(b.value);
      var ra = data.runs[ia], rb = data.runs[ib];
      var key = ra.id + "-" + rb.id;
      var head = el("p");
      if (data.compared[key]) {
        head.appendChild(document.createTextNode("Intervals and verdicts: "));
        head.appendChild(el("a", {href: data.compared[key], id: "compare-link"}, "run " + rb.id + " against run " + ra.id));
      } else {
        head.appendChild(el("span", {"class": "note"},
          "No page with intervals and verdicts for this pair (consecutive runs and tagged runs have one): " +
          "rpcmeter compare " + ra.id + " " + rb.id + " computes them."));
      }
      out.appendChild(head);
      var table = el("table", {id: "compare-table"});
      var tr = el("tr");
      tr.appendChild(el("th", {"class": "l"}, "case"));
      data.metrics.forEach(function (m) { tr.appendChild(el("th", {}, m.label + " B/A")); });
      table.appendChild(tr);
      var byCase = {};
      var order = [];
      data.series.forEach(function (s) {
        if (!matches(s.case, document.getElementById("filter-cases").value)) return;
        var ja = s.x.indexOf(ia), jb = s.x.indexOf(ib);
        if (ja < 0 || jb < 0) return;
        if (!byCase[s.case]) { byCase[s.case] = {}; order.push(s.case); }
        byCase[s.case][s.metric] = {ratio: s.y[jb] / s.y[ja], higher: s.higher};
      });
      order.forEach(function (c) {
        var row = el("tr");
        row.appendChild(el("td", {"class": "l"}, c));
        data.metrics.forEach(function (m) {
          var v = byCase[c][m.name];
          var td = el("td", {}, v ? v.ratio.toFixed(2) + "x" : "");
          if (v && Math.abs(v.ratio - 1) > 0.05)
            td.className = ((v.ratio > 1) !== v.higher) ? "slower" : "faster";
          row.appendChild(td);
        });
        table.appendChild(row);
      });
      out.appendChild(table);
      out.appendChild(el("p", {"class": "note"},
        "Ratios of run B's means to run A's, from this page's data; colored beyond 5 %, not tested."));
    }
    a.addEventListener("change", show);
    b.addEventListener("change", show);
    document.getElementById("filter-cases").addEventListener("input", show);
    show();
  }

  document.addEventListener("DOMContentLoaded", function () { indexPage(); suitePage(); });
})();
"""
