// Attention Lab heatmap: a grid of heatmap panels drawn on one <canvas>, with a hover
// tooltip found by arithmetic on the pointer position (no per-cell marks).
//
// Mounted by dashboard/charts/canvas.py as a Streamlit components-v2 module; its data is the spec
// built by dashboard.charts.heatmap_canvas_spec. Streamlit calls the default export again
// with new data on every rerun; the canvas is kept and redrawn, so nothing flickers.

const FONT = "sans-serif";
// Text sizes at font_scale 1; the presentation view sends a larger scale (labels of 16 px).
const BASE_PX = { title: 16, label: 10, axisTitle: 11, panelTitle: 13, subtitle: 12 };
const PAD = 5;
const PANEL_GAP = 20;
const TICK = 4;
const LEGEND_GAP = 18;
const LEGEND_BAR_W = 16;
const LEGEND_BAR_H = 200;
const LEGEND_TICKS = 5;
const LEGEND_MIN_H = 120; // a 1 × 1 map still gets a bar its tick labels fit along
const LEGEND_TICK_GAP = 22; // px between tick labels at least
const X_LABEL_ANGLE = (-60 * Math.PI) / 180;
const MISSING_RGB = [221, 221, 221];
const CJK = /[\u3000-\u9fff\uff00-\uffef]/;
const MAX_LABEL_STEP = 8;
const TIP_OFFSET = 14;

function decodeFloats(b64) {
  if (!b64) return null;
  const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
  return new Float32Array(bytes.buffer);
}

function parseStops(hex) {
  const stops = [];
  for (let i = 0; i + 6 <= hex.length; i += 6) {
    stops.push([0, 2, 4].map((j) => parseInt(hex.slice(i + j, i + j + 2), 16)));
  }
  return stops;
}

// Piecewise-linear RGB interpolation over evenly spaced stops (how Vega samples a scheme).
function colourAt(stops, t) {
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  return stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * f));
}

// The scale's transform normalised to [0, 1] over its domain (sqrt or linear): where a value
// sits along the legend bar, bottom to top, as in a Vega gradient legend.
function fraction(scale) {
  const [lo, hi] = scale.domain;
  const warp = scale.type === "sqrt" ? (v) => Math.sign(v) * Math.sqrt(Math.abs(v)) : (v) => v;
  const a = warp(lo);
  const span = warp(hi) - a || 1;
  return (v) => (warp(v) - a) / span;
}

// value -> position in [0, 1] on the colour ramp (the fraction, reversed for a reversed scale)
function ramp(scale) {
  const toF = fraction(scale);
  return scale.reverse ? (v) => 1 - toF(v) : toF;
}

function formatNumber(v, fmt) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  if (!Number.isFinite(v)) return v < 0 ? "−∞" : "∞"; // a masked score: softmax gives it 0
  if (fmt.kind === "e") return v.toExponential(fmt.digits);
  if (fmt.kind === "g") return String(Number(v.toPrecision(Math.max(fmt.digits, 1))));
  return v.toFixed(fmt.digits);
}

// The text sizes of one heatmap (its spec's font_scale), set by layout() before each drawing:
// every heatmap is laid out and drawn in one synchronous call.
let F = fontsFor({});

function fontsFor(spec) {
  const k = spec.font_scale || 1;
  const kt = spec.title_scale || 1; // titles grow less: they are long
  const scaled = (name, v) => Math.round(v * (name === "title" || name === "subtitle" ? kt : k));
  const px = Object.fromEntries(Object.entries(BASE_PX).map(([name, v]) => [name, scaled(name, v)]));
  px.yGap = px.label + 2; // rows closer than this show every k-th label
  px.xGap = Math.ceil((px.label + 2) / Math.sin(-X_LABEL_ANGLE));
  return px;
}

function fontOf(px, bold) {
  return `${bold ? "bold " : ""}${px}px ${FONT}`;
}

function fitText(ctx, text, limit) {
  if (ctx.measureText(text).width <= limit) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(cut + "…").width > limit) cut = cut.slice(0, -1);
  return cut + "…";
}

function widest(ctx, labels, font, limit) {
  ctx.font = font;
  let w = 0;
  for (const label of labels) w = Math.max(w, Math.min(limit, ctx.measureText(label).width));
  return w;
}

