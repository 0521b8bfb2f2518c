// The belt inspector: deliveries, runs and gates of `belt serve`, live (docs/inspector.md).
//
// Every view reads one JSON route under /inspector/; the page keeps nothing of its own. All
// data came from outside (payloads, tool names, reasons are anyone's), so it is put in the page
// as text nodes only: nothing from a response is ever parsed as HTML.
"use strict";

const API = "/inspector";
const EVENTS = ["agent.start", "agent.turn_start", "agent.turn_complete", "agent.tool_call",
  "agent.tool_result", "agent.pre_compact", "agent.post_compact", "agent.complete", "agent.error"];
const DECISIONS = ["allow", "deny", "stop", "suspend", "error"];
const TARGETS = [
  ["own", "its own handler"],
  ["url", "a webhook URL"],
  ["policy", "a policy file"],
  ["py", "py:MODULE:FUNC (called with the payload as a dict)"],
];
// A view is refetched at once when something changes, then at most every two seconds while
// changes keep coming: a burst of deliveries costs the server and the browser little.
const REFRESH_GAP = 2000;
const PAGE_ROWS = 50;

const state = {
  token: sessionStorage.getItem("belt-token"),
  area: null, // what the current view shows: deliveries, runs or gates
  refresh: null, // refetches the current view
  filters: {},
  pending: false,
  lastRefresh: 0,
  // Gates this tab settled (or found settled), by id: each card stays, saying what happened,
  // until it is dismissed, instead of vanishing when the list is read again.
  settled: new Map(),
};

// -- building the page from data, as text --------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "on") for (const [name, fn] of Object.entries(value)) node.addEventListener(name, fn);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const link = (hash, ...children) => el("a", { href: hash }, ...children);
const runLink = (id) => (id ? link("#/run/" + encodeURIComponent(id), id) : "");
const deliveryLink = (id, text) => link("#/delivery/" + encodeURIComponent(id), text || id);
const json = (value) => JSON.stringify(value, null, 2);
const pre = (value) => el("pre", { class: "json" }, value === undefined ? "" : json(value));
// A time of day in a list's first column, kept on one line (inspector.css: td.time).
const time = (stamp) => (stamp ? el("time", { datetime: stamp, title: stamp }, new Date(stamp).toLocaleTimeString()) : "");
const ms = (value) => (typeof value === "number" ? `${value.toFixed(value < 10 ? 1 : 0)} ms` : "");
const short = (value, n = 60) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > n ? text.slice(0, n - 1) + "…" : text || "";
};

function badge(decision, extra) {
  if (!decision) return "";
  return el("span", { class: `badge ${DECISIONS.includes(decision) ? decision : "other"}` },
    decision, extra ? ` ${extra}` : "");
}

