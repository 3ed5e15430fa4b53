(() => {
  const data = JSON.parse(document.getElementById("run-data").textContent);
  const $ = (id) => document.getElementById(id);
  const money = (cost) => (data.priced ? `$${cost.toFixed(4)}` : "unpriced");  // no price: unknown, never $0
  const plural = (count, noun) => `${count} ${noun}${count === 1 ? "" : "s"}`;
  const REF = /\[(\d+)\]\(([^()\s:]+):(\d+)(?:-(\d+))?\)/g;

  function withRefs(target, text) {
    target.textContent = "";
    let last = 0;
    for (const match of (text || "").matchAll(REF)) {
      target.append(text.slice(last, match.index));
      const link = document.createElement("a");
      link.className = "ref";
      link.textContent = match[0];
      link.title = `${match[2]}:${match[3]}`;
      link.href = "#heat";  // a link a keyboard reaches too (Tab, Enter)
      link.addEventListener("click", (event) => {
        event.preventDefault();
        showChunk(match[2], Number(match[3]), Number(match[4] || match[3]));
      });
      target.append(link);
      last = match.index + match[0].length;
    }
    target.append(text ? text.slice(last) : "—");
  }

  function showChunk(path, first, last) {
    document.querySelectorAll("#heat tr.highlight").forEach((row) => row.classList.remove("highlight"));
    data.chunks.forEach((chunk, index) => {
      if (chunk.file === path && chunk.lines.some((line) => line >= first && line <= last)) {
        const row = document.querySelector(`#heat tr[data-chunk="${index}"]`);
        row.classList.add("highlight");
        row.scrollIntoView({ block: "nearest" });
      }
    });
  }

  let callData = null;  // parsed on the first click: the page opens without reading every prompt
  function calls() {
    if (!callData) callData = JSON.parse(document.getElementById("call-data").textContent);
    return callData;
  }

  function expand(runs) {
    const { lines } = calls();
    const out = [];
    for (let i = 0; i < runs.length; i += 2) {
      for (let n = runs[i]; n < runs[i] + runs[i + 1]; n++) out.push(lines[n]);
    }
    return out.join("\n");
  }

  function callDetails(index) {
    const call = calls().calls[String(index)];
    const box = document.createElement("details");
    box.className = call.discarded ? "call discarded" : "call";
    const summary = document.createElement("summary");
    summary.textContent = `#${call.index} ${call.kind}: ${call.prompt_chars.toLocaleString()} prompt chars, ` +
      `${call.prompt_tokens} in (${call.cached_tokens} cached) / ${call.response_tokens} out, ${money(call.cost)}` +
      (call.rejected ? ` · ✗ rejected: ${call.rejected}` : "") +
      (call.discarded ? ` · discarded (paid, not in the run's history): ${call.discarded}` : "");
    const prompt = document.createElement("pre");
    prompt.className = "prompt";
    prompt.textContent = expand(call.text[0]);
    const response = document.createElement("pre");
    response.className = "response";
    response.textContent = expand(call.text[1]);
    box.append(summary, "prompt", prompt, "response", response);
    return box;
  }

  function showCandidates(node) {
    $("panel-sampling").hidden = !node.candidates.length;
    const list = $("panel-candidates");
    list.textContent = "";
    const choice = node.choice || {};
    $("panel-choice").textContent = `${choice.method || ""} · ${plural(choice.samples || 0, "sample")}, ${plural(choice.calls || 0, "choosing call")}`
      + (choice.model ? ` on ${choice.model}` : "") + (choice.fallback ? " · fallback (unusable reply)" : "");
    node.candidates.forEach((entry) => {
      const candidate = typeof entry === "string" ? { action_type: entry, action_params: {}, samples: 1, thought: "" } : entry;
      const item = document.createElement("li");
      item.className = candidate.chosen ? "chosen" : "";
      const head = document.createElement("div");
      head.textContent = `${candidate.chosen ? "✓ ran · " : ""}${candidate.samples}× ${candidate.action_type} `
        + JSON.stringify(candidate.action_params);
      const thought = document.createElement("div");
      thought.className = "dim";
      thought.textContent = candidate.thought;
      item.append(head, thought);
      list.append(item);
    });
    const reasons = choice.reason ? [choice.reason] : (choice.rounds || []).map((r) => `${r.pair[0]} vs ${r.pair[1]} → ${r.winner}: ${r.reason}`);
    reasons.forEach((text) => {
      const reason = document.createElement("pre");
      reason.className = "response";
      reason.textContent = text;
      list.append(reason);
    });
  }

  function select(group) {
    document.querySelectorAll("#tree .node.selected").forEach((node) => node.classList.remove("selected"));
    group.classList.add("selected");
    const node = data.nodes[group.dataset.key];
    $("panel-empty").hidden = true;
    $("panel-body").hidden = false;
    $("panel-title").textContent = `[${node.id}] ${node.action_type}` + (node.attempt ? ` (attempt ${node.attempt})` : "");
    const facts = [`marks: ${node.marks.join(", ")}`, `duration ${node.duration.toFixed(2)} s`, `cost ${money(node.cost)}`];
    if (node.denied) facts.push(`not run: ${node.denied}`);  // (its exit code -1 a placeholder)
    else if (node.returncode !== null) facts.push(`exit code ${node.returncode}`);
    $("panel-facts").textContent = facts.join(" · ");
    withRefs($("panel-thought"), node.thought);
    $("panel-action").textContent = `${node.action_type} ${JSON.stringify(node.action_params, null, 2)}`;
    $("panel-observation").textContent = node.observation || "—";
    showCandidates(node);
    withRefs($("panel-summary"), node.summary);
    withRefs($("panel-lessons"), node.lessons);
    const calls = $("panel-calls");
    calls.textContent = node.calls.length ? "" : "—";
    node.calls.forEach((index) => calls.append(callDetails(index)));
  }

  function drawStrips() {
    const cell = data.cell;
    document.querySelectorAll("#heat tr").forEach((row) => {
      const chunk = data.chunks[Number(row.dataset.chunk)];
      const canvas = row.querySelector("canvas.strip");
      const paint = canvas.getContext("2d");
      const top = Math.max(...chunk.scores, 0) || 1;
      chunk.scores.forEach((score, step) => {
        paint.fillStyle = `rgba(234, 88, 12, ${0.08 + 0.92 * score / top})`;
        paint.fillRect(step * cell, 1, cell - 1, cell * 2 - 2);
        if (chunk.shown[step]) {
          paint.strokeStyle = "#1d2330";
          paint.strokeRect(step * cell + 0.5, 1.5, cell - 2, cell * 2 - 3);
        }
      });
      canvas.addEventListener("mousemove", (event) => {
        const step = Math.floor(event.offsetX / cell);
        if (step < chunk.scores.length) {
          canvas.title = `step ${step + 1}: score ${chunk.scores[step]}${chunk.shown[step] ? ", shown" : ""}`;
        }
      });
    });
  }
  drawStrips();

  const before = $("before-steps");  // the calls of a phase before the first step (no operation's)
  if (before) {
    before.addEventListener("toggle", () => {
      const list = $("before-calls");
      if (before.open && !list.childElementCount) data.before.forEach((index) => list.append(callDetails(index)));
    });
  }

  document.querySelectorAll("#tree .node").forEach((group) => {
    group.addEventListener("click", () => select(group));
    group.addEventListener("keydown", (event) => { if (event.key === "Enter") select(group); });
  });
})();