// Indices of the axis labels to draw: every k-th, k chosen so that labels `gap` pixels apart
// (one cell each) never overlap; no labels when cells are too small for even every 8th.
function labelledIndices(n, cellPx, gap) {
  const step = Math.max(1, Math.ceil(gap / cellPx));
  if (step > MAX_LABEL_STEP) return [];
  const indices = [];
  for (let i = 0; i < n; i += step) indices.push(i);
  return indices;
}

function niceTicks(lo, hi, count) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = span / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= count) || 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

function tickText(v, ticks) {
  const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : Math.abs(v) || 1;
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  return v.toFixed(decimals);
}

// The cells' size: the spec's, or in the presentation view (a font scale above 1) grown
// until each panel is at least `minSide` px on its shorter side (never a map smaller than its
// legend, or shorter than its turned y title), then as much smaller as it takes for the drawing
// to fit `maxWidth` with its text at full size (a canvas wider than its column is shrunk whole
// by the page, its text with it).
function fittedCell(spec, fixedWidth, maxWidth, minSide = 0) {
  const [cellW, cellH] = spec.cell;
  const across = Math.max(1, Math.min(spec.columns, spec.panels.length)) * spec.cols.length;
  if (!((spec.font_scale || 1) > 1) || !(maxWidth > 0)) return [cellW, cellH];
  const side = Math.min(cellW * spec.cols.length, cellH * spec.rows.length);
  const grow = side > 0 && side < minSide ? minSide / side : 1;
  const [w0, h0] = [Math.ceil(cellW * grow), Math.ceil(cellH * grow)];
  const fitW = Math.floor((maxWidth - fixedWidth) / across);
  if (fitW >= w0) return [w0, h0];
  const w = Math.max(1, fitW);
  return [w, Math.max(1, Math.round((h0 * w) / w0))];
}

// A table of panels (spec.grid: BertViz's model view, a row per layer and a column per
// head): headers instead of panel titles and tick labels, cells as large as spec.cell
// and as small as it takes for the drawing to fit `maxWidth` (fractional pixels: each panel
// is one image scaled).
function gridLayout(ctx, spec, maxWidth) {
  const g = spec.grid;
  const R = spec.rows.length;
  const C = spec.cols.length;
  const nCols = g.col_names.length;
  const nRows = g.row_names.length;
  const wrapWidth = (spec.font_scale || 1) > 1 && maxWidth > 0 ? maxWidth - 2 * PAD : 0;
  ctx.font = fontOf(F.title, true);
  const titles = titleLines(ctx, spec.title, wrapWidth);
  ctx.font = fontOf(F.subtitle);
  const subtitles = titleLines(ctx, spec.subtitle, wrapWidth);
  const headW = Math.max(widest(ctx, g.row_names, fontOf(F.label), spec.label_limit),
                         widest(ctx, [g.row_title], fontOf(F.label, true), spec.label_limit));
  const left = PAD + headW + TICK + 2;
  ctx.font = fontOf(F.axisTitle, true);
  const legendW = Math.max(ctx.measureText(spec.legend_title || spec.value_title).width,
                           LEGEND_BAR_W + TICK + 40);
  const fixed = left + (nCols - 1) * g.gap + LEGEND_GAP + legendW + PAD;
  const [w0, h0] = spec.cell;
  const fit = maxWidth > 0 ? (maxWidth - fixed) / (nCols * C) : w0;
  const cellW = Math.max(1, Math.min(w0, fit));
  const cellH = (h0 * cellW) / w0;
  const panelW = cellW * C;
  const panelH = cellH * R;
  const top = PAD + titles.length * (F.title + 6) + subtitles.length * (F.subtitle + 4) +
              (F.axisTitle + 6) + (F.label + 6);
  const panels = spec.panels.map((name, p) => {
    const col = p % nCols;
    const row = Math.floor(p / nCols);
    return { name, col, row, x: left + col * (panelW + g.gap), y: top + row * (panelH + g.gap),
             yLabels: false, xLabels: false };
  });
  const gridRight = left + nCols * panelW + (nCols - 1) * g.gap;
  const gridBottom = top + nRows * panelH + (nRows - 1) * g.gap;
  const legendX = gridRight + LEGEND_GAP;
  const legend = legendBox(top, gridBottom, spec);
  const width = Math.ceil(
    Math.max(legendX + legendW + PAD, PAD + measureTitles(ctx, titles, subtitles) + PAD),
  );
  const height = Math.ceil(Math.max(gridBottom + PAD, legend.barTop + legend.h + 40));
  return { cellW, cellH, R, C, panelW, panelH, panels, top, left, legendX, legendW, legend,
           width, height, gridBottom, xLabelH: 0, yShown: [], xShown: [], titles, subtitles,
           upright: false, yTitleW: 0, gridRight };
}