function fields(rows) {
  return el("dl", { class: "fields" }, rows
    .filter(([, value]) => value !== null && value !== undefined && value !== "" && !(Array.isArray(value) && !value.length))
    .map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

// Each cell names its column (data-label), so a narrow screen can show a row as a block of
// labelled lines instead of a table wider than the screen.
function labelled(names, row) {
  [...row.children].forEach((cell, i) => { if (names[i]) cell.setAttribute("data-label", names[i]); });
  return row;
}

// Puts `nodes` in `parent` in order, moving only what is not in its place yet: a node a refresh
// keeps is not taken out of the page, so a person's text selection in it, or the field they are
// typing in, survives the refresh.
function place(parent, nodes) {
  const wanted = new Set(nodes);
  for (const child of [...parent.children]) if (!wanted.has(child)) child.remove();
  nodes.forEach((node, i) => { if (parent.children[i] !== node) parent.insertBefore(node, parent.children[i] || null); });
}

// The nodes of a list a refresh keeps: `make` builds an item's node, `shown` is what of an item
// its node shows. `fresh(items)` answers the nodes of a new reading of the list, reusing the node
// of each item whose `shown` did not change; `more(items)` those of items added to it.
function keeper(make, shown = (item) => JSON.stringify(item)) {
  let nodes = new Map();
  const node = (item, before) => {
    const json = shown(item);
    const kept = before.get(item.id);
    const built = kept && kept[0] === json ? kept[1] : make(item);
    nodes.set(item.id, [json, built]);
    return built;
  };
  return {
    fresh(items) {
      const before = nodes;
      nodes = new Map(); // only what is listed now is kept for the next refresh
      return items.map((item) => node(item, before));
    },
    more: (items) => items.map((item) => node(item, nodes)),
  };
}

function show(...children) {
  document.getElementById("main").replaceChildren(...children);
}

function message(text, kind = "note") {
  return el("p", { class: kind }, text);
}

// -- talking to belt serve -----------------------------------------------------------------

class Failure extends Error {
  constructor(status, doc) {
    super((doc && (doc.detail || doc.title)) || `HTTP ${status}`);
    this.status = status;
    this.doc = doc || {};
  }
}

function headers(extra) {
  const found = { accept: "application/json", ...extra };
  if (state.token) found.authorization = "Bearer " + state.token;
  return found;
}

async function call(path, body) {
  const options = { headers: headers(body === undefined ? {} : { "content-type": "application/json" }) };
  if (body !== undefined) Object.assign(options, { method: "POST", body: JSON.stringify(body) });
  let response;
  try {
    response = await fetch(API + path, options);
  } catch (error) {
    // The browser says only "Failed to fetch": the request never got an answer.
    throw new Failure(0, { detail: "belt serve is not reachable: is it still running?",
      hint: `Start it again (belt serve), then reload this page. (${error.message})` });
  }
  if (response.status === 401) askToken();
  const type = response.headers.get("content-type") || "";
  if (!type.includes("json")) {
    if (!response.ok) throw new Failure(response.status, null);
    return response;
  }
  const doc = await response.json();
  if (!response.ok) throw new Failure(response.status, doc);
  return doc.data;
}

function askToken() {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-input").focus();
}

function readToken() {
  const found = location.hash.match(/^#token=([^&]*)/);
  if (found) {
    state.token = decodeURIComponent(found[1]);
    sessionStorage.setItem("belt-token", state.token);
    history.replaceState(null, "", location.pathname + "#/deliveries");
  }
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = document.getElementById("token-input").value;
    sessionStorage.setItem("belt-token", state.token);
    document.getElementById("token-form").hidden = true;
    route();
  });
}

// Live updates: the server says which areas changed; the view showing one refetches itself.
async function listen() {
  let wait = 500;
  for (;;) {
    try {
      const response = await fetch(API + "/stream", { headers: headers() });
      if (response.status === 401) askToken();
      if (!response.ok) throw new Failure(response.status, null);
      setLive(true);
      wait = 500;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (line) changed(JSON.parse(line));
        }
      }
    } catch (error) {
      wait = Math.min(wait * 2, 10000);
    }
    setLive(false);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

function setLive(on) {
  const live = document.getElementById("live");
  live.textContent = on ? "live" : "reconnecting";
  live.className = on ? "live on" : "live off";
}

function changed(doc) {
  const areas = doc.type === "hello" ? doc.areas : doc.areas || [];
  if (areas.includes("gates")) countGates();
  // A settled gate's card says where its run is now: the gates view follows the runs too.
  const follows = state.area === "gates" && state.settled.size && areas.includes("runs");
  if (state.refresh && (areas.includes(state.area) || follows)) schedule();
}

function schedule() {
  if (state.pending) return;
  state.pending = true;
  const gap = Math.max(0, REFRESH_GAP - (Date.now() - state.lastRefresh));
  setTimeout(async () => {
    state.lastRefresh = Date.now();
    try {
      if (state.refresh) await state.refresh();
    } catch (error) {
      show(failure(error)); // a refresh that cannot be made says why, as a view that cannot load
    } finally {
      state.pending = false;
    }
  }, gap);
}

async function countGates() {
  try {
    const found = await call("/gates");
    document.getElementById("count-gates").textContent = found.items.length ? `(${found.items.length})` : "";
  } catch (error) { /* the view says what is wrong */ }
}

function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const anchor = el("a", { href: url, download: name });
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// -- deliveries ------------------------------------------------------------------------------

function filterBar(onChange) {
  const f = state.filters;
  const select = (name, options, label) => el("select", {
    name, "aria-label": label, on: { change: (e) => { f[name] = e.target.value; onChange(); } },
  }, el("option", { value: "" }, label), options.map((o) => el("option", { value: o, selected: f[name] === o }, o)));
  let pause = null;
  const input = (name, label) => el("input", {
    name, placeholder: label, "aria-label": label, value: f[name] || "",
    on: { input: (e) => { f[name] = e.target.value; clearTimeout(pause); pause = setTimeout(onChange, 300); } },
  });
  return el("div", { class: "filters" },
    select("event", EVENTS, "any event"), select("decision", DECISIONS, "any decision"),
    select("source", ["serve", "sim"], "served or simulated"),
    input("chat", "chat id"), input("run", "run id"), input("q", "text in the payload"));
}

function query(extra) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries({ ...state.filters, ...extra })) if (value) params.set(key, value);
  return params.toString();
}

