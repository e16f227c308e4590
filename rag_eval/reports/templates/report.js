// Drill-down of the rag-eval report: filters the query table and opens a query's details.
// Every text from the run is put in with textContent (never as HTML), so corpus or query text
// that looks like markup is shown as text.
(function () {
  "use strict";
  var source = document.getElementById("drill-data");
  var table = document.getElementById("drill");
  if (!source || !table) { return; }
  var data = JSON.parse(source.textContent);
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var search = document.getElementById("q-search");
  var status = document.getElementById("q-status");
  var config = document.getElementById("q-config");
  var stage = document.getElementById("q-stage");
  var count = document.getElementById("q-count");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function hasToken(attr, cfg, value) {
    var tokens = (attr || "").split(" ");
    for (var i = 0; i < tokens.length; i++) {
      var parts = tokens[i].split(":");
      if (parts.length < 2) { continue; }
      var idx = parts.shift();
      if (parts.join(":") === value && (cfg === "" || cfg === idx)) { return true; }
    }
    return false;
  }

  function apply() {
    var needle = search.value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (row) {
      var ok = !needle || row.getAttribute("data-search").indexOf(needle) !== -1;
      if (ok && status.value) { ok = hasToken(row.getAttribute("data-st"), config.value, status.value); }
      if (ok && stage.value) { ok = hasToken(row.getAttribute("data-lost"), config.value, stage.value); }
      row.classList.toggle("hidden", !ok);
      var detail = row.nextElementSibling;
      if (detail && detail.classList.contains("detail")) { detail.classList.toggle("hidden", !ok); }
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " shown";
  }

  function highlighted(text, ranges) {
    var box = el("div", "chunktext");
    var spans = (ranges || []).slice().sort(function (a, b) { return a[0] - b[0]; });
    var pos = 0;
    spans.forEach(function (r) {
      var s = Math.max(r[0], pos), e = Math.min(r[1], text.length);
      if (e <= s) { return; }
      if (s > pos) { box.appendChild(document.createTextNode(text.slice(pos, s))); }
      box.appendChild(el("mark", "", text.slice(s, e)));
      pos = e;
    });
    if (pos < text.length) { box.appendChild(document.createTextNode(text.slice(pos))); }
    return box;
  }

  // chunks are numbers into data.keys (each key and text is written once)
  function keyOf(id) { return data.keys[id]; }

  function chunkView(id, q, label) {
    var box = el("div", "member" + (q.rel.indexOf(id) !== -1 ? " rel" : ""));
    var t = data.texts[id];
    box.appendChild(el("div", "head mono", label || keyOf(id) + (t && t[1] ? " · " + t[1] : "")));
    box.appendChild(t ? highlighted(t[2], q.hl[id]) : el("div", "muted small", "(text not in this run's texts.parquet)"));
    return box;
  }

  function stageLabel(s) { return data.stage_labels[s] || s; }

  function stageNote(s, hits) { return (data.stage_notes[s] || s).replace("{hits}", String(hits)); }

  function detail(qid) {
    var q = data.queries[qid];
    var box = el("div");
    box.appendChild(el("h4", "", q.text));
    box.appendChild(el("div", "muted small mono", "query " + qid));

    box.appendChild(el("h3", "", "Relevant chunks (evidence highlighted)"));
    if (!q.rel.length) { box.appendChild(el("p", "muted", "No relevant chunk: this query is not judged.")); }
    q.rel.forEach(function (id) {
      var fates = data.configs.map(function (name, i) {
        var c = q.cfg[i];
        if (!c) { return name + ": not run"; }
        var lost = c.lost.filter(function (l) { return l[0] === id; })[0];
        return name + ": " + (lost ? "lost (" + stageLabel(lost[1]) + ")" : "delivered");
      });
      box.appendChild(chunkView(id, q, keyOf(id) + " — " + fates.join(" · ")));
    });

    box.appendChild(el("h3", "", "Delivered blocks, side by side"));
    var cols = el("div", "cols");
    data.configs.forEach(function (name, i) {
      var c = q.cfg[i];
      var col = el("div");
      col.appendChild(el("b", "", name + (i === data.baseline ? " (baseline)" : "")));
      if (!c) { col.appendChild(el("p", "muted", "not run")); cols.appendChild(col); return; }
      if (!c.blocks.length) { col.appendChild(el("p", "muted", "empty payload")); }
      c.blocks.forEach(function (b) {
        var blk = el("div", "block");
        blk.appendChild(el("div", "head", "#" + b[3] + " · evidence key " + b[0] + " · stored doc id " +
          (b[1] || "(none)") + " · score " + b[2].toFixed(4) + " · " + b[4] + " chars"));
        b[5].forEach(function (m) {
          // a number: the row carried the chunk's own key; [chunk, row key] where they differ
          var id = typeof m === "number" ? m : m[0];
          var label = keyOf(id) + (typeof m === "number" ? "" : " (row key " + m[1] + ")");
          blk.appendChild(chunkView(id, q, label));
        });
        col.appendChild(blk);
      });
      cols.appendChild(col);
    });
    box.appendChild(cols);

    box.appendChild(el("h3", "", "Relevant chunks not delivered"));
    var lostCols = el("div", "cols");
    data.configs.forEach(function (name, i) {
      var c = q.cfg[i];
      var col = el("div");
      col.appendChild(el("b", "", name));
      if (!c || !c.lost.length) { col.appendChild(el("p", "muted", c ? "none" : "not run")); }
      (c ? c.lost : []).forEach(function (l) {
        var blk = el("div", "block");
        blk.appendChild(el("div", "head mono", keyOf(l[0]) + " — " + stageLabel(l[1])));
        blk.appendChild(el("div", "small", stageNote(l[1], c.hits)));
        l[2].forEach(function (id) {
          var more = el("details");
          var t = data.texts[id];
          more.appendChild(el("summary", "small mono", keyOf(id) + (t && t[1] ? " · " + t[1] : "")));
          more.appendChild(chunkView(id, q));
          blk.appendChild(more);
        });
        col.appendChild(blk);
      });
      lostCols.appendChild(col);
    });
    box.appendChild(lostCols);
    return box;
  }

  table.addEventListener("click", function (ev) {
    var btn = ev.target.closest ? ev.target.closest("button.open") : null;
    if (!btn) { return; }
    var row = btn.closest("tr");
    var next = row.nextElementSibling;
    if (next && next.classList.contains("detail")) {
      next.parentNode.removeChild(next);
      btn.setAttribute("aria-expanded", "false");
      btn.textContent = "▸";
      return;
    }
    var tr = el("tr", "detail");
    var td = el("td");
    td.colSpan = row.cells.length;
    td.appendChild(detail(row.getAttribute("data-q")));
    tr.appendChild(td);
    row.parentNode.insertBefore(tr, next);
    btn.setAttribute("aria-expanded", "true");
    btn.textContent = "▾";
  });

  [search, status, config, stage].forEach(function (c) { c.addEventListener("input", apply); });
  rows.forEach(function (row) { row.querySelector("button.open").hidden = false; });
  document.getElementById("drill-controls").hidden = false;
  apply();
})();
