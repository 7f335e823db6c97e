// kernstat view: the page over /api/*. Every value from the archive is put in the page
// as text (textContent), never as markup: a process may name itself anything.
// The URL holds the state (token, from, to, t, hist, archive, cmp_a, cmp_b), so a view
// can be shared and a test can open one: a click on a chart sets t, a selection sets
// from and to, "this range as A/B" sets cmp_a/cmp_b (from,to,archive).
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token") || "";
// archive: "a" (--archive) or "b" (--compare); a and b: the marked ranges, [from, to, archive].
const state = { span: null, archive: params.get("archive") === "b" ? "b" : "a", from: 0, to: 0, t: null, a: null, b: null, loaded: {} };
const charts = [];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

async function api(path, q) {
  const u = new URLSearchParams(q || {});
  u.set("token", token);
  if (state.archive !== "a" && !u.has("a_archive")) u.set("archive", state.archive);
  const r = await fetch(`/api/${path}?${u}`);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function status(text) { document.getElementById("status").textContent = text; }

function stamp(s) {
  const d = new Date(s * 1000);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function publish() {
  // What the page shows, for tests and scripts (read with --dump-dom).
  document.getElementById("state").textContent = JSON.stringify(state.loaded);
}

function setUrl() {
  params.set("from", state.from.toFixed(3));
  params.set("to", state.to.toFixed(3));
  if (state.t !== null) params.set("t", state.t.toFixed(3)); else params.delete("t");
  history.replaceState(null, "", `?${params}`);
}

const GROUPS = [
  { title: "CPU", names: ["cpu", "psi_cpu"], unit: "%", why: "cpu" },
  { title: "Memory", names: ["mem", "psi_mem"], unit: "%", why: "memory" },
  { title: "Storage", names: ["disk_util", "psi_io"], unit: "%", why: "io" },
  { title: "Network", names: ["net_rx", "net_tx"], unit: "B/s", why: "network" },
  { title: "Load and processes", names: ["load1", "procs", "ended"], unit: "", why: "" },
];
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df"];

function bytes(v) {
  if (v == null) return "";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
  return `${v.toFixed(v < 10 && i > 0 ? 1 : 0)} ${u[i]}`;
}

async function loadSeries() {
  const width = Math.max(300, Math.min(4000, document.getElementById("charts").clientWidth || 1200));
  status("reading the archive…");
  const t0 = performance.now();
  const s = await api("series", { from: state.from, to: state.to, points: width });
  const byName = Object.fromEntries(s.series.map((x) => [x.name, x]));
  const host = document.getElementById("charts");
  host.replaceChildren();
  charts.length = 0;
  for (const g of GROUPS) {
    const div = el("div", { class: "chart", id: `chart-${g.why || "load"}` });
    host.append(div);
    const data = [s.t];
    const series = [{}];
    g.names.forEach((n, i) => {
      const x = byName[n];
      data.push(x.max);
      series.push({
        label: `${x.label} (largest)`,
        stroke: COLORS[i % COLORS.length],
        width: 1,
        spanGaps: false,
        value: (u, v) => (v == null ? "" : x.unit === "B/s" ? `${bytes(v)}/s` : `${v.toFixed(1)} ${x.unit}`),
      });
    });
    const opts = {
      title: g.title,
      width: div.clientWidth || 1200,
      height: 150,
      series,
      axes: [{}, { values: (u, vals) => vals.map((v) => (g.unit === "B/s" ? bytes(v) : v)) }],
      cursor: { drag: { x: true, y: false } },
      hooks: {
        setSelect: [(u) => {
          if (u.select.width < 3) return;
          const a = u.posToVal(u.select.left, "x");
          const b = u.posToVal(u.select.left + u.select.width, "x");
          state.from = a; state.to = b; refresh();
        }],
      },
    };
    const plot = new uPlot(opts, data, div);
    div.addEventListener("click", () => {
      const i = plot.cursor.idx;
      if (i != null) openMoment(s.t[i]);
    });
    charts.push(plot);
  }
  // The peak of CPU in the range, for tests and for the eye.
  const cpu = byName.cpu.max;
  let peak = null;
  cpu.forEach((v, i) => { if (v != null && (peak === null || v > cpu[peak])) peak = i; });
  state.loaded.series = {
    frames: s.frames,
    points: s.t.length,
    cpu_peak_time: peak === null ? null : s.t[peak],
    cpu_peak: peak === null ? null : cpu[peak],
    ms: Math.round(performance.now() - t0),
  };
  status(`${s.frames} frames in ${state.loaded.series.ms} ms`);
  publish();
}

async function loadHeatmap() {
  const hist = document.getElementById("hist").value;
  const canvas = document.getElementById("heatmap");
  const frames = (state.loaded.series && state.loaded.series.frames) || canvas.width;
  const h = await api("heatmap", { from: state.from, to: state.to, points: Math.max(1, Math.min(canvas.width, frames)), hist });
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const cols = h.counts.length;
  const rows = h.slots_us.length;
  let most = 0;
  for (const c of h.counts) for (const v of c) most = Math.max(most, v);
  if (rows > 0 && most > 0) {
    const cw = canvas.width / cols;
    const rh = canvas.height / rows;
    h.counts.forEach((c, x) => c.forEach((v, y) => {
      if (!v) return;
      const shade = Math.log1p(v) / Math.log1p(most);
      ctx.fillStyle = `rgba(207, 34, 46, ${0.1 + 0.9 * shade})`;
      ctx.fillRect(x * cw, canvas.height - (y + 1) * rh, Math.max(1, cw), rh);
    }));
  }
  document.getElementById("heat-total").textContent =
    h.total ? `${h.total} events; slots from 0 to ${h.slots_us[rows - 1] || 0} µs` : "not recorded in this range (daemon --collect)";
  state.loaded.heatmap = { hist, total: h.total, slots: rows };
  publish();
}

const COLUMNS = [
  ["pid", "PID", (r) => r.pid],
  ["user", "USER", (r) => r.user, true],
  ["state", "S", (r) => r.state, true],
  ["cpu_percent", "CPU%", (r) => r.cpu_percent.toFixed(1)],
  ["rss_bytes", "RSS", (r) => bytes(r.rss_bytes)],
  ["read_bps", "READ/s", (r) => bytes(r.read_bps)],
  ["write_bps", "WRITE/s", (r) => bytes(r.write_bps)],
  ["comm", "COMMAND", (r) => r.cmd || r.comm, true],
  ["cgroup", "GROUP", (r) => r.cgroup, true],
];
let momentRows = [];
let sortKey = "cpu_percent";
let sortDown = true;

function drawProcs() {
  const filter = document.getElementById("filter").value.toLowerCase();
  const rows = momentRows
    .filter((r) => !filter || `${r.comm} ${r.cmd} ${r.user}`.toLowerCase().includes(filter))
    .sort((a, b) => {
      const x = a[sortKey], y = b[sortKey];
      const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return sortDown ? -c : c;
    });
  const head = el("tr", {}, ...COLUMNS.map(([k, name, , text]) => {
    const th = el("th", { class: text ? "text" : "" }, name + (k === sortKey ? (sortDown ? " ▼" : " ▲") : ""));
    th.addEventListener("click", () => { sortDown = k === sortKey ? !sortDown : true; sortKey = k; drawProcs(); });
    return th;
  }));
  const body = rows.slice(0, 500).map((r) => el("tr", { class: r.state === "X" ? "ended" : "" },
    ...COLUMNS.map(([, , f, text]) => el("td", { class: text ? "text" : "" }, f(r)))));
  document.getElementById("procs").replaceChildren(head, ...body);
}

async function openMoment(t) {
  state.t = t;
  setUrl();
  const m = await api("moment", { t });
  momentRows = m.rows;
  document.getElementById("moment-time").textContent =
    `${stamp(m.time_unix_ns / 1e9)} (rates over the ${m.interval_s.toFixed(1)} s before it)`;
  document.getElementById("moment-command").textContent = m.command;
  drawProcs();
  const gh = el("tr", {}, ...["GROUP", "CPU%", "THROTTLED%", "MEMORY", "CPU PRESSURE%"].map((n, i) => el("th", { class: i ? "" : "text" }, n)));
  const gb = m.groups.slice(0, 200).map((g) => el("tr", {},
    el("td", { class: "text" }, g.path),
    el("td", {}, g.cpu_percent.toFixed(1)),
    el("td", {}, g.throttled_percent == null ? "" : g.throttled_percent.toFixed(1)),
    el("td", {}, g.memory ? bytes(g.memory.current) : ""),
    el("td", {}, g.stall_percent[0] == null ? "" : g.stall_percent[0].toFixed(1))));
  document.getElementById("groups").replaceChildren(gh, ...gb);
  const top = [...m.rows].sort((a, b) => b.cpu_percent - a.cpu_percent)[0];
  state.loaded.moment = {
    time: m.time_unix_ns / 1e9,
    rows: m.rows.length,
    ended: m.rows.filter((r) => r.state === "X").map((r) => ({ pid: r.pid, comm: r.comm })),
    top_cpu: top ? { pid: top.pid, comm: top.comm, cpu_percent: top.cpu_percent } : null,
    groups: m.groups.length,
  };
  publish();
}

async function runWhy() {
  const r = await api("why", { from: state.from, to: state.to });
  const list = document.getElementById("findings");
  const shown = r.findings.filter((f, i) => f.notable || i === 0);
  list.replaceChildren(...shown.map((f) => {
    const chart = document.getElementById(`chart-${f.resource}`);
    const li = el("li", { class: f.notable ? "notable" : "quiet" },
      `[${f.resource}] ${f.verdict} (score ${f.score.toFixed(2)})`);
    const who = (ps) => ps.slice(0, 3).map((p) => `${p.pid ?? p.cgroup} ${p.comm} (${Math.round(p.share * 100)} %)`).join(", ");
    if (f.culprits.length) li.append(el("div", {}, `culprits: ${who(f.culprits)}`));
    if (f.victims.length) li.append(el("div", {}, `victims: ${who(f.victims)}`));
    for (const e of f.evidence) li.append(el("div", { class: "hint" }, e.what));
    li.append(el("div", {}, el("code", {}, f.next)));
    if (chart) {
      const a = el("a", { href: "#" }, "show the chart");
      a.addEventListener("click", (ev) => { ev.preventDefault(); chart.scrollIntoView(); });
      li.append(a);
    }
    return li;
  }));
  if (!r.findings.some((f) => f.notable)) list.prepend(el("li", { class: "quiet" }, "Nothing notable in this range."));
  state.loaded.why = r.findings.map((f) => ({ resource: f.resource, score: f.score, notable: f.notable, culprits: f.culprits.map((p) => p.pid) }));
  publish();
}

function mark(which) {
  state[which] = [state.from, state.to, state.archive];
  params.set(`cmp_${which}`, `${state.from.toFixed(3)},${state.to.toFixed(3)},${state.archive}`);
  setUrl();
  runCompare();
}

function marked(which) {
  const v = (params.get(`cmp_${which}`) || "").split(",");
  if (v.length !== 3 || !["a", "b"].includes(v[2])) return null;
  const [from, to] = [parseFloat(v[0]), parseFloat(v[1])];
  return Number.isFinite(from) && Number.isFinite(to) ? [from, to, v[2]] : null;
}

async function runCompare() {
  if (!state.a || !state.b) return;
  const r = await api("compare", {
    a_from: state.a[0], a_to: state.a[1], a_archive: state.a[2],
    b_from: state.b[0], b_to: state.b[1], b_archive: state.b[2],
  });
  const f = (v) => (v == null ? "" : Math.abs(v) >= 1000 ? bytes(v) : v.toFixed(2));
  const two = (state.span_archives || []).length > 1;
  const label = (k, w) => `${k} ${two ? `(archive ${w[2]}) ` : ""}${stamp(w[0])}…`;
  const head = el("tr", {}, el("th", { class: "text" }, "mean of"),
    el("th", {}, label("A", state.a)), el("th", {}, label("B", state.b)), el("th", {}, "B − A"));
  const rows = r.means.map((m) => el("tr", {}, el("td", { class: "text" }, m.name), el("td", {}, f(m.a)), el("td", {}, f(m.b)), el("td", {}, f(m.difference))));
  document.getElementById("compare-table").replaceChildren(head, ...rows);
  state.loaded.compare = r.means;
  state.loaded.compare_windows = { a: r.a, b: r.b };
  publish();
}

async function refresh() {
  setUrl();
  document.getElementById("range").textContent = `${stamp(state.from)} — ${stamp(state.to)}`;
  try {
    await loadSeries();
    await loadHeatmap();
    // why reads every frame of the range again: asked at once up to an hour, else
    // when the button is pressed.
    if (params.get("why") !== "0" && state.to - state.from <= 3600) await runWhy();
    else document.getElementById("findings").replaceChildren(el("li", { class: "quiet" }, "Press rank to rank this range."));
    if (state.t !== null) await openMoment(state.t);
  } catch (e) {
    status(`error: ${e.message}`);
    state.loaded.error = e.message;
    publish();
  }
  document.body.dataset.ready = "1";
}

// follow=1 (kernstat view --live): the range moves to each frame the recorder adds,
// keeping its width, while it ends at the newest frame (a range moved into the past
// stays). The server holds each /api/span?after=T until a newer frame is there.
// follow_max=N stops after N moves (a test's page must end).
async function follow() {
  const most = parseInt(params.get("follow_max") || "0", 10);
  let moved = 0;
  while (!most || moved < most) {
    let span;
    try {
      span = await api("span", { after: state.span[1] });
    } catch (e) {
      status(`error: ${e.message}`);
      await new Promise((r) => setTimeout(r, 5000));
      continue;
    }
    const last = span.last_unix_ns / 1e9;
    if (last <= state.span[1] + 0.001) continue;
    const atEnd = state.to >= state.span[1] - 0.001;
    const width = state.to - state.from;
    state.span = [span.first_unix_ns / 1e9, last];
    state.loaded.span = state.span;
    if (!atEnd) continue;
    state.to = last;
    state.from = Math.max(state.span[0], last - width);
    setUrl();
    document.getElementById("range").textContent = `${stamp(state.from)} — ${stamp(state.to)}`;
    await loadSeries();
    await loadHeatmap();
    moved += 1;
    state.loaded.follow = { moved, to: state.to };
    publish();
  }
}

async function main() {
  try {
    const span = await api("span");
    state.span = [span.first_unix_ns / 1e9, span.last_unix_ns / 1e9];
    document.getElementById("archive").textContent = span.archive;
    state.span_archives = span.archives;
    if (span.archives.length > 1) {
      // Two archives (--compare): switch between them; the page opens on the other
      // one's last hour, its marks kept.
      const pick = el("select", { id: "archive-pick", "aria-label": "archive" });
      span.archives.forEach((dir, i) => pick.append(el("option", { value: "ab"[i] }, `${"ab"[i]}: ${dir}`)));
      pick.value = state.archive;
      pick.addEventListener("change", () => {
        params.set("archive", pick.value);
        for (const k of ["from", "to", "t"]) params.delete(k);
        location.search = params.toString();
      });
      document.getElementById("archive").replaceChildren(pick);
    }
    state.a = marked("a");
    state.b = marked("b");
    state.loaded.archive = state.archive;
    const sel = document.getElementById("hist");
    for (const h of span.hists) sel.append(el("option", { value: h }, h));
    if (params.get("hist")) sel.value = params.get("hist");
    sel.addEventListener("change", () => { params.set("hist", sel.value); setUrl(); loadHeatmap(); });
    state.to = parseFloat(params.get("to")) || state.span[1];
    state.from = parseFloat(params.get("from")) || Math.max(state.span[0], state.to - 3600);
    state.t = params.get("t") ? parseFloat(params.get("t")) : null;
    state.loaded.span = state.span;
  } catch (e) {
    status(`error: ${e.message}`);
    state.loaded.error = e.message;
    publish();
    document.body.dataset.ready = "1";
    return;
  }
  for (const b of document.querySelectorAll("#ranges button")) {
    b.addEventListener("click", () => {
      const r = parseFloat(b.dataset.range);
      state.to = state.span[1];
      state.from = r ? Math.max(state.span[0], state.to - r) : state.span[0];
      refresh();
    });
  }
  document.getElementById("why-run").addEventListener("click", runWhy);
  document.getElementById("filter").addEventListener("input", drawProcs);
  document.getElementById("set-a").addEventListener("click", () => mark("a"));
  document.getElementById("set-b").addEventListener("click", () => mark("b"));
  await refresh();
  try {
    await runCompare();
  } catch (e) {
    status(`error: ${e.message}`);
    state.loaded.error = e.message;
    publish();
  }
  if (params.get("follow") === "1") await follow();
}

main();