async function deliveriesView() {
  const count = el("p", { class: "count-line" });
  const body = el("tbody");
  const more = el("button", { type: "button", hidden: true }, "Older deliveries");
  const problems = el("div");
  const batch = el("div", { class: "batch" });
  let shown = PAGE_ROWS;
  let next = null;

  const columns = ["time", "from", "run", "event", "tool", "handler", "decision", "reason / error", "latency",
    "signature", "payload"];
  // A simulated call and the delivery it caused at belt serve (its webhook was this server)
  // are two records of one call: each says where it was recorded and carries its run's id.
  const row = (d) => labelled(columns, el("tr", {
    class: `delivery ${d.source}`, "data-id": d.id, "data-run": d.run_id || "",
    on: { click: () => { location.hash = "#/delivery/" + encodeURIComponent(d.id); } },
  },
  el("td", { class: "time" }, time(d.at)), el("td", { class: "from" }, d.source === "sim" ? "simulated" : "belt serve"),
  el("td", { class: "run" }, d.run_id ? runLink(d.run_id) : ""), el("td", {}, d.event || "-"), el("td", { class: "tool" }, d.tool || ""),
  el("td", {}, d.handler), el("td", {}, d.status && d.status !== 200 ? badge("error", d.status) : badge(d.decision, d.injected ? "+inject" : "")),
  el("td", { class: "reason" }, d.error || d.reason || ""), el("td", { class: "num" }, ms(d.duration_ms)),
  el("td", {}, d.signature || ""), el("td", {}, d.valid === false ? "invalid" : d.valid ? "valid" : "")));

  const rows = keeper(row);

  async function load() {
    const found = await call("/deliveries?" + query({ limit: String(shown) }));
    place(body, rows.fresh(found.items));
    next = found.next;
    more.hidden = !next;
    // A text search answers a part of the history at a time: its count is then "at least".
    const matching = `${found.complete === false ? "at least " : ""}${found.matched} matching`;
    const held = found.evicted ? ` (the newest ${found.held} listed; older ones open by id)` : "";
    count.textContent = `${found.items.length} shown of ${matching} · ${found.total} in all${held}`;
    document.getElementById("count-deliveries").textContent = `(${found.total})`;
    problems.replaceChildren(...found.problems.map((p) => message("Not read: " + p, "error")));
  }
  more.addEventListener("click", async () => {
    const found = await call("/deliveries?" + query({ limit: String(PAGE_ROWS), before: next }));
    body.append(...rows.more(found.items));
    shown += found.items.length;
    next = found.next;
    more.hidden = !next;
  });
  const replayAll = el("button", { type: "button", on: { click: () => batchForm(batch, { filter: { ...state.filters } }) } },
    "Replay all that match…");
  show(el("h2", {}, "Deliveries"), filterBar(() => { shown = PAGE_ROWS; load(); }), count, replayAll, batch, problems,
    el("table", { class: "list" }, el("thead", {}, el("tr", {}, columns.map((h) => el("th", {}, h)))), body), more);
  state.area = "deliveries";
  state.refresh = load;
  await load();
}

function targetPicker() {
  const kind = el("select", { name: "target", "aria-label": "replay to" },
    TARGETS.map(([value, label]) => el("option", { value }, label)));
  const value = el("input", { name: "target-value", placeholder: "http://127.0.0.1:9000/hook", hidden: true, size: 40 });
  const hints = { url: "http://127.0.0.1:9000/hook", policy: "path/to/policy.toml", py: "path/to/hooks.py:guard" };
  kind.addEventListener("change", () => { value.hidden = kind.value === "own"; value.placeholder = hints[kind.value] || ""; });
  return { node: el("span", { class: "target" }, "to ", kind, " ", value),
    get: () => (kind.value === "own" ? { kind: "own" } : { kind: kind.value, value: value.value }) };
}

function batchForm(where, selection) {
  const picker = targetPicker();
  const out = el("div");
  const go = el("button", { type: "button", class: "primary" }, "Replay");
  go.addEventListener("click", async () => {
    out.replaceChildren(message("Replaying…"));
    try {
      const report = await call("/replay", { ...selection, target: picker.get() });
      out.replaceChildren(batchReport(report, picker.get()));
    } catch (error) {
      out.replaceChildren(failure(error));
    }
  });
  where.replaceChildren(el("div", { class: "panel" }, picker.node, " ", go, out));
}

