// blackbox console: the little script the investigation pages use. Every page works without it (the
// server checks each form; a running job's page refreshes itself in <noscript>). It only fetches from
// the console, sets text with textContent, never as markup (capture content is hostile), and runs
// under a CSP that forbids inline script and eval.
"use strict";

(function () {
  // -- a running job: follow its status; redraw a probe's chart as points finish; reload at the end --
  function followJob(job) {
    var url = job.dataset.status;
    var every = Math.max(200, parseInt(job.dataset.pollMs || "500", 10));
    var state = document.getElementById("job-state");
    var chart = document.getElementById("probe-chart");
    var caption = document.getElementById("chart-progress");
    var shown = chart ? parseInt(chart.dataset.points || "0", 10) : 0;

    function progress(s) {
      var line = document.getElementById("progress");
      if (s.state !== "running") return;
      if (!line) {
        line = document.createElement("span");
        line.id = "progress";
        state.parentNode.appendChild(document.createTextNode(" · "));
        state.parentNode.appendChild(line);
      }
      line.textContent = s.done + " of " + s.total + " replays done";
    }

    function poll() {
      fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("status " + r.status);
          return r.json();
        })
        .then(function (s) {
          if (s.finished) {
            window.location.reload();
            return;
          }
          state.textContent = s.state;
          var queued = document.getElementById("queue-position");
          if (queued && s.position) queued.textContent = "position " + s.position + " in the queue";
          else if (queued) queued.textContent = "started";
          progress(s);
          if (s.points !== null && !chart) {
            window.location.reload(); // the probe has planned its chart since the page was drawn
            return;
          }
          if (s.points !== null && s.points !== shown) {
            shown = s.points;
            chart.src = chart.src.split("?")[0] + "?points=" + shown;
            chart.dataset.points = String(shown);
            if (caption) caption.textContent = shown + " of " + s.planned + " points judged";
          }
          window.setTimeout(poll, every);
        })
        .catch(function () {
          window.setTimeout(poll, every * 4); // the server restarting, a dropped connection: keep trying
        });
    }
    window.setTimeout(poll, every);
  }

  // -- the finding form: the rule's compile error as it is typed, then what it matches --------------
  function checkRule(form) {
    var rule = document.getElementById("finding-rule");
    var status = document.getElementById("rule-status");
    var list = document.getElementById("rule-matches");
    var sent = 0;
    var timer = 0;
    var last = null;

    function show(text, kind) {
      status.textContent = text;
      status.className = kind;
    }

    function examples(ids) {
      while (list.firstChild) list.removeChild(list.firstChild);
      ids.forEach(function (id) {
        var item = document.createElement("li");
        var link = document.createElement("a");
        link.href = form.dataset.decisions + encodeURIComponent(id);
        link.textContent = id;
        link.className = "rule-match";
        item.appendChild(link);
        list.appendChild(item);
      });
    }

    function check() {
      var body = new URLSearchParams();
      ["csrf", "rule", "from_replay", "decision"].forEach(function (name) {
        var field = form.elements.namedItem(name);
        body.append(name, field ? field.value : "");
      });
      var key = body.toString();
      if (key === last) return;
      last = key;
      var mine = ++sent;
      if (!rule.value.trim()) {
        show("", "muted");
        examples([]);
        return;
      }
      show("checking…", "muted");
      fetch(form.dataset.check, { method: "POST", body: body, credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (!r.ok) throw new Error("the check was refused (HTTP " + r.status + ")");
          return r.json();
        })
        .then(function (p) {
          if (mine !== sent) return; // an answer to an older text
          if (!p.ok) {
            show(p.error, "problem");
            examples([]);
            return;
          }
          var w = p.window;
          show(
            "Compiles. Matches " + p.pinned.length + " of the " + p.candidates + " candidate(s) (pinned on Record); " +
              w.matched + " of the " + w.decisions + " newest decisions of the last " + w.hours + " h.",
            "ok"
          );
          examples(p.examples);
        })
        .catch(function (e) {
          if (mine === sent) show(String(e.message || e), "problem");
        });
    }

    form.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(check, 300);
    });
    if (rule.value.trim()) check();
  }

  function start() {
    var job = document.getElementById("job");
    if (job && job.dataset.status) followJob(job);
    var form = document.getElementById("finding-form");
    if (form && form.dataset.check) checkRule(form);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
