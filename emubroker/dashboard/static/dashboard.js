// emubroker dashboard: polls the JSON state beside the page and draws it (SVG, no library).
// Live: GET api/state every second. Replay (`emubroker dashboard RUN_DIR`): the same state at a
// moment of the run, GET api/state?t=SECONDS, moved by the slider or by play.
"use strict";

const API = "/dashboard/api/state";
const POLL_MS = 1000;
const HISTORY_SECONDS = 60;
const SVG_NS = "http://www.w3.org/2000/svg";
const HASH_SPACE = 4294967296; // 2^32: bundle bounds are 32-bit hashes
const PALETTE = ["#2f6fdf", "#e07b00", "#2e9d5b", "#a23fbf", "#d6336c", "#00838f", "#6d4c41", "#5c6bc0"];

const $ = (id) => document.getElementById(id);
const el = (tag, attrs, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
};
const svg = (tag, attrs) => {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
};

const colours = new Map(); // broker id -> colour, stable for the page's life
function colourOf(broker) {
  if (!broker) return "var(--unowned)";
  if (!colours.has(broker)) colours.set(broker, PALETTE[colours.size % PALETTE.length]);
  return colours.get(broker);
}
function shortName(broker) {
  const index = [...colours.keys()].indexOf(broker);
  return index < 0 ? "?" : `b${index}`;
}

function fmt(value, digits = 1) {
  if (value === null || value === undefined || value < 0) return "–";
  if (Math.abs(value) >= 1e6) return (value / 1e6).toFixed(digits) + "M";
  if (Math.abs(value) >= 1e4) return (value / 1e3).toFixed(digits) + "k";
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}
function hex(n) { return "0x" + n.toString(16).padStart(8, "0"); }

// ---- state kept between polls -------------------------------------------------------------------
const history = new Map(); // "topic|subscription" -> [[at_ms, rateOut, limit]]
let replay = null; // {start_ms, end_ms} of a recorded run
let playing = null; // interval id while playing

// ---- brokers ------------------------------------------------------------------------------------
function meter(label, percent) {
  const width = Math.max(0, Math.min(100, percent));
  return el("div", { class: "meter" },
    el("span", {}, label),
    el("div", { class: "bar" }, el("div", { class: "fill" + (percent >= 85 ? " hot" : ""), style: `width:${width}%` })),
    el("span", { class: "num" }, percent < 0 ? "–" : percent.toFixed(1) + "%"));
}
function fact(label, value) { return el("div", {}, el("span", {}, label), el("b", {}, value)); }

function drawBrokers(state) {
  const root = $("brokers");
  root.replaceChildren();
  for (const broker of state.brokers) {
    const load = broker.load;
    const card = el("article", {
      class: "broker" + (broker.reachable ? "" : " unreachable"),
      style: `--c:${colourOf(broker.id)}`,
      "data-broker": broker.id,
      "data-leader": String(broker.leader),
    },
      el("header", {},
        el("span", { class: "id" }, broker.id),
        el("span", { class: "badge" }, shortName(broker.id)),
        broker.leader ? el("span", { class: "badge leader" }, "leader") : null,
        broker.id === state.self ? el("span", { class: "badge self" }, "this broker") : null,
        broker.reachable ? null : el("span", { class: "badge down" }, "unreachable")));
    if (load) {
      card.append(
        meter("CPU", load.cpu), meter("memory", load.memory), meter("direct mem.", load.directMemory),
        meter("bandwidth in", load.bandwidthIn), meter("bandwidth out", load.bandwidthOut),
        el("div", { class: "facts" },
          fact("msg/s in", fmt(load.msgRateIn)), fact("msg/s out", fmt(load.msgRateOut)),
          fact("KB/s in", fmt(load.throughputIn / 1024)), fact("KB/s out", fmt(load.throughputOut / 1024)),
          fact("bundles", fmt(load.bundles)), fact("topics", fmt(load.topics)),
          fact("producers", fmt(load.producers)), fact("consumers", fmt(load.consumers)),
          fact("weighted max", load.weightedMaxUsage < 0 ? "–" : (load.weightedMaxUsage * 100).toFixed(1) + "%")));
    } else {
      card.append(el("div", { class: "empty" }, "no load report yet"));
    }
    root.append(card);
  }
  if (!state.brokers.length) root.append(el("div", { class: "empty" }, "no broker registered"));
}