function batchReport(report, target) {
  const s = report.summary;
  return el("div", {},
    message(`${s.replayed} replayed to ${report.target}: ${s.changed} changed (${s.decisions_changed} decision(s), ` +
      `${s.injections_changed} injection(s)), ${s.errors} error(s)`, "summary"),
    el("table", { class: "list" }, el("thead", {}, el("tr", {}, REPLAY_COLUMNS
      .map((h) => el("th", {}, h)))), el("tbody", {}, report.rows.map((r) => labelled(REPLAY_COLUMNS, el("tr", { class: r.changed.length ? "changed" : "" },
      el("td", {}, deliveryLink(r.delivery_id)), el("td", {}, r.event || ""), el("td", {}, r.tool || ""),
      el("td", {}, badge(r.recorded.decision)), el("td", {}, badge(r.replayed.decision), r.replayed.error ? ` ${r.replayed.error}` : ""),
      el("td", {}, r.changed.join(", ") || "-"),
      el("td", {}, r.changed.length ? keepButton(r, target, "replayed", "Keep as a test") : "")))))));
}

const REPLAY_COLUMNS = ["delivery", "event", "tool", "recorded", "now", "changed", ""];

function keepButton(row, target, which, label) {
  return el("button", { type: "button", class: "keep", on: { click: async (event) => {
    const answer = which === "replayed" ? row.replayed : row.recorded;
    const button = event.target;
    try {
      const response = await call("/scenario", {
        id: row.delivery_id, payload: row.payload, target,
        expect: { decision: answer.decision, reason: answer.reason, injected: answer.injection !== null && answer.injection !== undefined && answer.injection !== false },
      });
      const name = (response.headers.get("content-disposition") || "").match(/filename="([^"]+)"/);
      download(name ? name[1] : "replay.toml", await response.text(), response.headers.get("content-type"));
      button.textContent = "Kept";
    } catch (error) {
      button.after(failure(error));
    }
  } } }, label);
}

function failure(error) {
  const doc = error.doc || {};
  const lines = [error.message, ...(doc.errors || [])];
  if (doc.hint) lines.push(doc.hint);
  return el("div", { class: "error", role: "alert" }, lines.map((line) => el("div", {}, line)));
}

async function deliveryView(id) {
  state.area = null;
  state.refresh = null;
  const found = await call("/deliveries/" + encodeURIComponent(id));
  const d = found.delivery;
  const v = found.validation;
  const sig = found.signature;
  show(el("h2", {}, `${d.event || "a request"} ${d.tool || ""}`),
    fields([
      ["delivery", d.id], ["from", d.source === "serve" ? "belt serve (journal)" : "a simulated run"],
      ["at", d.at], ["handler", d.handler], ["decision", d.status && d.status !== 200 ? badge("error", d.status) : badge(d.decision, d.injected ? "+inject" : "")],
      ["reason", d.reason], ["error", d.error], ["effect", found.effect], ["latency", ms(found.timing.duration_ms)],
      ["chat", d.chat_id], ["run", d.source === "sim" ? runLink(d.run_id) : d.run_id],
      ["signature", sig ? (sig.checked ? (sig.verified ? `verified (webhook-id ${sig.webhook_id})` : `failed: ${sig.detail}`) : sig.detail) : null],
      ["payload", v.valid ? "valid LifecycleHookPayload" : el("span", { class: "error" }, "invalid: ", v.problems.join("; "))],
      ["attempts", found.attempts.length > 1 ? found.attempts.map((a, i) => [i ? ", " : "", deliveryLink(a, a === d.id ? `${i + 1} (this)` : String(i + 1))]) : null],
      ["routed to", found.routed_to], ["policy rule", found.rule === null ? null : `rules[${found.rule}]`],
      ["override", found.override === null || found.override === undefined ? null : `${short(found.override, 200)} (recorded, not acted on)`],
      ["warnings", found.warnings && found.warnings.length ? found.warnings.join("; ") : null],
    ]),
    el("div", { class: "bodies" },
      el("section", {}, el("h3", {}, "Request body"), pre(found.request)),
      el("section", {}, el("h3", {}, "Response body"), pre(found.response), found.response_note ? message(found.response_note) : "")),
    found.headers ? el("section", {}, el("h3", {}, "Headers"), el("table", { class: "headers" },
      el("tbody", {}, Object.entries(found.headers).map(([k, val]) => el("tr", {}, el("th", {}, k), el("td", {}, val)))))) : "",
    replayPanel(found));
}