// The grid's headers: its column title over the columns, each column's name over it, the
// row title above the row names, each row's name left of its row.
function drawGridHeaders(ctx, spec, box, ink) {
  const g = spec.grid;
  ctx.fillStyle = ink;
  ctx.textBaseline = "bottom";
  ctx.textAlign = "center";
  const namesBottom = box.top - 4;
  ctx.font = fontOf(F.axisTitle, true);
  ctx.fillText(g.col_title, (box.left + box.gridRight) / 2, namesBottom - F.label - 4);
  ctx.font = fontOf(F.label);
  const across = box.panels.filter((panel) => panel.row === 0);
  for (const panel of across) {
    ctx.fillText(g.col_names[panel.col], panel.x + box.panelW / 2, namesBottom);
  }
  ctx.textAlign = "right";
  ctx.font = fontOf(F.label, true);
  ctx.fillText(fitText(ctx, g.row_title, spec.label_limit), box.left - TICK, namesBottom);
  ctx.font = fontOf(F.label);
  ctx.textBaseline = "middle";
  for (const panel of box.panels.filter((p) => p.col === 0)) {
    ctx.fillText(g.row_names[panel.row], box.left - TICK, panel.y + box.panelH / 2);
  }
}

// Where everything goes, in CSS pixels (`maxWidth`: the column's width, or 0).
function layout(ctx, spec, maxWidth = 0) {
  F = fontsFor(spec);
  if (spec.grid) return gridLayout(ctx, spec, maxWidth);
  let [cellW, cellH] = spec.cell;
  const R = spec.rows.length;
  const C = spec.cols.length;
  const P = spec.panels.length;
  const nCols = Math.max(1, Math.min(spec.columns, P));
  const nRows = Math.ceil(P / nCols);
  // in the presentation view a title wider than the column is broken into lines
  const wrapWidth = (spec.font_scale || 1) > 1 && maxWidth > 0 ? maxWidth - 2 * PAD : 0;
  ctx.font = fontOf(F.title, true);
  const titles = titleLines(ctx, spec.title, wrapWidth);
  ctx.font = fontOf(F.subtitle);
  const subtitles = titleLines(ctx, spec.subtitle, wrapWidth);
  const titleH = titles.length * (F.title + 6);
  const subtitleH = subtitles.length * (F.subtitle + 4);
  const panelTitleH = spec.panel_title !== null ? F.panelTitle + 6 : 0;
  ctx.font = fontOf(F.axisTitle, true);
  const legendW0 = Math.max(ctx.measureText(spec.legend_title || spec.value_title).width, LEGEND_BAR_W + TICK + 40);
  const yAll = widest(ctx, spec.rows, fontOf(F.label), spec.label_limit) + TICK + 3;
  const fixed = PAD + F.axisTitle + 6 + yAll + (nCols - 1) * PANEL_GAP + LEGEND_GAP + legendW0 + PAD;
  // a panel as tall and as wide as its legend, and as tall as its y title turned along it
  ctx.font = fontOf(F.axisTitle, true);
  const turnedTitle = CJK.test(spec.y_title || "") ? 0 : ctx.measureText(spec.y_title || "").width;
  const minSide = Math.max(LEGEND_MIN_H + F.axisTitle + 8, legendW0, turnedTitle);
  [cellW, cellH] = fittedCell(spec, fixed, maxWidth, minSide);
  const yTitleW = turnedTitle;
  const panelW = cellW * C;
  const panelH = cellH * R;
  const yShown = labelledIndices(R, cellH, F.yGap);
  const xShown = labelledIndices(C, cellW, F.xGap);
  const yLabelW = yShown.length
    ? widest(ctx, yShown.map((r) => spec.rows[r]), fontOf(F.label), spec.label_limit) + TICK + 3
    : 0;
  const xLabelH = xShown.length
    ? widest(ctx, xShown.map((c) => spec.cols[c]), fontOf(F.label), spec.label_limit) *
        Math.sin(-X_LABEL_ANGLE) + F.label * Math.cos(X_LABEL_ANGLE) + TICK + 3
    : 0;
  // a y title in CJK characters stands upright on its own line above the grid (turned, it
  // would lie on its side); a Latin one is turned along the y axis
  const upright = CJK.test(spec.y_title || "");
  const yTitleH = upright ? F.axisTitle + 6 : 0;
  const left = PAD + (upright ? 0 : F.axisTitle + 6) + yLabelW;
  const top = PAD + titleH + subtitleH + yTitleH;
  const panels = spec.panels.map((name, p) => {
    const col = p % nCols;
    const row = Math.floor(p / nCols);
    return {
      name,
      col,
      row,
      x: left + col * (panelW + PANEL_GAP),
      y: top + panelTitleH + row * (panelH + panelTitleH + PANEL_GAP),
      yLabels: col === 0,
      xLabels: row === nRows - 1,
    };
  });
  const gridRight = left + nCols * panelW + (nCols - 1) * PANEL_GAP;
  const gridBottom = top + nRows * (panelH + panelTitleH) + (nRows - 1) * PANEL_GAP;
  ctx.font = fontOf(F.axisTitle, true);
  const legendTitleW = ctx.measureText(spec.legend_title || spec.value_title).width;
  const legendX = gridRight + LEGEND_GAP;
  const legendW = Math.max(legendTitleW, LEGEND_BAR_W + TICK + 40);
  const width = Math.ceil(
    Math.max(legendX + legendW + PAD, PAD + measureTitles(ctx, titles, subtitles) + PAD),
  );
  const legend = legendBox(top, gridBottom, spec);
  const height = Math.ceil(
    Math.max(gridBottom + xLabelH + F.axisTitle + 10 + PAD, legend.barTop + legend.h + 40),
  );
  return { cellW, cellH, R, C, panelW, panelH, panels, top, left, legendX, legendW, legend,
           width, height, gridBottom, xLabelH, yShown, xShown, titles, subtitles, upright,
           yTitleW };
}