// ---- bundle ownership ---------------------------------------------------------------------------
function drawLegend(state) {
  const owners = state.brokers.map((b) => b.id);
  $("legend").replaceChildren(
    ...owners.map((id) => el("span", {}, el("i", { style: `background:${colourOf(id)}` }), `${shortName(id)} ${id}`)),
    el("span", {}, el("i", { style: "background:var(--unowned)" }), "not owned"));
}

// One SVG per namespace; rects are keyed by bundle and updated in place so that a new owner
// fades its colour in (CSS transition, with a flash of the outline), and bundles that appear
// later (a split's children) fade in where their parent was.
const bars = new Map(); // namespace -> {svg, rects: Map(bundle -> {rect, text})}
function drawNamespaces(state) {
  const root = $("namespaces");
  const seen = new Set();
  for (const ns of state.namespaces) {
    seen.add(ns.name);
    let bar = bars.get(ns.name);
    if (!bar) {
      // Percent coordinates: the bar stretches to its panel without stretching its labels.
      const image = svg("svg", { class: "bar", "data-namespace": ns.name });
      for (const [i, frac] of [[0, 0], [1, 0.25], [2, 0.5], [3, 0.75], [4, 1]]) {
        const tick = svg("text", { class: "tick", x: `${frac * 100}%`, y: "54", "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" });
        tick.textContent = hex(Math.min(HASH_SPACE - 1, frac * HASH_SPACE));
        image.append(tick);
      }
      const block = el("div", { class: "namespace" }, el("div", { class: "name" }, ns.name), image);
      root.append(block);
      bar = { svg: image, block, rects: new Map() };
      bars.set(ns.name, bar);
    }
    const live = new Set();
    for (const b of ns.bundles) {
      live.add(b.bundle);
      const x = (b.lower / HASH_SPACE) * 100;
      const width = Math.max(0.1, ((b.upper - b.lower) / HASH_SPACE) * 100);
      let entry = bar.rects.get(b.bundle);
      if (!entry) {
        const rect = svg("rect", { class: "bundle", x: `${x}%`, y: "2", width: `${width}%`, height: "38" });
        if (bar.drawn) {
          rect.style.opacity = "0";
          requestAnimationFrame(() => requestAnimationFrame(() => { rect.style.opacity = ""; }));
        }
        const title = svg("title", {});
        rect.append(title);
        const text = svg("text", { y: "26", "text-anchor": "middle" });
        bar.svg.append(rect, text);
        entry = { rect, text, title, owner: undefined };
        bar.rects.set(b.bundle, entry);
      }
      const { rect, text, title } = entry;
      rect.setAttribute("x", `${x}%`);
      rect.setAttribute("width", `${width}%`);
      rect.setAttribute("data-bundle", b.bundle);
      rect.setAttribute("data-owner", b.owner || "");
      rect.classList.toggle("unowned", !b.owner);
      rect.style.fill = b.owner ? colourOf(b.owner) : "";
      if (entry.owner !== undefined && entry.owner !== b.owner) {
        rect.classList.add("flash");
        setTimeout(() => rect.classList.remove("flash"), 1500);
      }
      entry.owner = b.owner;
      title.textContent = `${b.range}\nowner: ${b.owner || "none"}`;
      text.setAttribute("x", `${x + width / 2}%`);
      text.textContent = width > 3.4 ? (b.owner ? shortName(b.owner) : "–") : "";
    }
    bar.drawn = true;
    for (const [name, entry] of bar.rects) {
      if (!live.has(name)) {
        entry.rect.remove();
        entry.text.remove();
        bar.rects.delete(name);
      }
    }
  }
  for (const [name, bar] of bars) {
    if (!seen.has(name)) { bar.block.remove(); bars.delete(name); }
  }
  if (!state.namespaces.length && !root.querySelector(".empty")) {
    root.append(el("div", { class: "empty" }, "no namespace yet"));
  } else if (state.namespaces.length) {
    root.querySelectorAll(".empty").forEach((n) => n.remove());
  }
}