function replayPanel(found) {
  const d = found.delivery;
  const picker = targetPicker();
  const edit = el("textarea", { name: "payload", rows: 14, spellcheck: "false", "aria-label": "payload to send" }, json(found.request));
  const status = el("span", { class: "note" });
  const editing = el("input", { type: "checkbox", name: "edit" });
  const editor = el("div", { hidden: true }, edit, status);
  const out = el("div", { class: "replay-result" });
  const go = el("button", { type: "button", class: "primary" }, "Replay");
  let payload = null;
  const check = () => {
    try {
      payload = JSON.parse(edit.value);
      if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw new Error("the payload must be a JSON object");
      status.textContent = "valid JSON";
      status.className = "note";
      go.disabled = false;
    } catch (error) {
      status.textContent = error.message;
      status.className = "error";
      go.disabled = true;
    }
  };
  edit.addEventListener("input", check);
  editing.addEventListener("change", () => { editor.hidden = !editing.checked; if (editing.checked) check(); else go.disabled = false; });
  go.addEventListener("click", async () => {
    const body = { ids: [d.id], target: picker.get() };
    if (editing.checked) body.payload = payload;
    out.replaceChildren(message("Replaying…"));
    try {
      const report = await call("/replay", body);
      out.replaceChildren(comparison(report.rows[0], report.target, picker.get()));
    } catch (error) {
      out.replaceChildren(failure(error));
    }
  });
  return el("section", { class: "panel" }, el("h3", {}, "Replay"), picker.node, " ",
    el("label", {}, editing, " edit the payload first"), " ", go, editor, out);
}

function comparison(row, target, chosen) {
  const injection = (value) => (value === null || value === undefined ? "none" : value === true ? "yes" : short(value, 120));
  const line = (name, then, now, key) => el("tr", { class: row.changed.includes(key) ? "changed" : "" },
    el("th", {}, name), el("td", {}, then), el("td", {}, now), el("td", {}, row.changed.includes(key) ? "changed" : ""));
  const reasonChanged = (row.recorded.reason || "") !== (row.replayed.reason || "");
  return el("div", {},
    message(`Sent to ${target}. ${row.changed.length ? "Changed: " + row.changed.join(", ") : "Nothing changed."}`, "summary"),
    row.replayed.error ? el("p", { class: "error" }, row.replayed.error) : "",
    el("table", { class: "diff" }, el("thead", {}, el("tr", {}, ["", "recorded", "now", ""].map((h) => el("th", {}, h)))),
      el("tbody", {},
        line("decision", badge(row.recorded.decision), badge(row.replayed.decision), "decision"),
        el("tr", { class: reasonChanged ? "changed" : "" }, el("th", {}, "reason"), el("td", {}, row.recorded.reason || ""),
          el("td", {}, row.replayed.reason || ""), el("td", {}, reasonChanged ? "changed" : "")),
        line("injection", injection(row.recorded.injection), injection(row.replayed.injection), "injection"))),
    el("p", {}, "Keep this payload as a test: ", keepButton(row, chosen, "replayed", "expecting the new answer"), " ",
      keepButton(row, chosen, "recorded", "expecting the recorded answer")));
}

// -- runs ------------------------------------------------------------------------------------

async function runsView() {
  const body = el("tbody");
  const count = el("p", { class: "count-line" });
  const columns = ["started", "agent", "kind", "state", "run", "chat", "error"];
  const rows = keeper((r) => labelled(columns, el("tr", { "data-id": r.id, on: { click: () => { location.hash = "#/run/" + encodeURIComponent(r.id); } } },
    el("td", { class: "time" }, time(r.created_at)), el("td", {}, r.name || ""), el("td", {}, r.kind), el("td", {}, stateBadge(r.state, r.interrupted)),
    el("td", {}, runLink(r.id)), el("td", {}, r.chat_id || ""), el("td", { class: "reason" }, r.error || ""))));
  async function load() {
    const found = await call("/runs");
    count.textContent = `${found.items.length} shown of ${found.total} run(s), newest first`;
    place(body, rows.fresh(found.items));
  }
  show(el("h2", {}, "Runs"), count, el("table", { class: "list" }, el("thead", {}, el("tr", {},
    columns.map((h) => el("th", {}, h)))), body));
  state.area = "runs";
  state.refresh = load;
  await load();
}

