// The Universe page: draws the owner's graph from /universe/graph.json with cytoscape
// (vendored from npm into static/vendor/ by `make vendor`; no CDN). Selecting a node opens
// its page. The server caps how many memories come back; the page says so and lists the
// same nodes as links, which is also what a reader without JavaScript or a screen reader uses.
(() => {
  const container = document.getElementById("universe-graph");
  if (!container || typeof window.cytoscape !== "function") return;

  const colour = (name, fallback) =>
    getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;

  const style = [
    {
      selector: "node",
      style: {
        label: "data(label)",
        "font-size": 9,
        "min-zoomed-font-size": 7,
        "text-wrap": "ellipsis",
        "text-max-width": 96,
        "text-valign": "bottom",
        "text-margin-y": 3,
        color: colour("--ink", "#22201c"),
        "text-background-color": colour("--paper", "#f7f4ee"),
        "text-background-opacity": 0.8,
        "text-background-padding": 1,
      },
    },
    {
      selector: "node[type = 'memory']",
      style: {
        width: 12,
        height: 12,
        "background-color": colour("--accent", "#2f5d62"),
        "border-width": 1,
        "border-color": "#ffffff",
      },
    },
    {
      selector: "node[type = 'memory'][?gated]",
      style: {
        "background-color": "#ffffff",
        "border-width": 2,
        "border-style": "dashed",
        "border-color": colour("--revoked", "#a8322d"),
      },
    },
    {
      // A memory with photos shows its first one (served through the gate, like every photo).
      selector: "node[type = 'memory'][thumbnail]",
      style: {
        "background-image": "data(thumbnail)",
        "background-fit": "cover",
        "background-image-opacity": 1,
        width: 30,
        height: 30,
      },
    },
    {
      selector: "node[type = 'person']",
      style: {
        shape: "round-rectangle",
        // Wide enough for the name inside it, taller with more memories.
        width: (node) => Math.max(node.data("count") > 20 ? 40 : 24, String(node.data("label")).length * 7 + 12),
        height: "mapData(count, 1, 40, 22, 40)",
        "text-max-width": 140,
        "background-color": colour("--pending-bg", "#fdf1d6"),
        "border-width": 2,
        "border-color": colour("--pending", "#8a5a00"),
        "font-size": 11,
        "font-weight": 600,
        "min-zoomed-font-size": 5,
        "text-valign": "center",
        "text-margin-y": 0,
        "text-background-opacity": 0,
      },
    },
    {
      selector: "edge",
      style: {
        width: 1,
        "line-color": colour("--line-strong", "#cfc7b9"),
        "curve-style": "haystack",
        opacity: 0.8,
      },
    },
    {
      selector: "edge[kind = 'similar']",
      style: { "line-color": colour("--accent", "#2f5d62"), opacity: 0.45 },
    },
    {
      selector: "edge[kind = 'supersedes']",
      style: {
        width: 2,
        "line-color": colour("--pending", "#8a5a00"),
        "line-style": "dashed",
        "curve-style": "straight",
        "target-arrow-shape": "triangle",
        "target-arrow-color": colour("--pending", "#8a5a00"),
      },
    },
    {
      // A label that would lie on another label or node is left out; hovering shows it.
      selector: "node.label-hidden",
      style: { label: "" },
    },
    {
      selector: "node.label-hidden.hover",
      style: { label: "data(label)", "z-index": 10 },
    },
    {
      selector: "node:selected, node.hover",
      style: { "border-width": 3, "border-color": colour("--ink", "#22201c") },
    },
  ];

  // After the layout: keep a label only where it touches no other label and no other node.
  // Boxes are in the graph's own units, so what is true now stays true at every zoom.
  const declutter = (cy) => {
    const overlaps = (a, b) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
    const bodies = cy.nodes().map((node) => ({
      id: node.id(),
      box: node.boundingBox({ includeLabels: false, includeOverlays: false }),
    }));
    const labels = [];
    // People's names first (they sit inside them), then the best-connected memories.
    const order = cy.nodes().sort(
      (a, b) => (b.data("type") === "person") - (a.data("type") === "person") || b.degree() - a.degree()
    );
    order.forEach((node) => {
      node.removeClass("label-hidden");
      if (node.data("type") === "person") return;
      const box = node.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true });
      if (!box.w) return;
      const hit =
        labels.some((other) => overlaps(box, other)) ||
        bodies.some((body) => body.id !== node.id() && overlaps(box, body.box));
      if (hit) node.addClass("label-hidden");
      else labels.push(box);
    });
  };

  const draw = (graph) => {
    container.textContent = "";
    if (!graph.nodes.length) return;
    const elements = [
      ...graph.nodes.map((node) => ({ group: "nodes", data: node })),
      ...graph.links.map((link, index) => ({
        group: "edges",
        data: { id: `e${index}`, source: link.source, target: link.target, kind: link.kind },
      })),
    ];
    const large = graph.nodes.length > 400;
    const cy = window.cytoscape({
      container,
      elements,
      style,
      minZoom: 0.1,
      maxZoom: 4,
      wheelSensitivity: 0.3,
      // Large graphs: draw a bitmap while panning and zooming, edges back when still.
      textureOnViewport: large,
      hideEdgesOnViewport: large,
      pixelRatio: large ? 1 : "auto",
      layout: {
        name: "cose",
        animate: false,
        randomize: true,
        // Labels take room in the layout, so two never lie on top of each other.
        nodeDimensionsIncludeLabels: true,
        numIter: large ? 300 : 1000,
        idealEdgeLength: () => 60,
        nodeRepulsion: () => 9000,
        gravity: 0.6,
        componentSpacing: 60,
        padding: 20,
      },
    });
    cy.on("tap", "node", (event) => {
      const url = event.target.data("url");
      if (url) window.location.assign(url);
    });
    cy.on("mouseover", "node", (event) => {
      event.target.addClass("hover");
      container.style.cursor = "pointer";
      container.title = event.target.data("label") + (event.target.data("gated") ? " (agents cannot see)" : "");
    });
    cy.on("mouseout", "node", (event) => {
      event.target.removeClass("hover");
      container.style.cursor = "";
      container.title = "";
    });
    declutter(cy);
    cy.on("layoutstop", () => declutter(cy));
    cy.on("dragfree", "node", () => declutter(cy));
    container.dataset.drawn = String(graph.nodes.length);
    window.keepsakeUniverse = cy; // for the browser tests and the curious
  };

  fetch(container.dataset.graphUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return response.json();
    })
    .then(draw)
    .catch(() => {
      container.textContent = "The graph could not be drawn. The list below has the same memories and people.";
    });
})();
