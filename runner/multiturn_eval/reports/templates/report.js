(function () {
  "use strict";
  // Turn details are drawn from the JSON block when a test case is opened (a
  // thousand cases stay light), with textContent only: agent text is never HTML.
  var data = JSON.parse(document.getElementById("case-data").textContent);
  var CONTROL = /\x1b\[[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;
  var WORD = { passed: "passed", failed: "failed", error: "error", skipped: "skipped" };

  function clean(value) {
    return String(value).replace(/\r\n?/g, "\n").replace(CONTROL, "");
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = clean(text);
    return node;
  }
  function asText(value) {
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }
  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + " ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    var m = Math.floor(Math.round(s) / 60), r = Math.round(s) % 60;
    if (m < 60) return m + "m " + (r < 10 ? "0" : "") + r + "s";
    return Math.floor(m / 60) + "h " + (m % 60 < 10 ? "0" : "") + (m % 60) + "m";
  }
  function status(t) {
    if (t.skipped) return "skipped";
    if (t.passed) return "passed";
    return t.infrastructure_error ? "error" : "failed";
  }
  function field(dl, label, text, empty) {
    dl.appendChild(el("dt", null, label));
    var dd = el("dd");
    dd.appendChild(empty ? el("span", "empty", text) : el("pre", "text", text));
    dl.appendChild(dd);
  }
  function checks(t) {
    var out = [];
    (t.errors || []).forEach(function (e) { out.push([t.skipped ? "warn" : "fail", e]); });
    (t.arg_match_details || []).forEach(function (d) {
      if (d.reason) out.push(["fail", d.reason]);
      else out.push(["pass", d.expected_tool + ": matched" + (d.matched_call_index == null ? "" : " call #" + (d.matched_call_index + 1))]);
    });
    (t.metric_results || []).forEach(function (m) {
      var text = m.metric_name + ": ";
      if (m.error) text += "error: " + m.error;
      else text += m.reason || (m.passed ? "passed" : "failed");
      if (m.kind === "code" && m.score != null) text += " (score " + m.score + (m.threshold != null ? ", threshold " + m.threshold : "") + ")";
      out.push([m.passed ? "pass" : "fail", text]);
    });
    (t.warnings || []).forEach(function (w) { out.push(["warn", w]); });
    return out;
  }
  function renderTurn(t, total) {
    var st = status(t);
    var section = el("section", "turn " + st);
    var h = el("h3");
    h.appendChild(el("span", null, "Turn " + (t.turn_index + 1) + " of " + total));
    h.appendChild(el("span", "badge " + st, WORD[st]));
    var meta = [];
    if (t.line) meta.push("line " + t.line);
    if (!t.skipped) meta.push(duration(t.duration_ms || 0));
    if (t.token_usage && t.token_usage.total_tokens) meta.push(t.token_usage.total_tokens.toLocaleString("en-US") + " tokens");
    if (t.cost_usd != null) meta.push("$" + t.cost_usd.toFixed(4));
    h.appendChild(el("span", "muted", meta.join(" · ")));
    section.appendChild(h);
    var dl = el("dl", "fields");
    field(dl, "Input", t.input, false);
    if (t.ground_truth != null) field(dl, "Expected", t.ground_truth, false);
    if (st === "skipped") field(dl, "Response", "not sent", true);
    else if (t.response == null) field(dl, "Response", "no reply", true);
    else field(dl, "Response", t.response, false);
    section.appendChild(dl);
    var calls = t.tool_invocations || [];
    if (calls.length) {
      var table = el("table", "tools");
      var cols = el("colgroup");
      ["n", "tool", "args", "result"].forEach(function (c) { cols.appendChild(el("col", c)); });
      table.appendChild(cols);
      var head = el("tr");
      ["#", "Tool call", "Arguments", "Result"].forEach(function (c) { head.appendChild(el("th", null, c)); });
      table.appendChild(head);
      calls.forEach(function (c, i) {
        var tr = el("tr");
        tr.appendChild(el("td", null, String(i + 1)));
        var name = el("td");
        name.appendChild(el("code", "text", c.name));
        if (c.server) name.appendChild(el("div", "muted", "MCP server " + c.server));
        if (c.duration_ms != null) name.appendChild(el("div", "muted", duration(c.duration_ms)));
        tr.appendChild(name);
        var args = el("td");
        args.appendChild(el("pre", "text", asText(c.args || {})));
        tr.appendChild(args);
        var result = el("td");
        if (c.error) result.appendChild(el("pre", "text", "error: " + c.error));
        else if (c.result == null) result.appendChild(el("span", "empty", "none"));
        else result.appendChild(el("pre", "text", asText(c.result)));
        tr.appendChild(result);
        table.appendChild(tr);
      });
      section.appendChild(table);
    }
    var list = checks(t);
    if (list.length) {
      var ul = el("ul", "checks");
      list.forEach(function (c) { ul.appendChild(el("li", c[0], c[1])); });
      section.appendChild(ul);
    }
    (t.tracebacks || []).forEach(function (tb) {
      var folded = el("details", "traceback");
      folded.appendChild(el("summary", null, "Traceback of " + tb.where));
      folded.appendChild(el("pre", "text", tb.traceback));
      section.appendChild(folded);
    });
    return section;
  }
  function render(details) {
    if (details.getAttribute("data-rendered")) return;
    details.setAttribute("data-rendered", "1");
    var turns = data[Number(details.getAttribute("data-i"))] || [];
    var box = details.querySelector(".turns");
    var fragment = document.createDocumentFragment();
    turns.forEach(function (t) { fragment.appendChild(renderTurn(t, turns.length)); });
    box.appendChild(fragment);
  }
  document.addEventListener("toggle", function (event) {
    var target = event.target;
    if (target.classList && target.classList.contains("case") && target.open) render(target);
  }, true);

  var rows = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var only = document.getElementById("only-failures");
  var search = document.getElementById("search");
  var shown = document.getElementById("shown");
  var change = document.getElementById("change");  // only with a baseline comparison
  function apply() {
    var query = search.value.trim().toLowerCase();
    var failuresOnly = only.checked;
    var wanted = change ? change.value : "";
    var count = 0;
    rows.forEach(function (row) {
      var outcome = row.getAttribute("data-outcome");
      var visible = (!failuresOnly || outcome === "failed" || outcome === "error") &&
        (!wanted || row.getAttribute("data-change") === wanted) &&
        (!query || row.getAttribute("data-name").indexOf(query) !== -1);
      row.hidden = !visible;
      if (visible) count += 1;
    });
    shown.textContent = "showing " + count.toLocaleString("en-US") + " of " + rows.length.toLocaleString("en-US");
  }
  only.addEventListener("change", apply);
  search.addEventListener("input", apply);
  if (change) change.addEventListener("change", apply);
  document.getElementById("controls").hidden = false;
  apply();
  function openFromHash() {  // report.html#case-12 opens that test case
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && target.classList.contains("case")) {
      target.open = true;
      render(target);
      target.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