function stateBadge(value, interrupted) {
  return el("span", { class: `state ${value}` }, value, interrupted ? " (interrupted)" : "");
}

async function runView(id) {
  const root = el("div", { class: "run-view" });
  const batch = el("div", { class: "batch" });
  const replayRun = el("button", { type: "button", on: { click: () => batchForm(batch, { run: id }) } },
    "Replay this run's deliveries…");
  // What a person types in a gate card or the replay form outlives a refresh: those stay put.
  const cards = gateCards();
  const gateList = el("div");
  const gates = el("section", {}, el("h3", {}, "Gates"), gateList);
  async function load() {
    const found = await call("/runs/" + encodeURIComponent(id));
    const run = found.run;
    const parent = found.parent;
    place(gateList, cards(found.gates));
    place(root, [
      el("h2", {}, `Run ${run.id} `, stateBadge(run.state, run.interrupted)),
      fields([["agent", found.simulation.name], ["scenario", found.simulation.source], ["chat", found.chat_id],
        ["error", run.error], ["simulation", `${found.simulation.id} (${found.simulation.status})`],
        ["started by", parent ? [parent.event ? `${parent.event} of ` : "", runLink(parent.run_id) || parent.chat_id] : null],
        ["other runs of the chat", found.runs_of_chat.filter((r) => r !== run.id).map((r, i) => [i ? ", " : "", runLink(r)])],
        ["hold", run.attention ? `${run.attention.reason}: ${run.attention.detail || ""}` : null],
        ["stop continuations", found.continuations]]),
      found.children.length ? el("section", {}, el("h3", {}, "Task and review chats it started"),
        el("ul", {}, found.children.map((c) => el("li", {}, `${c.kind === "tasks" ? "task" : "review"} ${c.agent} · chat ${c.chat_id} · ${c.status} · `,
          c.runs.map((r, i) => [i ? ", " : "", runLink(r.id)]))))) : null,
      replayRun, batch,
      found.hook_summary.calls ? el("section", { class: "hook-summary" }, el("h3", {}, "Hook calls"),
        found.hook_summary_text.map((line) => el("p", { class: line.failed ? "failed" : "" }, line.text))) : null,
      found.gates.length ? gates : null,
      found.executions.length ? el("section", {}, el("h3", {}, "Nexus executions"), found.executions.map((e) =>
        el("p", {}, `turn ${e.turn} · ${e.kind} · ${e.state}` + (e.approval_mode ? ` · approval ${e.approval_mode}` : "")))) : null,
      el("section", {}, el("h3", {}, "Timeline"), el("ol", { class: "timeline" }, found.timeline.map(timelineItem))),
    ].filter(Boolean));
    root.dataset.loads = String(Number(root.dataset.loads || 0) + 1); // how often it was read
  }
  show(root);
  state.area = "runs";
  state.refresh = load;
  await load();
}

function timelineItem(item) {
  if (item.kind === "boundary") {
    const what = item.tool ? `${item.tool}(${short(item.arguments || {}, 80)})` : `turn ${item.turn_count ?? ""}`;
    return el("li", { class: "boundary" }, el("div", { class: "event-name" }, `⟶ ${item.event} `, el("span", { class: "note" }, what)),
      el("ul", { class: "deliveries" }, item.deliveries.map((d) => el("li", {}, deliveryLink(d.id, d.handler), " ",
        badge(d.decision, d.injected ? "+inject" : ""), d.reason ? ` ${d.reason}` : "", d.effect ? el("span", { class: "effect" }, ` → ${d.effect}`) : "",
        ` · ${ms(d.duration_ms)}`))));
  }
  if (item.kind === "hook_task") {
    return el("li", { class: "boundary" }, el("div", { class: "event-name" }, `⟶ ${item.event} hook task via ${item.tool}`),
      el("div", {}, `${item.outcome || item.status} · attempt ${item.attempt}`, item.feedback ? ` · ${item.feedback}` : "",
        item.error ? el("span", { class: "error" }, ` ${item.error}`) : "",
        item.max_continuations ? ` · continuations ${item.continuations_used}/${item.max_continuations}` : ""));
  }
  const role = item.role;
  const calls = (item.tool_calls || []).map((c) => el("div", { class: "call" }, `${c.name}(${short(c.arguments || {}, 80)}) `,
    stateBadge(c.status), c.result ? ` ${short(c.result, 80)}` : ""));
  const label = role === "assistant" ? "model" : role === "injection" ? `injected${item.injection ? ` (${item.injection.role || "user"}, ttl ${item.injection.ttl_turns ?? "∞"})` : ""}` : role;
  return el("li", { class: `message ${role}` }, el("span", { class: "role" }, label), " ", item.text || "", calls);
}

