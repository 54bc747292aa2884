// Line charts drawn as SVG: a few series of (x, y) points over shared axes,
// with gridlines, tick labels and a legend. No library: the dashboard needs
// only this, and a chart is also described in its aria-label for screen
// readers.

const SVG = "http://www.w3.org/2000/svg";
const MARGIN = { left: 44, right: 8, top: 8, bottom: 20 };

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Round tick step for a span: 1, 2 or 5 times a power of ten.
function niceStep(span, ticks) {
  const raw = span / Math.max(ticks, 1);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function shortNumber(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 10 || a === 0) return `${Math.round(v)}`;
  return `${+v.toPrecision(2)}`;
}

// series: [{name, points: [[x, y], ...]}]; options: xFormat(x) for tick
// labels (default numbers), yMin (default 0), label (for aria-label).
export function drawLines(svg, series, options = {}) {
  const width = svg.clientWidth || 320;
  const height = svg.clientHeight || 160;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  svg.replaceChildren();
  const points = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]));
  const described = series
    .map((s) => {
      const last = s.points.length ? s.points[s.points.length - 1][1] : null;
      return `${s.name}: ${Number.isFinite(last) ? shortNumber(last) : "no data"}`;
    })
    .join(", ");
  svg.setAttribute("aria-label", `${options.label || "chart"}; latest ${described}`);
  if (!points.length) {
    svg.append(svgEl("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no data yet"));
    return;
  }
  let xMin = options.xMin ?? Math.min(...points.map((p) => p[0]));
  let xMax = options.xMax ?? Math.max(...points.map((p) => p[0]));
  if (xMax <= xMin) xMax = xMin + 1;
  const yMin = options.yMin ?? 0;
  let yMax = Math.max(...points.map((p) => p[1]));
  if (!(yMax > yMin)) yMax = yMin + 1;
  const yStep = niceStep(yMax - yMin, 4);
  yMax = Math.ceil(yMax / yStep) * yStep;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const sx = (x) => MARGIN.left + ((x - xMin) / (xMax - xMin)) * plotW;
  const sy = (y) => MARGIN.top + plotH - ((y - yMin) / (yMax - yMin)) * plotH;

  for (let y = yMin; y <= yMax + yStep / 2; y += yStep) {
    svg.append(svgEl("line", { class: "grid", x1: MARGIN.left, x2: width - MARGIN.right, y1: sy(y), y2: sy(y) }));
    svg.append(svgEl("text", { x: MARGIN.left - 4, y: sy(y) + 3, "text-anchor": "end" }, shortNumber(y)));
  }
  const xFormat = options.xFormat || shortNumber;
  const xStep = niceStep(xMax - xMin, 4);
  for (let x = Math.ceil(xMin / xStep) * xStep; x <= xMax; x += xStep)
    svg.append(svgEl("text", { x: sx(x), y: height - 5, "text-anchor": "middle" }, xFormat(x)));
  svg.append(svgEl("line", { class: "axis", x1: MARGIN.left, x2: MARGIN.left, y1: MARGIN.top, y2: MARGIN.top + plotH }));
  svg.append(svgEl("line", { class: "axis", x1: MARGIN.left, x2: width - MARGIN.right, y1: sy(yMin), y2: sy(yMin) }));

  series.forEach((s, i) => {
    const colour = `var(--series-${(i % 3) + 1})`;
    const valid = s.points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]));
    if (valid.length) {
      const d = valid.map((p, j) => `${j ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
      svg.append(svgEl("path", { class: "series", d, stroke: colour, "data-series": s.name }));
      if (valid.length === 1) svg.append(svgEl("circle", { cx: sx(valid[0][0]), cy: sy(valid[0][1]), r: 3, fill: colour }));
    }
    const lx = MARGIN.left + 8 + i * 90;
    svg.append(svgEl("rect", { x: lx, y: MARGIN.top + 2, width: 10, height: 3, fill: colour }));
    svg.append(svgEl("text", { x: lx + 14, y: MARGIN.top + 7 }, s.name));
  });
}