// A title as lines no wider than `maxWidth` (broken at spaces, or between CJK characters);
// one line when it fits or `maxWidth` is 0; none for an empty title. Uses ctx's font.
function titleLines(ctx, text, maxWidth) {
  if (!text) return [];
  if (!(maxWidth > 0) || ctx.measureText(text).width <= maxWidth) return [text];
  const pieces = text.match(/[\u3000-\u9fff\uff00-\uffef]|[^\s\u3000-\u9fff\uff00-\uffef]+\s*|\s+/g);
  const lines = [];
  let line = "";
  for (const piece of pieces || [text]) {
    if (line.trim() && ctx.measureText(line + piece).width > maxWidth) {
      lines.push(line.trimEnd());
      line = piece.trimStart();
    } else {
      line += piece;
    }
  }
  if (line.trim()) lines.push(line.trimEnd());
  return lines;
}

function measureTitles(ctx, titles, subtitles) {
  ctx.font = fontOf(F.title, true);
  let w = Math.max(0, ...titles.map((line) => ctx.measureText(line).width));
  ctx.font = fontOf(F.subtitle);
  for (const line of subtitles) w = Math.max(w, ctx.measureText(line).width);
  return w;
}

// One panel's cells as an R x C image (one pixel per cell), scaled up without smoothing.
function panelImage(values, offset, R, C, toT, stops) {
  const image = new ImageData(C, R);
  const px = image.data;
  for (let i = 0; i < R * C; i++) {
    const v = values[offset + i];
    const rgb = Number.isNaN(v) ? MISSING_RGB : colourAt(stops, toT(v));
    px[4 * i] = rgb[0];
    px[4 * i + 1] = rgb[1];
    px[4 * i + 2] = rgb[2];
    px[4 * i + 3] = 255;
  }
  const tile = document.createElement("canvas");
  tile.width = C;
  tile.height = R;
  tile.getContext("2d").putImageData(image, 0, 0);
  return tile;
}