// -- gates -----------------------------------------------------------------------------------

function left(seconds) {
  if (seconds <= 0) return "overdue";
  const m = Math.floor(seconds / 60);
  return m ? `${m}m ${Math.floor(seconds % 60)}s` : `${Math.floor(seconds)}s`;
}

// What resolving a gate did to its run, in words: it goes on, or still waits, and why.
function resolvedText(decision, run) {
  const head = `Resolved (${decision}).`;
  if (run.continues) return `${head} The run ${run.run_id} resumes: ${run.why}.`;
  if (run.waiting) return `${head} The run ${run.run_id} still waits on ${run.waiting} gate${run.waiting === 1 ? "" : "s"}.`;
  return `${head} The run does not go on here: ${run.why}.`;
}

function outcomeLine(outcome) {
  return el("p", { class: `${outcome.kind} outcome`, role: "status" }, outcome.text);
}

// A gate's title: the event it holds and what it holds there (a tool call with its arguments,
// or a turn). The one place it is made, for a pending gate and a settled one alike, from the
// payload the gate keeps (its meta), which stays the same whatever happens to the gate.
function gateTitle(gate) {
  const meta = gate.meta || {};
  const data = meta.data || {};
  const event = gate.event || meta.event || String(gate.source || "").replace(/^hook:/, "");
  const tool = gate.tool || data.tool;
  const args = gate.tool ? gate.arguments : data.arguments;
  const holds = tool ? `${tool}(${short(args || {}, 100)})` : `turn ${gate.turn_count ?? meta.turn_count ?? ""}`;
  return { event, holds };
}

function gateCard(gate) {
  const kept = state.settled.get(gate.id);
  const pending = gate.status === "pending" && !kept;
  const title = gateTitle(gate);
  const clock = setClock(el("span", { class: "clock" }), gate);
  const now = el("p", { class: "note run-now" });
  if (kept && kept.outcome.run) {
    // Where the resumed run is now (read again each time the list is).
    call("/runs/" + encodeURIComponent(kept.outcome.run)).then((found) => {
      now.replaceChildren("Now: the run is ", stateBadge(found.run.state, found.run.interrupted), ".");
    }, () => {});
  }
  const out = el("div", { class: "gate-result" }, kept ? [outcomeLine(kept.outcome), now,
    el("button", { type: "button", class: "dismiss", on: { click: () => { state.settled.delete(gate.id); card.remove(); } } }, "Dismiss")] : "");
  const data = el("textarea", { rows: 4, name: "data", placeholder: '{"by": "me"}', "aria-label": "data for the resolution", spellcheck: "false" });
  const dataStatus = el("span", { class: "note" });
  const send = el("button", { type: "button", class: "primary", disabled: true }, "Allow with this data");
  const withData = el("div", { hidden: true }, data, dataStatus, send);
  let parsed;
  data.addEventListener("input", () => {
    try {
      parsed = JSON.parse(data.value);
      dataStatus.textContent = "valid JSON";
      dataStatus.className = "note";
      send.disabled = false;
    } catch (error) {
      dataStatus.textContent = error.message;
      dataStatus.className = "error";
      send.disabled = true;
    }
  });
  const resolve = async (decision, value) => {
    try {
      const body = { decision };
      if (value !== undefined) body.data = value;
      const found = await call(`/gates/${encodeURIComponent(gate.id)}/resolve`, body);
      const outcome = { kind: "summary", text: resolvedText(decision, found.run),
        run: found.run.continues ? found.run.run_id : null };
      state.settled.set(gate.id, { gate: found.interrupt || gate, outcome });
      card.replaceWith(gateCard(found.interrupt || gate));
    } catch (error) {
      if (error.status === 409) {
        const settled = error.doc.interrupt || {};
        const outcome = { kind: "conflict", text:
          `Already ${settled.status || "settled"}${settled.resolution ? " (" + settled.resolution + ")" : ""}` +
          `${error.doc.settled_by ? " by " + error.doc.settled_by : ""}${settled.resolved_at ? " at " + settled.resolved_at : ""}.` };
        state.settled.set(gate.id, { gate: error.doc.interrupt || gate, outcome });
        card.replaceWith(gateCard(error.doc.interrupt || gate));
      } else {
        out.replaceChildren(failure(error));
      }
    }
  };
  send.addEventListener("click", () => resolve("allow", parsed));
  const card = el("div", { class: `gate ${kept ? "settled" : gate.status}`, "data-id": gate.id },
    el("div", { class: "gate-head" }, el("strong", { class: "gate-event" }, title.event), " ", el("span", { class: "gate-holds" }, title.holds), " ",
      pending ? clock : stateBadge(gate.status, false), gate.resolution ? [" ", badge(gate.resolution)] : "",
      gate.settled_by ? ` by ${gate.settled_by}` : ""),
    fields([["gate", `${gate.id} (${gate.short_id})`], ["run", runLink(gate.run_id)], ["chat", gate.chat_id], ["opened", gate.created_at],
      ["settled by", gate.trail ? gate.settled_by : null], ["digest", gate.trail ? gate.trail.digest : null],
      ["resolved data", gate.resolved_data === null || gate.resolved_data === undefined ? null : short(gate.resolved_data, 200)]]),
    el("details", {}, el("summary", {}, "what it holds (the hook payload)"), pre(gate.meta)),
    pending ? el("div", { class: "actions" },
      el("button", { type: "button", class: "allow", on: { click: () => resolve("allow") } }, "Allow"), " ",
      el("button", { type: "button", class: "deny", on: { click: () => resolve("deny") } }, "Deny"), " ",
      el("button", { type: "button", on: { click: () => { withData.hidden = !withData.hidden; } } }, "Allow with data…"),
      withData) : "",
    out);
  return card;
}

