/**
 * A stacked bar chart drawn as plain SVG, with the table of its figures behind it: the only chart
 * the dashboard draws (usage per hour or day, split by class of status), so no chart library.
 *
 * What makes it readable without the picture, or without colour: the <svg> is one image
 * (role="img") named by its <title> and described by its <desc>, which says what is drawn, the
 * total and the busiest step in words; each part of a stack has a pattern as well as a colour
 * (solid, stripes, dots, cross-hatch), named in the legend; and every figure drawn is in the table
 * under "Figures as a table" (a <details>, open on request), row for row and column for column.
 * The colours are the style sheet's (`--chart-*`), at least 3:1 against the page in the light
 * and the dark scheme. The drawing scales to its box (viewBox), so a phone shows it whole.
 */
import { h, uniqueId, type Child } from './dom.js';
import { table } from './ui.js';

const SVG = 'http://www.w3.org/2000/svg';

/** One SVG element: attributes as given, children appended (text as text nodes). */
function s(tag: string, attrs: Record<string, string | number> = {}, ...children: (Node | string)[]): SVGElement {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  for (const child of children) element.append(child);
  return element;
}

/** A part of each stack: `mark` is its pattern (drawn over its colour), `className` its colour. */
export interface ChartPart {
  key: string;
  label: string;
  className: string;
  mark: 'solid' | 'stripes' | 'dots' | 'cross' | 'lines';
}

export interface ChartStep {
  /** Under the bar, when there is room (every `labelEvery`-th step). */
  short: string;
  /** In the table and the description (the step's start: "Dec 1, 2026, 1:00 PM"). */
  long: string;
  /** Per part key. */
  values: Readonly<Record<string, number>>;
}

export interface StackedBars {
  title: string;
  /** The column heading of the steps in the table ("Hour", "Day"). */
  stepHeading: string;
  parts: readonly ChartPart[];
  steps: readonly ChartStep[];
  labelEvery: number;
  /** How a count reads in words ("calls"). */
  unit: string;
}

const WIDTH = 480;
const HEIGHT = 220;
const PLOT = { left: 52, right: 8, top: 12, bottom: 30 };
const COUNT = new Intl.NumberFormat();

/** 2, 4, 6, 8 or 10 times a power of ten, at least `n`: the top of the scale, whose half is a whole count too. */
function niceCeiling(n: number): number {
  const power = 10 ** Math.max(0, Math.floor(Math.log10(Math.max(1, n))));
  return [2, 4, 6, 8, 10].map((m) => m * power).find((v) => v >= n)!;
}

function patternOf(id: string, part: ChartPart): SVGElement {
  const marks: Record<ChartPart['mark'], () => SVGElement | undefined> = {
    solid: () => undefined,
    stripes: () => s('path', { d: 'M-1,1 L1,-1 M0,6 L6,0 M5,7 L7,5', class: 'chart-mark' }),
    dots: () => s('circle', { cx: 3, cy: 3, r: 1.4, class: 'chart-dot' }),
    cross: () => s('path', { d: 'M0,0 L6,6 M6,0 L0,6', class: 'chart-mark' }),
    lines: () => s('path', { d: 'M0,3 L6,3', class: 'chart-mark' }),
  };
  const mark = marks[part.mark]();
  return s('pattern', { id, width: 6, height: 6, patternUnits: 'userSpaceOnUse' },
    s('rect', { width: 6, height: 6, class: part.className }), ...(mark === undefined ? [] : [mark]));
}

function totalOf(step: ChartStep, parts: readonly ChartPart[]): number {
  return parts.reduce((n, part) => n + (step.values[part.key] ?? 0), 0);
}

/** What the picture shows, in words: the <desc>. */
function describe(chart: StackedBars): string {
  const totals = chart.steps.map((step) => totalOf(step, chart.parts));
  const total = totals.reduce((a, b) => a + b, 0);
  const byPart = chart.parts
    .map((part) => [part.label, chart.steps.reduce((n, step) => n + (step.values[part.key] ?? 0), 0)] as const)
    .filter(([, n]) => n > 0)
    .map(([label, n]) => `${label}: ${COUNT.format(n)}`);
  const busiest = totals.indexOf(Math.max(...totals));
  const first = chart.steps[0]?.long ?? '';
  const last = chart.steps.at(-1)?.long ?? '';
  return `Stacked bar chart, one bar per ${chart.stepHeading.toLowerCase()} from ${first} to ${last}, split by class of status. `
    + `${COUNT.format(total)} ${chart.unit} in all${byPart.length > 0 ? ` (${byPart.join('; ')})` : ''}. `
    + (total > 0 ? `Most in the ${chart.stepHeading.toLowerCase()} of ${chart.steps[busiest]!.long}: ${COUNT.format(totals[busiest]!)}. ` : '')
    + 'The same figures are in the table below the chart.';
}