function draw(canvas, spec, values, ink, maxWidth) {
  const ctx = canvas.getContext("2d");
  const box = layout(ctx, spec, maxWidth);
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(box.width * dpr);
  canvas.height = Math.round(box.height * dpr);
  canvas.style.width = `${box.width}px`;
  canvas.dataset.labelPx = String(F.label); // the tick labels' size, before any shrinking
  canvas.style.aspectRatio = `${box.width} / ${box.height}`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, box.width, box.height);
  ctx.fillStyle = ink;
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  let y = PAD;
  ctx.font = fontOf(F.title, true);
  for (const line of box.titles) {
    ctx.fillText(line, PAD, y);
    y += F.title + 6;
  }
  ctx.font = fontOf(F.subtitle);
  for (const line of box.subtitles) {
    ctx.fillText(line, PAD, y);
    y += F.subtitle + 4;
  }
  const stops = parseStops(spec.scale.colors);
  const toT = ramp(spec.scale);
  const { R, C, panelW, panelH } = box;
  ctx.imageSmoothingEnabled = false;
  box.panels.forEach((panel, p) => {
    ctx.drawImage(panelImage(values, p * R * C, R, C, toT, stops), panel.x, panel.y, panelW, panelH);
    if (spec.panel_title !== null) {
      ctx.font = fontOf(F.panelTitle, true);
      ctx.textAlign = "center";
      ctx.textBaseline = "bottom";
      ctx.fillText(fitText(ctx, panel.name, panelW + PANEL_GAP - 4), panel.x + panelW / 2,
                   panel.y - 4);
    }
    drawAxes(ctx, spec, box, panel, ink);
  });
  if (spec.grid) drawGridHeaders(ctx, spec, box, ink);
  else drawAxisTitles(ctx, spec, box);
  drawLegend(ctx, spec, box, stops, ink);
  return box;
}

function drawAxes(ctx, spec, box, panel, ink) {
  const { cellW, cellH, panelH } = box;
  ctx.strokeStyle = "#888";
  ctx.lineWidth = 1;
  ctx.font = fontOf(F.label);
  ctx.fillStyle = ink;
  if (panel.yLabels) {
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const r of box.yShown) {
      const cy = panel.y + (r + 0.5) * cellH;
      ctx.beginPath();
      ctx.moveTo(panel.x - TICK, cy);
      ctx.lineTo(panel.x, cy);
      ctx.stroke();
      ctx.fillText(fitText(ctx, spec.rows[r], spec.label_limit), panel.x - TICK - 2, cy);
    }
  }
  if (panel.xLabels) {
    for (const c of box.xShown) {
      const cx = panel.x + (c + 0.5) * cellW;
      const by = panel.y + panelH;
      ctx.beginPath();
      ctx.moveTo(cx, by);
      ctx.lineTo(cx, by + TICK);
      ctx.stroke();
      ctx.save();
      ctx.translate(cx, by + TICK + 2);
      ctx.rotate(X_LABEL_ANGLE);
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(fitText(ctx, spec.cols[c], spec.label_limit), 0, 0);
      ctx.restore();
    }
  }
}

function drawAxisTitles(ctx, spec, box) {
  ctx.font = fontOf(F.axisTitle, true);
  const lastRow = box.panels.filter((p) => p.xLabels);
  const midX = (Math.min(...lastRow.map((p) => p.x)) + Math.max(...lastRow.map((p) => p.x)) +
                box.panelW) / 2;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  ctx.fillText(spec.x_title, midX, box.gridBottom + box.xLabelH + 4);
  if (box.upright) {
    ctx.textAlign = "left";
    ctx.textBaseline = "bottom";
    ctx.fillText(spec.y_title, PAD, box.top - 4);
    return;
  }
  const leftCol = box.panels.filter((p) => p.yLabels);
  const midY = (leftCol[0].y + leftCol[leftCol.length - 1].y + box.panelH) / 2;
  ctx.save();
  ctx.translate(PAD, midY);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "top";
  ctx.fillText(spec.y_title, 0, 0);
  ctx.restore();
}

function legendBox(gridTop, gridBottom, spec) {
  // the title sits under the chart's title band (never over a long chart title), the bar
  // under it, as tall as the grid but at least LEGEND_MIN_H
  const top = gridTop + (spec.panel_title !== null ? F.panelTitle + 6 : 0);
  const titleBottom = top + F.axisTitle + 2;
  const barTop = titleBottom + Math.ceil(F.label / 2) + 4; // the top tick's label clears the title
  const h = Math.min(LEGEND_BAR_H, Math.max(LEGEND_MIN_H, gridBottom - barTop));
  return { titleBottom, barTop, h, ...legendTicks(spec.scale, h) };
}