// A pending gate's clock: the time its gate has left (the server's reading, which follows its
// clock, virtual or not), then what happens. One timer ticks every clock in the page.
function setClock(clock, gate) {
  const seconds = gate.seconds_left ?? (Date.parse(gate.expires_at) - Date.now()) / 1000;
  clock.dataset.deadline = String(Date.now() + seconds * 1000);
  clock.dataset.expiry = gate.on_expiry;
  tickClock(clock);
  return clock;
}

function tickClock(clock) {
  clock.textContent = `${left((Number(clock.dataset.deadline) - Date.now()) / 1000)}, then ${clock.dataset.expiry}`;
}

// The cards of a list of gates a refresh keeps, with what a person typed in them: a card is
// built again only when its gate changed, not for its time left (which its clock is set to).
function gateCards() {
  const cards = keeper(gateCard, (gate) => JSON.stringify({ ...gate, seconds_left: null }));
  return (gates) => cards.fresh(gates).map((card, i) => {
    const clock = card.querySelector(".clock");
    if (clock) setClock(clock, gates[i]);
    return card;
  });
}

async function gatesView() {
  const list = el("div", { class: "gate-list" });
  const cards = gateCards();
  async function load() {
    const found = await call("/gates");
    const settled = [...state.settled.values()].map((s) => gateCard(s.gate));
    const open = cards(found.items.filter((g) => !state.settled.has(g.id)));
    place(list, [...settled, ...(open.length ? open : [message("No gate is waiting.")])]);
    list.dataset.loads = String(Number(list.dataset.loads || 0) + 1); // how often it was read
    document.getElementById("count-gates").textContent = found.items.length ? `(${found.items.length})` : "";
  }
  show(el("h2", {}, "Gates waiting for a person"), list);
  state.area = "gates";
  state.refresh = load;
  await load();
}

// -- routing ---------------------------------------------------------------------------------

const VIEWS = { deliveries: deliveriesView, delivery: deliveryView, runs: runsView, run: runView, gates: gatesView };

async function route() {
  const [, name = "deliveries", ...rest] = location.hash.replace(/^#/, "").split("/");
  const view = VIEWS[name] || deliveriesView;
  for (const id of ["nav-deliveries", "nav-runs", "nav-gates"]) {
    document.getElementById(id).classList.toggle("current", id === `nav-${name}` || (id === "nav-runs" && name === "run") ||
      (id === "nav-deliveries" && name === "delivery"));
  }
  state.refresh = null;
  try {
    await view(decodeURIComponent(rest.join("/")));
  } catch (error) {
    show(failure(error));
  }
}

window.addEventListener("hashchange", route);
setInterval(() => document.querySelectorAll(".clock").forEach(tickClock), 1000);
readToken();
route();
countGates();
listen();