// ---- timeline -----------------------------------------------------------------------------------
function when(atMs, state) {
  if (replay) return "+" + ((atMs - replay.start_ms) / 1000).toFixed(1) + " s";
  return new Date(atMs).toLocaleTimeString([], { hour12: false });
}
function numbers(d) {
  const n = d.numbers || {};
  const parts = [];
  const unit = n.offload_unit ? " " + n.offload_unit : "";
  if ("broker_load" in n) parts.push(`load ${fmt(n.broker_load, 3)}`);
  if ("cluster_load" in n) parts.push(`vs ${fmt(n.cluster_load, 3)}`);
  if ("threshold" in n) parts.push(`threshold ${fmt(n.threshold, 3)}`);
  if ("dest_load" in n) parts.push(`dest ${fmt(n.dest_load, 3)}`);
  if ("to_offload" in n) parts.push(`offload ${fmt(n.to_offload, 2)}${unit}`);
  if ("bundle_msg_rate" in n) parts.push(`bundle ${fmt(n.bundle_msg_rate)} msg/s`);
  if ("bundle_topics" in n) parts.push(`${n.bundle_topics} topics`);
  if ("candidates" in n) parts.push(`${n.candidates} candidates`);
  if ("duration_ms" in n) parts.push(`${fmt(n.duration_ms)} ms`);
  if (n.split_children) parts.push(`→ ${n.split_children.split(",").map((c) => c.split("/").pop()).join(", ")}`);
  return parts.join(" · ");
}
function drawTimeline(state) {
  const root = $("timeline");
  root.replaceChildren();
  const now = state.now_ms;
  // Newest first; a replay then lists the next few decisions, greyed, oldest first.
  const past = state.decisions.filter((d) => d.at_ms <= now).reverse();
  const next = state.decisions.filter((d) => d.at_ms > now).slice(0, 5);
  const rows = [...past, ...next];
  for (const d of rows) {
    if (d === next[0]) root.append(el("li", { class: "divider" }, "coming next"));
    const move = d.event === "placement" ? `→ ${d.dest}` : d.dest ? `${d.source} → ${d.dest}` : d.source;
    const li = el("li", {
      class: (d.at_ms > now ? "future" : now - d.at_ms <= (replay ? 10000 : 5000) ? "recent" : ""),
      "data-event": d.event, "data-bundle": d.bundle, "data-at": String(d.at_ms),
    },
      el("div", {},
        el("span", { class: "when" }, when(d.at_ms, state)),
        el("span", { class: "ev " + d.event }, d.event),
        el("span", { class: "what" }, d.bundle)),
      el("div", { class: "why" },
        [move, d.strategy, d.reason && `reason ${d.reason}`, d.label, numbers(d)].filter(Boolean).join(" · ")));
    root.append(li);
  }
  if (!past.length) root.prepend(el("li", { class: "empty" }, "no decision yet"));
}

// ---- topics -------------------------------------------------------------------------------------
function sparkline(points, limit) {
  const image = svg("svg", { class: "spark", viewBox: "0 0 180 28", preserveAspectRatio: "none" });
  const top = Math.max(1, limit || 0, ...points.map((p) => p[1])) * 1.15;
  const last = points.length ? points[points.length - 1][0] : 0;
  const xOf = (at) => 180 - ((last - at) / (HISTORY_SECONDS * 1000)) * 180;
  const yOf = (v) => 27 - (v / top) * 26;
  if (limit) image.append(svg("line", { class: "limit", x1: "0", x2: "180", y1: String(yOf(limit)), y2: String(yOf(limit)) }));
  if (points.length > 1) {
    image.append(svg("polyline", { points: points.map((p) => `${xOf(p[0]).toFixed(1)},${yOf(p[1]).toFixed(1)}`).join(" ") }));
  }
  return image;
}
function subscriptionHistory(topic, sub, state) {
  if (sub.history) return sub.history; // a replay sends the run's own per-second numbers
  const key = `${topic.name}|${sub.name}`;
  const points = history.get(key) || [];
  if (!points.length || points[points.length - 1][0] !== state.now_ms) points.push([state.now_ms, sub.rateOut]);
  while (points.length && state.now_ms - points[0][0] > HISTORY_SECONDS * 1000) points.shift();
  history.set(key, points);
  return points;
}
function drawTopics(state) {
  const root = $("topics");
  root.replaceChildren();
  for (const t of state.topics) {
    root.append(el("tr", { "data-topic": t.name },
      el("td", { class: "tname" }, t.name),
      el("td", {}, ...(t.brokers || [t.broker]).flatMap((b) => [
        el("span", { class: "dot", style: `background:${colourOf(b)}` }), shortName(b) + " "])),
      el("td", { class: "num" }, fmt(t.rateIn)), el("td", { class: "num" }, fmt(t.rateOut)),
      el("td", { class: "num" }, fmt(t.throughputIn / 1024)), el("td", { class: "num" }, fmt(t.backlog)),
      el("td", { class: "num" }, fmt(t.producers)), el("td", { class: "num" }, fmt(t.consumers)),
      el("td", {})));
    for (const s of t.subscriptions) {
      const points = subscriptionHistory(t, s, state);
      const limit = s.limit && s.limit.msg > 0 ? s.limit.msg : null;
      const cell = el("td", {});
      if (limit) {
        cell.append(sparkline(points, limit),
          el("span", { class: "limit-text" }, `${fmt(s.rateOut)} / ${fmt(limit)} msg/s`));
      }
      root.append(el("tr", { class: "sub", "data-subscription": s.name, "data-limit": limit ? String(limit) : "" },
        el("td", {}, `↳ ${s.name}` + (s.type ? ` (${s.type})` : "")), el("td", {}), el("td", {}),
        el("td", { class: "num" }, fmt(s.rateOut)), el("td", {}), el("td", { class: "num" }, fmt(s.backlog)),
        el("td", {}), el("td", { class: "num" }, fmt(s.consumers)), cell));
    }
  }
  if (!state.topics.length) root.append(el("tr", {}, el("td", { class: "empty", colspan: "9" }, "no topic loaded")));
}

