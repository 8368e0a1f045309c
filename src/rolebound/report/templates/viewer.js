// The sample viewer: a virtualised list (every row reachable) and a detail pane with the whole
// exchange. Everything is built with textContent: nothing from the run is parsed as HTML.
(function () {
  var ROW = 26;
  var LONG = ["question", "query", "response", "answer", "judge reply"];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function show(v) {
    if (v == null) return "";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  function Viewer(id) {
    var data = JSON.parse(document.getElementById(id + "-data").textContent);
    var cols = data.columns, rows = data.rows, filters = data.filters, recs = data.records, S = data.strings;
    var list = document.getElementById(id + "-list"), head = document.getElementById(id + "-head");
    var body = document.getElementById(id + "-body"), count = document.getElementById(id + "-count");
    var pane = document.getElementById(id + "-detail"), content = pane.querySelector(".dcontent");
    var ptitle = pane.querySelector(".dtitle");
    var state = {}, search = "", view = [], sel = -1;    // sel: the open row (an index into rows)
    function s(i) { return i == null ? null : S[i]; }

    var groups = {};
    recs.forEach(function (r, i) {
      var k = r.item + "\u0000" + r.strategy + "\u0000" + r.repeat;
      (groups[k] = groups[k] || []).push(i);
    });
    var hay = rows.map(function (r) {
      var t = cols.map(function (c) { return show(r[c]); }).join("\n");
      if (r._r != null) { var rec = recs[r._r]; t += "\n" + show(s(rec.response)) + "\n" + rec.id; }
      return t.toLowerCase();
    });

    // filters and search, as before
    var box = document.getElementById(id + "-filters");
    filters.forEach(function (f) {
      var values = Array.from(new Set(rows.map(function (r) { return show(r[f]); }))).sort();
      var label = el("label", null, f + " ");
      var selE = el("select");
      selE.setAttribute("data-filter", f);
      var all = el("option", null, "(all)"); all.value = ""; selE.appendChild(all);
      values.forEach(function (v) { var o = el("option", null, v === "" ? "(empty)" : v); o.value = v; selE.appendChild(o); });
      selE.addEventListener("change", function () { state[f] = selE.value; state[f + "\u0000on"] = selE.selectedIndex > 0; update(); });
      label.appendChild(selE); box.appendChild(label);
    });
    var q = el("input"); q.type = "search"; q.placeholder = "search text"; q.id = id + "-search";
    q.addEventListener("input", function () { search = q.value.toLowerCase(); update(); });
    box.appendChild(q);

    // the default view shows the columns that identify a sample and its outcome; the picker the rest
    var vis = (data.shown && data.shown.length ? data.shown : cols).slice(), template = "";
    var pick = el("details", "colpick"), psum = el("summary"), opts = el("div", "colopts");
    pick.appendChild(psum); pick.appendChild(opts);
    cols.forEach(function (c) {
      var lab = el("label"), cb = el("input");
      cb.type = "checkbox"; cb.checked = vis.indexOf(c) >= 0; cb.setAttribute("data-col", c);
      cb.addEventListener("change", function () {
        vis = cols.filter(function (k) { return k === c ? cb.checked : vis.indexOf(k) >= 0; });
        layout(); draw();
      });
      lab.appendChild(cb); lab.appendChild(document.createTextNode(" " + c)); opts.appendChild(lab);
    });
    box.insertBefore(pick, q);

    // each column as wide as its header and its usual content (measured in the page's own font),
    // so no header is cut short; long texts (questions, replies) take what is left
    var ruler = el("div");
    ruler.style.cssText = "position:absolute;visibility:hidden;white-space:nowrap;padding:0 .4rem;left:0;top:0";
    list.appendChild(ruler);
    function width(text, bold) {
      ruler.style.fontWeight = bold ? "600" : "400";
      ruler.textContent = text;
      return Math.ceil(ruler.getBoundingClientRect().width) + 2;
    }
    var widths = {};
    cols.forEach(function (c) {
      var vals = rows.map(function (r) { return show(r[c]); });
      vals.sort(function (a, b) { return b.length - a.length; });
      var w = 0;
      vals.slice(0, 8).forEach(function (v) { w = Math.max(w, width(v, false)); });
      widths[c] = { head: width(c, true), body: w };
    });
    list.removeChild(ruler);
    function layout() {
      template = vis.map(function (c) {
        var w = widths[c], cap = 220;
        if (LONG.indexOf(c) >= 0 && w.body > cap) return "minmax(" + Math.max(w.head, 160) + "px, 4fr)";
        return "minmax(" + Math.max(w.head, Math.min(w.body, cap)) + "px, 1fr)";
      }).join(" ");
      head.style.gridTemplateColumns = template;
      head.textContent = "";
      vis.forEach(function (c) { head.appendChild(el("div", null, c)); });
      psum.textContent = "columns (" + vis.length + " of " + cols.length + ")";
    }
    layout();

    function update() {
      view = [];
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i], ok = true;
        for (var j = 0; j < filters.length; j++) {
          var f = filters[j];
          if (state[f + "\u0000on"] && show(r[f]) !== state[f]) { ok = false; break; }
        }
        if (ok && search && hay[i].indexOf(search) < 0) ok = false;
        if (ok) view.push(i);
      }
      body.style.height = (view.length * ROW) + "px";
      count.textContent = view.length + " of " + rows.length + " rows" +
        (recs.length ? "; click a row (or press Enter) to open the whole exchange" : "");
      list.scrollTop = 0;
      draw();
    }

    function draw() {
      var top = Math.max(0, list.scrollTop - head.offsetHeight);
      var first = Math.max(0, Math.floor(top / ROW) - 10);
      var last = Math.min(view.length, first + Math.ceil(list.clientHeight / ROW) + 20);
      body.textContent = "";
      for (var p = first; p < last; p++) {
        var i = view[p], r = rows[i];
        var tr = el("div", "vrow" + (i === sel ? " sel" : ""));
        tr.style.top = (p * ROW) + "px";
        tr.style.gridTemplateColumns = template;
        tr.setAttribute("data-pos", p);
        tr.setAttribute("data-row", i);
        vis.forEach(function (c) {
          var v = show(r[c]);
          var td = el("div", c === "outcome" ? "o-" + v.split(" ")[0] : null, v);
          td.title = v;
          tr.appendChild(td);
        });
        body.appendChild(tr);
      }
    }
    list.addEventListener("scroll", draw);
    body.addEventListener("click", function (ev) {
      var tr = ev.target.closest(".vrow");
      if (tr) open(+tr.getAttribute("data-pos"));
    });

    function kv(obj, keys) {
      var t = el("table"), tb = el("tbody");
      keys.forEach(function (k) {
        var v = obj[k];
        if (v == null || v === "") return;
        var tr = el("tr");
        tr.appendChild(el("td", null, k));
        tr.appendChild(el("td", null, show(v)));
        tb.appendChild(tr);
      });
      t.appendChild(tb);
      return t;
    }
    function pre(text) { return el("pre", null, text); }

    function exchange(parent, rec) {
      parent.appendChild(el("h3", null, "Messages"));
      if (Array.isArray(rec.prompt)) {
        rec.prompt.forEach(function (m) {
          var d = el("div", "msg");
          d.appendChild(el("div", "mrole", m[0]));
          d.appendChild(pre(s(m[1])));
          parent.appendChild(d);
        });
      } else if (rec.prompt != null) {
        parent.appendChild(el("div", "mrole", "prompt (raw text)"));
        parent.appendChild(pre(s(rec.prompt)));
      }
      if (rec.options) {
        parent.appendChild(el("h3", null, "Options scored (log-probabilities)"));
        var t = el("table"), th = el("tr"), tb = el("tbody");
        ["option", "log-prob", "share of probability"].forEach(function (h) { th.appendChild(el("th", null, h)); });
        var lps = rec.logprobs || [];
        var mx = Math.max.apply(null, lps.filter(function (x) { return x != null; }).concat([-Infinity]));
        var tot = lps.reduce(function (a, x) { return a + (x == null ? 0 : Math.exp(x - mx)); }, 0);
        rec.options.forEach(function (o, k) {
          var lp = lps[k];
          var tr = el("tr", lp != null && lp === mx ? "chosen" : null);
          tr.appendChild(el("td", null, JSON.stringify(o)));
          tr.appendChild(el("td", "num", lp == null ? "-" : lp.toFixed(3)));
          tr.appendChild(el("td", "num", lp == null || !tot ? "-" : (100 * Math.exp(lp - mx) / tot).toFixed(1) + "%"));
          tb.appendChild(tr);
        });
        t.appendChild(el("thead")).appendChild(th);
        t.appendChild(tb);
        parent.appendChild(t);
      }
      parent.appendChild(el("h3", null, rec.kind === "score" ? "Reply (the option chosen)" : "Raw reply"));
      parent.appendChild(pre(rec.response == null ? "(none)" : s(rec.response)));
      if (rec.error != null) {
        parent.appendChild(el("h3", null, "Error"));
        parent.appendChild(pre(s(rec.error)));
      }
    }

    function open(p) {
      if (p < 0 || p >= view.length) return;
      sel = view[p];
      var r = rows[sel];
      content.textContent = "";
      pane.hidden = false;
      var rec = r._r != null ? recs[r._r] : null;
      ptitle.textContent = rec ? rec.id : "row " + (view[p] + 1);
      var sum = {};
      cols.forEach(function (c) { sum[c] = r[c]; });
      if (rec) {
        ["parsed", "gold", "correct", "reading", "model", "kind", "stage", "strategy", "repeat", "item",
         "finish_reason", "prompt_tokens", "completion_tokens", "latency_s", "cached", "time"].forEach(function (k) {
          if (k === "parsed" && rec.parsed === s(rec.response)) return;     // an open answer: the reply itself
          if (!(k in sum) && rec[k] != null) sum[k] = rec[k];
        });
      }
      var others = !rec ? [] : (groups[rec.item + "\u0000" + rec.strategy + "\u0000" + rec.repeat] || [])
        .filter(function (i) { return i !== r._r; })
        .sort(function (a, b) { return (recs[a].role === "model") - (recs[b].role === "model"); });
      others.forEach(function (i) {      // each judge's or segmenter's verdict next to the answer
        var o = recs[i];
        if (o.role !== "model") sum[o.role + " " + o.stage] = o.error != null ? "failed: " + s(o.error) : o.parsed;
      });
      content.appendChild(el("h3", null, "Answer"));
      content.appendChild(kv(sum, Object.keys(sum)));
      if (rec) {
        exchange(content, rec);
        if (others.length) {
          content.appendChild(el("h3", null, "Other calls of this item (" + rec.item + ", " + rec.strategy +
                                             ", repeat " + rec.repeat + ")"));
          others.forEach(function (i) {
            var o = recs[i];
            var d = el("details", "call call-" + o.role);
            if (o.role !== "model") d.open = true;
            var verdict = o.error != null ? "failed: " + s(o.error) : show(o.parsed);
            d.appendChild(el("summary", null, o.role + " \u00b7 " + o.stage + " \u00b7 verdict: " + verdict +
                                                " \u00b7 " + o.model));
            d.appendChild(kv(o, ["id", "parsed", "gold", "correct", "reading"]));
            exchange(d, o);
            content.appendChild(d);
          });
        }
        content.appendChild(el("h3", null, "Item metadata"));
        content.appendChild(kv(rec.meta, Object.keys(rec.meta)));
      }
      pane.scrollTop = 0;
      var y = p * ROW, h = list.clientHeight - head.offsetHeight;
      if (y < list.scrollTop || y + ROW > list.scrollTop + h) list.scrollTop = Math.max(0, y - h / 2);
      draw();
    }
    function close() { pane.hidden = true; sel = -1; draw(); list.focus(); }
    pane.querySelector(".dbar").addEventListener("click", function (ev) {
      var b = ev.target.closest("button");
      if (!b) return;
      var a = b.getAttribute("data-act");
      if (a === "close") close(); else open(view.indexOf(sel) + (a === "next" ? 1 : -1));
    });
    function keys(ev) {
      if (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
      if (ev.key === "Escape" && !pane.hidden) { close(); ev.preventDefault(); }
      var at = view.indexOf(sel);
      if (ev.key === "ArrowDown" || ev.key === "j") { open(Math.min(view.length - 1, at + 1)); ev.preventDefault(); }
      else if (ev.key === "ArrowUp" || ev.key === "k") { open(Math.max(0, at - 1)); ev.preventDefault(); }
      else if (ev.key === "Enter" && pane.hidden) { open(Math.max(0, at)); ev.preventDefault(); }
    }
    list.addEventListener("keydown", keys);
    pane.addEventListener("keydown", keys);
    pane.tabIndex = -1;
    update();
    return { open: open, close: close, view: function () { return view; }, rows: rows };
  }

  window.roleboundViewers = {};
  document.querySelectorAll("[data-viewer]").forEach(function (v) {
    var id = v.getAttribute("data-viewer");
    window.roleboundViewers[id] = Viewer(id);
  });
})();