function drawing(chart: StackedBars, patterns: Map<string, string>, titleId: string, descId: string): SVGElement {
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const top = niceCeiling(Math.max(0, ...chart.steps.map((step) => totalOf(step, chart.parts))));
  const y = (v: number) => PLOT.top + plotHeight - (v / top) * plotHeight;
  const slot = plotWidth / Math.max(1, chart.steps.length);
  // Narrow bars in a short window too: a bar as wide as half the chart reads as a block, not a count.
  const barWidth = Math.max(1, Math.min(slot * 0.72, 28));
  const svg = s('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`, class: 'chart', focusable: 'false' },
    s('title', { id: titleId }, chart.title),
    s('desc', { id: descId }, describe(chart)),
    s('defs', {}, ...chart.parts.map((part) => patternOf(patterns.get(part.key)!, part))));
  for (const v of [0, top / 2, top]) {
    svg.append(s('line', { x1: PLOT.left, x2: WIDTH - PLOT.right, y1: y(v), y2: y(v), class: v === 0 ? 'chart-axis' : 'chart-grid' }));
    svg.append(s('text', { x: PLOT.left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'chart-label' }, COUNT.format(v)));
  }
  chart.steps.forEach((step, i) => {
    const x = PLOT.left + i * slot + (slot - barWidth) / 2;
    let base = 0;
    for (const part of chart.parts) {
      const value = step.values[part.key] ?? 0;
      if (value === 0) continue;
      svg.append(s('rect', {
        x, y: y(base + value), width: barWidth, height: y(base) - y(base + value),
        fill: `url(#${patterns.get(part.key)!})`, class: 'chart-part',
      }, s('title', {}, `${step.long}, ${part.label}: ${COUNT.format(value)}`)));
      base += value;
    }
    if (i % chart.labelEvery === 0) {
      svg.append(s('text', { x: x + barWidth / 2, y: HEIGHT - PLOT.bottom + 16, 'text-anchor': 'middle', class: 'chart-label' }, step.short));
    }
  });
  return svg;
}

/** The legend: each part's pattern and colour (a picture, hidden from screen readers) beside its name. */
function legend(chart: StackedBars, patterns: Map<string, string>): HTMLElement {
  return h('ul', { class: 'chart-legend', 'aria-label': `Legend: ${chart.title}` }, chart.parts.map((part) => {
    const swatch = s('svg', { viewBox: '0 0 14 14', width: 14, height: 14, class: 'chart-swatch', focusable: 'false', 'aria-hidden': 'true' },
      s('rect', { x: 0.5, y: 0.5, width: 13, height: 13, fill: `url(#${patterns.get(part.key)!})`, class: 'chart-part' }));
    return h('li', null, swatch, part.label);
  }));
}

/** The chart, its legend and its table (the same figures: one row per step, one column per part, and the total). */
export function stackedBars(chart: StackedBars): HTMLElement {
  const patterns = new Map(chart.parts.map((part) => [part.key, uniqueId(`chart-${part.key}`)]));
  const rows: Child[][] = chart.steps.map((step) => [
    step.long,
    ...chart.parts.map((part) => COUNT.format(step.values[part.key] ?? 0)),
    COUNT.format(totalOf(step, chart.parts)),
  ]);
  return h('figure', { class: 'usage-chart' },
    h('h3', null, chart.title),
    drawing(chart, patterns, uniqueId('chart-title'), uniqueId('chart-desc')),
    legend(chart, patterns),
    h('details', { class: 'chart-table' },
      h('summary', null, 'Figures as a table'),
      table(chart.title, [chart.stepHeading, ...chart.parts.map((part) => part.label), 'Total'], rows),
    ),
  );
}
