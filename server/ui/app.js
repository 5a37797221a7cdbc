// Sluice dashboard: plain JavaScript, no build step. State comes from
// GET /v1/models and is kept live by the /v1/events stream; each event
// carries its model's status right after the scheduler step that caused it.
// On `reset` (events were lost) the page reloads the state.
//
// With a key set on the server, a 401 from the first call shows the sign-in
// form: a key is exchanged for an HttpOnly session cookie (POST
// /v1/ui/session) and the page reloads. Every request carries X-Sluice-UI: 1,
// the same-origin proof that a session's state-changing request needs, and
// every request with a method other than GET says Content-Type:
// application/json. With management enabled but a session that cannot
// manage (the API key's), the buttons show disabled with the server's note.
"use strict";

(() => {
  const HISTORY = 60;        // samples per sparkline, one per second
  const MIN_SPAN = 20;       // samples the sparkline's width stands for at least
  const MAX_EVENTS = 80;     // entries in the recent-events list
  const EVENT_TYPES = [
    "registered", "queued", "admission", "rejection", "release", "manager", "done", "bulk_unload",
    "load", "probe", "loaded", "load_failed", "probe_failed", "unload", "eviction", "unloaded",
    "state", "status", "shutdown", "shutdown_complete",
  ];

  const cfg = { management: false, parallel_jobs: false, max_slots: 16, can_manage: false, management_note: "", session: "" };
  const models = new Map();   // id -> model object (as GET /v1/models)
  const rows = new Map();     // id -> row view
  const hist = new Map();     // id -> {queue: [], wait: [], waitNow: []}
  let source = null;

  // ---- small helpers ----
  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v === null || v === undefined) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  async function api(method, path, body) {
    const init = { method, headers: { "X-Sluice-UI": "1" }, credentials: "same-origin" };
    if (method !== "GET") init.headers["Content-Type"] = "application/json";
    if (body !== undefined) init.body = JSON.stringify(body);
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new Error("the server cannot be reached (" + e.message + ")");
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const msg = data && data.error && data.error.message ? data.error.message : (text || res.statusText);
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return data;
  }

  function fmtMs(v) {
    if (v === null || v === undefined) return "–";
    if (v < 0.01) return "0 ms";
    if (v < 1) return v.toFixed(2) + " ms";
    if (v < 1000) return v.toFixed(v < 10 ? 1 : 0) + " ms";
    return (v / 1000).toFixed(v < 10000 ? 2 : 1) + " s";
  }

  function fmtTime(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return "";
    const p = (n, w) => String(n).padStart(w || 2, "0");
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
  }

  // ---- history (sparklines) ----
  function history(id) {
    let x = hist.get(id);
    if (!x) {
      x = { queue: [], wait: [], waitNow: [] };
      hist.set(id, x);
    }
    return x;
  }

  function sample() {
    for (const [id, m] of models) {
      const x = history(id);
      x.queue.push(m.queued_requests);
      x.wait.push(x.waitNow.length ? Math.max(...x.waitNow) : 0);
      x.waitNow = [];
      if (x.queue.length > HISTORY) x.queue.shift();
      if (x.wait.length > HISTORY) x.wait.shift();
      const r = rows.get(id);
      if (r) drawSparks(r, m);
    }
  }

  function sparkline(svg, values, kind) {
    const W = 120, H = 28, pad = 2;
    svg.replaceChildren();
    svg.append(s("line", { x1: 0, y1: H - pad, x2: W, y2: H - pad, class: "base" }));
    if (!values.length) return;
    const top = Math.max(1, ...values);
    const span = Math.max(values.length, MIN_SPAN); // a short history still fills most of the width
    const step = (W - 2 * pad) / (span - 1);
    const x0 = W - pad - step * (values.length - 1);
    const pts = values.map((v, i) => [x0 + i * step, H - pad - (v / top) * (H - 2 * pad)]);
    const line = pts.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ");
    svg.append(s("polygon", {
      points: x0.toFixed(1) + "," + (H - pad) + " " + line + " " + pts[pts.length - 1][0].toFixed(1) + "," + (H - pad),
      class: "area " + kind,
    }));
    svg.append(s("polyline", { points: line, class: "stroke " + kind }));
    const last = pts[pts.length - 1];
    svg.append(s("circle", { cx: last[0].toFixed(1), cy: last[1].toFixed(1), r: 2, class: "dot " + kind }));
  }

  function drawSparks(r, m) {
    const x = history(m.id);
    const waitMax = x.wait.length ? Math.max(...x.wait) : 0;
    sparkline(r.queueSpark, x.queue, "queue");
    sparkline(r.waitSpark, x.wait, "wait");
    r.queueSpark.setAttribute("aria-label", "queue length over the last minute, peak " + Math.max(0, ...x.queue));
    r.waitSpark.setAttribute("aria-label", "admission wait over the last minute, peak " + fmtMs(waitMax));
    const lastWait = x.lastWait;
    r.waitText.textContent = lastWait === undefined ? "–" : fmtMs(lastWait);
    r.waitCap.textContent = waitMax > 0 ? "last · peak " + fmtMs(waitMax) : "last admission";
  }

  // ---- model rows ----
  function slotBar(m) {
    const n = Math.max(1, m.slots);
    const busy = Math.min(m.active_slots, n);
    const bar = h("div", { class: "bar", role: "img", "aria-label": busy + " of " + n + " slots busy" });
    for (let i = 0; i < n; i++) bar.append(h("span", { class: i < busy ? "cell busy" : "cell free" }));
    return bar;
  }

  function makeRow(m) {
    const r = { id: m.id };
    r.tr = h("tr", { "data-model": m.id });
    r.name = h("td", { class: "name", "data-label": "Model" });
    r.state = h("td", { "data-label": "State" });
    r.slots = h("td", { "data-label": "Slots" });
    r.queueText = h("span", { class: "big" });
    const queueNum = h("div", { class: "num-cap" }, r.queueText, h("span", { class: "cap" }, "now"));
    r.queueSpark = s("svg", { viewBox: "0 0 120 28", width: 120, height: 28, role: "img", class: "spark" });
    r.queue = h("td", { "data-label": "Queue" }, h("div", { class: "metric" }, queueNum, r.queueSpark));
    r.waitText = h("span", { class: "big" });
    r.waitCap = h("span", { class: "cap" }, "last admission");
    const waitNum = h("div", { class: "num-cap" }, r.waitText, r.waitCap);
    r.waitSpark = s("svg", { viewBox: "0 0 120 28", width: 120, height: 28, role: "img", class: "spark" });
    r.wait = h("td", { "data-label": "Admission wait" }, h("div", { class: "metric" }, waitNum, r.waitSpark));
    r.cap = h("td", { class: "num", "data-label": "Max parallel" });
    r.ver = h("td", { class: "num", "data-label": "Config" });
    r.tr.append(r.name, r.state, r.slots, r.queue, r.wait, r.cap, r.ver);
    if (cfg.management) {
      r.msg = h("p", { class: "msg", role: "status", "aria-live": "polite" });
      const inputId = "slots-" + m.id;
      r.loadBtn = h("button", { type: "button", onclick: () => act(r, "load", () => api("POST", "/v1/models/" + enc(m.id) + "/load")) }, "Load");
      r.unloadBtn = h("button", { type: "button", class: "secondary", onclick: () => act(r, "unload", () => api("POST", "/v1/models/" + enc(m.id) + "/unload")) }, "Unload");
      r.slotInput = h("input", { id: inputId, type: "number", min: 1, max: cfg.max_slots, value: m.slots, inputmode: "numeric" });
      const form = h("form", { class: "slots-form", onsubmit: (e) => { e.preventDefault(); setSlots(r); } },
        h("label", { for: inputId }, "Slots"), r.slotInput, h("button", { type: "submit" }, "Apply"));
      if (!cfg.parallel_jobs) form.hidden = true;
      if (!cfg.can_manage) for (const el of form.elements) el.disabled = true;
      r.actions = h("td", { class: "actions", "data-label": "Actions" },
        h("div", { class: "buttons", role: "group", "aria-label": "Actions for " + m.id }, r.loadBtn, r.unloadBtn), form, r.msg);
      r.tr.append(r.actions);
      r.syncedSlots = m.slots;
    }
    return r;
  }

  const enc = encodeURIComponent;

  function updateRow(r, m) {
    r.name.replaceChildren(h("div", {}, h("span", { class: "id" }, m.id),
      h("span", { class: "sub" }, [m.engine, m.task].filter(Boolean).join(" · "))));
    r.state.replaceChildren(h("span", { class: "badge " + m.state }, m.state));
    r.slots.replaceChildren(h("div", { class: "slots" }, slotBar(m),
      h("span", { class: "sub" }, m.active_slots + " / " + m.slots + " busy")));
    r.queueText.textContent = String(m.queued_requests);
    r.queue.classList.toggle("hot", m.queued_requests > 0);
    r.cap.textContent = m.max_parallel_slots === null ? "–" : String(m.max_parallel_slots);
    r.ver.textContent = "v" + m.config_version;
    r.tr.className = "state-" + m.state;
    if (r.actions) {
      r.loadBtn.disabled = !cfg.can_manage || m.loaded || m.state === "loading";
      r.unloadBtn.disabled = !cfg.can_manage || m.state === "unloaded";
      if (r.syncedSlots !== m.slots && document.activeElement !== r.slotInput) {
        r.slotInput.value = m.slots;
        r.syncedSlots = m.slots;
      }
    }
    drawSparks(r, m);
  }

  function setModel(m) {
    models.set(m.id, m);
    let r = rows.get(m.id);
    if (!r) {
      r = makeRow(m);
      rows.set(m.id, r);
      $("model-rows").append(r.tr);
    }
    updateRow(r, m);
  }

  function summary() {
    let loaded = 0, busy = 0, slots = 0, queued = 0;
    for (const m of models.values()) {
      if (m.loaded) loaded++;
      busy += m.active_slots;
      slots += m.loaded ? m.slots : 0;
      queued += m.queued_requests;
    }
    $("sum-models").textContent = String(models.size);
    $("sum-loaded").textContent = String(loaded);
    $("sum-busy").textContent = busy + (slots ? " / " + slots : "");
    $("sum-queued").textContent = String(queued);
    $("models-empty").hidden = models.size > 0;
    $("models").hidden = models.size === 0;
  }

  async function reloadModels() {
    const list = await api("GET", "/v1/models");
    const seen = new Set();
    for (const m of list.data) {
      if (m.alias_of) continue; // an alias's entry: its model has its own row
      seen.add(m.id);
      setModel(m);
    }
    for (const id of [...models.keys()]) {
      if (!seen.has(id)) {
        models.delete(id);
        const r = rows.get(id);
        if (r) r.tr.remove();
        rows.delete(id);
      }
    }
    summary();
  }

  // ---- actions ----
  function say(el, text, kind) {
    el.textContent = text;
    el.className = "msg" + (kind ? " " + kind : "");
  }

  async function act(r, what, call) {
    say(r.msg, what + "…", "busy");
    try {
      await call();
      say(r.msg, what + ": done", "ok");
    } catch (e) {
      say(r.msg, (e.status ? e.status + " " : "") + e.message, "error");
      if (e.status === 401) sessionEnded();
    }
  }

  function setSlots(r) {
    const n = Number(r.slotInput.value);
    act(r, "slots " + n, async () => {
      const spec = await api("GET", "/v1/models/" + enc(r.id) + "/spec");
      spec.slots = Number.isInteger(n) ? n : r.slotInput.value;
      return api("PUT", "/v1/models/" + enc(r.id), spec);
    });
  }

  // ---- events ----
  function describe(ev) {
    switch (ev.type) {
      case "admission": return "slot " + ev.slot + ", waited " + fmtMs(ev.wait_ms);
      case "rejection": return [ev.kind, ev.code, ev.reason && ev.reason.replace(/_/g, " "), ev.wait_ms !== undefined ? "after " + fmtMs(ev.wait_ms) : ""].filter(Boolean).join(" · ");
      case "release": return ev.failed ? "failed" : "";
      case "manager": return ev.op;
      case "done": return [ev.op, ev.models ? ev.models.join(", ") : ""].filter(Boolean).join(" ");
      case "load": return "v" + ev.version + ", " + ev.slots + " slot" + (ev.slots === 1 ? "" : "s");
      case "loaded": return "capacity " + ev.capacity + (ev.took_ms !== undefined ? ", took " + fmtMs(ev.took_ms) : "");
      case "unload": case "eviction": return ev.cause || "";
      case "unloaded": return (ev.cause || "") + (ev.took_ms !== undefined ? ", took " + fmtMs(ev.took_ms) : "");
      case "state": return ev.from + " → " + ev.to;
      case "bulk_unload": return (ev.models || []).join(", ");
      case "reset": return ev.reason || "reloading";
      default: return "";
    }
  }

  function logEvent(ev) {
    const list = $("events");
    const li = h("li", { class: "ev " + ev.type },
      h("time", { datetime: ev.time || "" }, ev.time ? fmtTime(ev.time) : ""),
      h("span", { class: "type" }, ev.type.replace(/_/g, " ")),
      h("span", { class: "model" }, ev.model || ""),
      h("span", { class: "what" }, describe(ev)));
    list.prepend(li);
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  function onEvent(e) {
    let ev;
    try { ev = JSON.parse(e.data); } catch (_) { return; }
    if (ev.type === "status") { // counters only: no list entry
      if (ev.status) setModel(ev.status);
      summary();
      return;
    }
    if (ev.status) setModel(ev.status);
    if (ev.type === "admission" && ev.model && ev.wait_ms !== undefined) {
      const x = history(ev.model);
      x.waitNow.push(ev.wait_ms);
      x.lastWait = ev.wait_ms;
      const r = rows.get(ev.model);
      if (r) r.waitText.textContent = fmtMs(ev.wait_ms);
    }
    logEvent(ev);
    summary();
  }

  function connect() {
    if (source) source.close();
    source = new EventSource("/v1/events?backlog=40");
    source.addEventListener("open", () => setConn("live", "live"));
    source.addEventListener("error", () => {
      setConn("down", "reconnecting…");
      // A stream refused for want of a key (the session ended) would retry forever.
      api("GET", "/v1/ui/config").catch((e) => { if (e.status === 401) sessionEnded(); });
    });
    for (const t of EVENT_TYPES) source.addEventListener(t, onEvent);
    source.addEventListener("reset", (e) => {
      let ev = { type: "reset" };
      try { ev = JSON.parse(e.data); } catch (_) { /* keep the default */ }
      logEvent(ev);
      reloadModels().catch((err) => setConn("down", err.message));
    });
  }

  function setConn(kind, text) {
    $("conn").className = "conn " + kind;
    $("conn-text").textContent = text;
  }

  // ---- catalogue ----
  async function loadCatalogue() {
    const c = await api("GET", "/v1/catalogue");
    $("cat-root").textContent = c.models_root;
    if (cfg.management) $("root-input").value = c.models_root;
    const ul = $("catalogue");
    ul.replaceChildren();
    if (c.error) say($("cat-msg"), c.error, "error");
    if (!c.data.length) {
      ul.append(h("li", { class: "empty" }, c.error ? "No catalogue." : "No checkpoints under the models root."));
      return;
    }
    for (const cp of c.data) ul.append(checkpointItem(cp));
  }

  function checkpointItem(cp) {
    const li = h("li", { class: "cp" },
      h("div", { class: "cp-head" },
        h("span", { class: "id" }, cp.id),
        h("span", { class: "sub" }, cp.engine + " · " + cp.task + " · up to " + cp.max_slots + " slot" + (cp.max_slots === 1 ? "" : "s"))),
      cp.manifest.description ? h("p", { class: "desc" }, cp.manifest.description) : null);
    if (!cfg.management) return li;
    const idIn = "reg-id-" + cp.id, slotIn = "reg-slots-" + cp.id;
    const msg = h("p", { class: "msg", role: "status", "aria-live": "polite" });
    const idInput = h("input", { id: idIn, type: "text", value: cp.id, required: true, pattern: "[A-Za-z0-9._\\-]{1,128}", spellcheck: "false" });
    const slotInput = h("input", { id: slotIn, type: "number", min: 1, max: cp.max_slots, value: 1 });
    const form = h("form", { class: "reg-form", onsubmit: async (e) => {
      e.preventDefault();
      const id = idInput.value.trim();
      const spec = { engine: cp.engine, checkpoint: cp.id, task: cp.task };
      if (cfg.parallel_jobs) spec.slots = Number(slotInput.value);
      say(msg, "registering " + id + "…", "busy");
      try {
        await api("PUT", "/v1/models/" + enc(id), spec);
        say(msg, "registered " + id, "ok");
      } catch (err) {
        say(msg, (err.status ? err.status + " " : "") + err.message, "error");
      }
    } },
    h("label", { for: idIn }, "Model id"), idInput,
    cfg.parallel_jobs ? h("label", { for: slotIn }, "Slots") : null, cfg.parallel_jobs ? slotInput : null,
    h("button", { type: "submit" }, "Register"));
    if (!cfg.can_manage) for (const el of form.elements) el.disabled = true;
    li.append(form, msg);
    return li;
  }

  async function setRoot(e) {
    e.preventDefault();
    const root = $("root-input").value.trim();
    say($("cat-msg"), "scanning " + root + "…", "busy");
    try {
      await api("PUT", "/v1/settings/models-root", { models_root: root });
      say($("cat-msg"), "models root changed", "ok");
      await loadCatalogue();
    } catch (err) {
      say($("cat-msg"), (err.status ? err.status + " " : "") + err.message, "error");
    }
  }

  // ---- sign-in ----
  function sessionEnded() {
    if (source) source.close();
    setConn("down", "signed out");
    showSignIn("Your session has ended: sign in again.");
  }

  function showSignIn(why) {
    $("signin").hidden = false;
    if (why) $("signin-hint").textContent = why;
    $("signin-key").focus();
  }

  async function signIn(e) {
    e.preventDefault();
    const key = $("signin-key").value;
    say($("signin-msg"), "signing in…", "busy");
    try {
      await api("POST", "/v1/ui/session", { key });
    } catch (err) {
      $("signin-key").value = "";
      say($("signin-msg"), (err.status ? err.status + " " : "") + err.message, "error");
      return;
    }
    location.reload();
  }

  async function signOut() {
    try {
      await api("DELETE", "/v1/ui/session");
    } catch (err) {
      setConn("down", err.message);
      return;
    }
    location.reload();
  }

  function showAuth() {
    const signedIn = cfg.session !== "";
    const mayUpgrade = cfg.management && !cfg.can_manage && /sign in/.test(cfg.management_note);
    $("auth").hidden = !signedIn && !mayUpgrade;
    $("auth-text").textContent = signedIn ? "signed in with the " + (cfg.session === "management" ? "management" : "API") + " key" : "";
    $("sign-out").hidden = !signedIn;
    $("sign-in-show").hidden = !mayUpgrade;
    const note = cfg.management && !cfg.can_manage ? cfg.management_note : "";
    $("mgmt-note").textContent = note;
    $("mgmt-note").hidden = !note;
    if (!cfg.can_manage) for (const el of $("root-form").elements) el.disabled = true;
  }

  // ---- start ----
  async function start() {
    $("signin-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", signOut);
    $("sign-in-show").addEventListener("click", () => showSignIn("Sign in with the management key to load, unload and register models."));
    try {
      Object.assign(cfg, await api("GET", "/v1/ui/config"));
    } catch (e) {
      if (e.status === 401) {
        $("main").hidden = true;
        $("summary").hidden = true;
        setConn("down", "signed out");
        showSignIn();
        return;
      }
      setConn("down", e.message);
      return;
    }
    document.body.classList.toggle("management", cfg.management);
    for (const el of document.querySelectorAll(".mgmt")) el.hidden = !cfg.management;
    $("mode-hint").textContent = !cfg.management ? "read-only (start the server with --ui-management for actions)"
      : cfg.can_manage ? "management enabled" : "read-only for this session";
    showAuth();
    $("root-form").addEventListener("submit", setRoot);
    try {
      await reloadModels();
    } catch (e) {
      setConn("down", e.message);
    }
    connect();
    loadCatalogue().catch((e) => say($("cat-msg"), e.message, "error"));
    setInterval(sample, 1000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