// The legend's ticks: round values (niceTicks) at their place on the scale's own transform
// (y: px below the bar's top), each label at least a gap from the next. On a square-root
// scale round values crowd the top (0.8 and 1.0 sit a tenth of the bar apart), so ticks are
// kept from the top down, skipping any too close to the last kept; the bottom end is kept
// in place of the tick above it. `round`: every round value (their step sets the decimals).
function legendTicks(scale, h) {
  const [lo, hi] = scale.domain;
  const toF = fraction(scale);
  const gap = Math.max(LEGEND_TICK_GAP, F.label + 6);
  const round = niceTicks(lo, hi, Math.max(2, Math.min(LEGEND_TICKS, Math.floor(h / gap))));
  const all = round.map((value) => ({ value, y: (1 - toF(value)) * h })).reverse();
  const kept = [];
  for (const tick of all) {
    if (!kept.length || tick.y - kept[kept.length - 1].y >= gap) kept.push(tick);
  }
  const bottom = all[all.length - 1];
  if (kept[kept.length - 1] !== bottom && kept.length > 1) kept[kept.length - 1] = bottom;
  return { ticks: kept, round };
}

function drawLegend(ctx, spec, box, stops, ink) {
  const x = box.legendX;
  const { titleBottom, barTop: top, h } = box.legend;
  ctx.font = fontOf(F.axisTitle, true);
  ctx.fillStyle = ink;
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  ctx.fillText(spec.legend_title || spec.value_title, x, titleBottom);
  // the bar is the colour ramp laid along the scale's own transform, bottom = domain start
  const colourOfFraction = spec.scale.reverse ? (f) => colourAt(stops, 1 - f)
                                              : (f) => colourAt(stops, f);
  for (let i = 0; i < h; i++) {
    const rgb = colourOfFraction(1 - (i + 0.5) / h);
    ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
    ctx.fillRect(x, top + i, LEGEND_BAR_W, 1);
  }
  ctx.strokeStyle = "#888";
  ctx.lineWidth = 1;
  ctx.strokeRect(x + 0.5, top + 0.5, LEGEND_BAR_W - 1, h - 1);
  ctx.font = fontOf(F.label);
  ctx.textBaseline = "middle";
  ctx.fillStyle = ink;
  ctx.strokeStyle = ink;
  for (const { value, y } of box.legend.ticks) {
    const ty = top + y;
    ctx.beginPath();
    ctx.moveTo(x + LEGEND_BAR_W, ty);
    ctx.lineTo(x + LEGEND_BAR_W + TICK, ty);
    ctx.stroke();
    ctx.fillText(tickText(value, box.legend.round), x + LEGEND_BAR_W + TICK + 2, ty);
  }
}

// The cell under a pointer position given in CSS pixels of the drawn layout, or null.
function cellAt(box, px, py) {
  for (let p = 0; p < box.panels.length; p++) {
    const panel = box.panels[p];
    const c = Math.floor((px - panel.x) / box.cellW);
    const r = Math.floor((py - panel.y) / box.cellH);
    if (c >= 0 && c < box.C && r >= 0 && r < box.R) return { p, r, c };
  }
  return null;
}

function tooltipRows(spec, values, scores, hit) {
  const i = hit.p * spec.rows.length * spec.cols.length + hit.r * spec.cols.length + hit.c;
  const rows = [];
  if (spec.grid) {
    const across = spec.grid.col_names.length;
    rows.push([spec.grid.row_title, spec.grid.row_names[Math.floor(hit.p / across)]]);
    rows.push([spec.grid.col_title, spec.grid.col_names[hit.p % across]]);
  }
  if (spec.panel_title !== null) rows.push([spec.panel_title, spec.panels[hit.p]]);
  rows.push([spec.y_title, spec.rows[hit.r]]);
  rows.push([spec.x_title, spec.cols[hit.c]]);
  rows.push([spec.value_title, formatNumber(values[i], spec.value_format)]);
  if (scores) rows.push([spec.score_title, formatNumber(scores[i], spec.value_format)]);
  return rows;
}

// The tooltip sits next to the pointer (viewport coordinates, position: fixed), on the side
// where it fits, so it is never clipped by the chart's or the page's edge.
function showTooltip(tip, rows, clientX, clientY) {
  tip.replaceChildren(
    ...rows.map(([key, value]) => {
      const tr = document.createElement("tr");
      const th = document.createElement("td");
      th.className = "key";
      th.textContent = key;
      const td = document.createElement("td");
      td.className = "value";
      td.textContent = value;
      tr.append(th, td);
      return tr;
    }),
  );
  tip.style.display = "table";
  const w = tip.offsetWidth;
  const h = tip.offsetHeight;
  const left = clientX + TIP_OFFSET + w > window.innerWidth ? clientX - TIP_OFFSET - w
                                                            : clientX + TIP_OFFSET;
  const top = clientY + TIP_OFFSET + h > window.innerHeight ? clientY - TIP_OFFSET - h
                                                            : clientY + TIP_OFFSET;
  tip.style.left = `${Math.max(0, left)}px`;
  tip.style.top = `${Math.max(0, top)}px`;
}