// ---- the loop -----------------------------------------------------------------------------------
function draw(state) {
  $("cluster").textContent = replay ? `replay of ${state.run.name}` : `cluster ${state.cluster} · via ${state.self}`;
  document.body.dataset.at = String(state.now_ms); // the moment drawn (tests wait on it)
  for (const b of state.brokers) colourOf(b.id);
  drawBrokers(state);
  drawLegend(state);
  drawNamespaces(state);
  drawTimeline(state);
  drawTopics(state);
}
function setStatus(text, ok) {
  const status = $("status");
  status.textContent = text;
  status.className = "status " + (ok ? "ok" : "bad");
}
function unreachable(message) {
  $("banner").textContent = message;
  $("banner").hidden = false;
  document.body.classList.add("stale");
  setStatus("broker unreachable", false);
}

async function fetchState(query) {
  const response = await fetch(API + (query || ""), { cache: "no-store" });
  if (response.status === 401 || response.status === 403) {
    throw new Error("not authorized: the dashboard needs a super-user role");
  }
  if (!response.ok) throw new Error(`the broker answered ${response.status}`);
  return response.json();
}

async function poll() {
  try {
    const state = await fetchState();
    if (state.mode === "replay") { startReplay(state); return; }
    $("banner").hidden = true;
    document.body.classList.remove("stale");
    draw(state);
    setStatus("live · updated " + new Date().toLocaleTimeString([], { hour12: false }), true);
  } catch (error) {
    unreachable(`broker unreachable: ${error.message}. Showing the last state; retrying every second.`);
  }
  setTimeout(poll, POLL_MS);
}

// ---- replay -------------------------------------------------------------------------------------
let pending = null; // the time asked for while a request is out
let inFlight = false;
async function showAt(seconds) {
  pending = seconds;
  if (inFlight) return;
  inFlight = true;
  try {
    while (pending !== null) {
      const t = pending;
      pending = null;
      try {
        const state = await fetchState(`?t=${t}`);
        $("banner").hidden = true;
        document.body.classList.remove("stale");
        draw(state);
        setStatus(`replay · ${state.decisions.filter((d) => d.at_ms <= state.now_ms).length} decisions so far`, true);
      } catch (error) {
        unreachable(`dashboard server unreachable: ${error.message}`);
      }
    }
  } finally {
    inFlight = false;
  }
  $("clock").textContent = `${Number($("slider").value).toFixed(0)} s / ${$("slider").max} s`;
}
function startReplay(state) {
  replay = state.run;
  $("replay").hidden = false;
  const slider = $("slider");
  slider.max = String(Math.ceil((replay.end_ms - replay.start_ms) / 1000));
  slider.value = "0";
  slider.addEventListener("input", () => showAt(Number(slider.value)));
  $("play").addEventListener("click", () => {
    if (playing) { stopPlay(); return; }
    if (Number(slider.value) >= Number(slider.max)) slider.value = "0";
    $("play").innerHTML = "&#10074;&#10074;";
    $("play").setAttribute("aria-label", "pause");
    playing = setInterval(() => {
      const next = Math.min(Number(slider.max), Number(slider.value) + Number($("speed").value) / 2);
      slider.value = String(next);
      showAt(next);
      if (next >= Number(slider.max)) stopPlay();
    }, 500);
  });
  draw(state);
  showAt(0);
}
function stopPlay() {
  clearInterval(playing);
  playing = null;
  $("play").innerHTML = "&#9654;";
  $("play").setAttribute("aria-label", "play");
}

poll();