export default function heatmapCanvas(component) {
  const { data: spec, parentElement } = component;
  let wrap = parentElement.querySelector(".attn-heatmap");
  if (!wrap) {
    wrap = document.createElement("div");
    wrap.className = "attn-heatmap";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    const overlay = document.createElement("canvas");
    overlay.className = "attn-heatmap-overlay";
    const tip = document.createElement("table");
    tip.className = "attn-heatmap-tooltip";
    wrap.append(canvas, overlay, tip);
    parentElement.appendChild(wrap);
  }
  const [canvas, overlay, tip] = wrap.children;
  const values = decodeFloats(spec.values);
  const scores = decodeFloats(spec.scores);
  const ink = getComputedStyle(parentElement).color || "#111";
  canvas.setAttribute("aria-label", spec.title);
  const box = draw(canvas, spec, values, ink, parentElement.clientWidth);
  overlay.width = canvas.width;
  overlay.height = canvas.height;
  overlay.style.width = canvas.style.width;
  overlay.style.aspectRatio = canvas.style.aspectRatio;
  // what was drawn, for tests and benches: cell count, paint count, and where the cells are
  // (CSS pixels of the unscaled layout)
  wrap.dataset.cells = String(values.length);
  wrap.dataset.rows = String(spec.rows.length);
  wrap.dataset.cols = String(spec.cols.length);
  wrap.dataset.paints = String(Number(wrap.dataset.paints || 0) + 1);
  wrap.dataset.layout = JSON.stringify({
    width: box.width,
    cell: [box.cellW, box.cellH],
    panels: box.panels.map((panel) => [panel.x, panel.y]),
    height: box.height,
    titles_bottom: box.top,
    y_title_upright: box.upright,
    legend: [box.legend.titleBottom - F.axisTitle, box.legend.barTop, box.legend.h],
    legend_ticks: box.legend.ticks.map(({ value, y }) => [value, y]), // y: px below the bar top
    label_px: F.label,
    legend_width: box.legendW,
    panel_size: [box.panelW, box.panelH],
    y_title_turned_px: box.yTitleW, // 0 for an upright (CJK) y title
  });
  tip.style.display = "none";

  const octx = overlay.getContext("2d");
  const dpr = canvas.width / box.width;
  const clearHighlight = () => octx.clearRect(0, 0, overlay.width, overlay.height);
  clearHighlight();
  const onMove = (event) => {
    const rect = canvas.getBoundingClientRect();
    const k = box.width / rect.width;
    const hit = cellAt(box, (event.clientX - rect.left) * k, (event.clientY - rect.top) * k);
    clearHighlight();
    if (!hit) {
      tip.style.display = "none";
      return;
    }
    const panel = box.panels[hit.p];
    octx.setTransform(dpr, 0, 0, dpr, 0, 0);
    octx.strokeStyle = "#e4002b";
    octx.lineWidth = 1.5;
    octx.strokeRect(panel.x + hit.c * box.cellW, panel.y + hit.r * box.cellH, box.cellW, box.cellH);
    showTooltip(tip, tooltipRows(spec, values, scores, hit), event.clientX, event.clientY);
  };
  const onLeave = () => {
    clearHighlight();
    tip.style.display = "none";
  };
  // pointerdown too: a tap on a touch screen (a tablet in a workshop) shows the tooltip
  overlay.addEventListener("pointermove", onMove);
  overlay.addEventListener("pointerdown", onMove);
  overlay.addEventListener("pointerleave", onLeave);
  // the tooltip is fixed to the viewport: hide it when any scroll container moves the chart
  document.addEventListener("scroll", onLeave, true);
  return () => {
    overlay.removeEventListener("pointermove", onMove);
    overlay.removeEventListener("pointerdown", onMove);
    overlay.removeEventListener("pointerleave", onLeave);
    document.removeEventListener("scroll", onLeave, true);
  };
}
