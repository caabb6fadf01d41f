#!/usr/bin/env python3
"""Draws a grouped bar chart (SVG) of a Google Benchmark JSON file.

Usage:
    scripts/bench_chart.py RESULTS.json OUTPUT.svg [NAME_REGEX] [--title T] [--linear]

RESULTS.json is what a benchmark program writes with
`--benchmark_out=RESULTS.json --benchmark_out_format=json` (or prints with
`--benchmark_format=json`; text printed before the JSON, such as a smoke
check's message, is skipped). NAME_REGEX keeps only the benchmarks whose
name it matches (Python `re.search`), e.g. 'scd2/.*keys:1000000/'.

Benchmark names are read as `family/.../implementation/param:value/...`:
the implementation is the last component before the first one holding a
colon (or, for names without one, the last component). Every other part of
the name is the configuration. The chart has one group of bars per
configuration and one bar per implementation, each the median of
`items_per_second` over the repetitions: the `median` aggregate when the
file has aggregates, else the median of the iterations. The y axis is
logarithmic unless --linear is given, since the baselines span orders of
magnitude. Python 3 standard library only.
"""

import argparse
import json
import math
import re
import statistics
import sys
from xml.sax.saxutils import escape

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
# Parts of a name that describe how it was run, not what was measured.
RUN_PARTS = re.compile(r"^(min_time|repeats|iterations|threads|real_time|process_time|manual_time):?")


def load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.find("{")
    if start < 0:
        sys.exit(f"bench_chart: {path}: no JSON object found")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as e:
        sys.exit(f"bench_chart: {path}: not Google Benchmark JSON ({e})")


def split_name(name):
    """Returns (implementation, configuration) of a benchmark name."""
    parts = [p for p in name.split("/") if not RUN_PARTS.match(p)]
    first_param = next((i for i, p in enumerate(parts) if ":" in p), len(parts))
    impl_at = max(first_param - 1, 0)
    impl = parts[impl_at]
    config = "/".join(parts[:impl_at] + parts[impl_at + 1:])
    return impl, config


def shorten(config):
    """keys:1000000 -> keys:1e6 and batch:30000 -> batch:3e4, for labels."""
    def number(m):
        digits = m.group(1)
        lead, zeros = digits.rstrip("0"), len(digits) - len(digits.rstrip("0"))
        if len(lead) == 1 and zeros >= 3:
            return f":{lead}e{zeros}"
        return m.group(0)
    return re.sub(r":(\d+)\b", number, config)


def collect(data, pattern):
    """{(config, impl): rate}, configurations and implementations in file order."""
    medians, samples = {}, {}
    configs, impls = [], []
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b.get("name", "")
        if pattern and not pattern.search(name):
            continue
        rate = b.get("items_per_second")
        if rate is None or b.get("error_occurred"):
            continue
        impl, config = split_name(name)
        if config not in configs:
            configs.append(config)
        if impl not in impls:
            impls.append(impl)
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[(config, impl)] = rate
        else:
            samples.setdefault((config, impl), []).append(rate)
    values = {k: statistics.median(v) for k, v in samples.items()}
    values.update(medians)  # a median aggregate wins over single iterations
    return values, configs, impls


def fmt_rate(v):
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def labels_of(configs):
    """Short labels: the configurations' common leading parts removed."""
    split = [c.split("/") for c in configs]
    common = 0
    while all(len(p) > common + 1 and p[common] == split[0][common] for p in split):
        common += 1
    return [shorten("/".join(p[common:])) for p in split]


def draw(values, configs, impls, title, linear):
    bar_w, gap = 12, 18
    group_w = bar_w * len(impls) + gap
    labels = labels_of(configs)
    left, right, top = 80, 20, 60
    bottom = 50 + int(4.5 * max(len(t) for t in labels))
    plot_h = 320
    plot_w = max(group_w * len(configs), 4 * 170)
    legend_h = 20 * ((len(impls) + 3) // 4)
    width = left + plot_w + right
    height = top + plot_h + bottom + legend_h

    rates = [v for v in values.values() if v > 0]
    hi = max(rates)
    if linear:
        lo = 0.0
        step = 10 ** math.floor(math.log10(hi))
        hi = math.ceil(hi / step) * step
        ticks = [lo + i * (hi - lo) / 5 for i in range(6)]
        def y(v):
            return top + plot_h - plot_h * (v - lo) / (hi - lo)
    else:
        lo_e = math.floor(math.log10(min(rates)))
        hi_e = math.ceil(math.log10(hi))
        if hi_e == lo_e:
            hi_e += 1
        ticks = [10.0 ** e for e in range(lo_e, hi_e + 1)]
        def y(v):
            v = max(v, 10.0 ** lo_e)
            return top + plot_h - plot_h * (math.log10(v) - lo_e) / (hi_e - lo_e)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>']
    # Axes, grid and tick labels.
    for t in ticks:
        ty = y(t)
        out.append(f'<line x1="{left}" y1="{ty:.1f}" x2="{left + plot_w}" y2="{ty:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{fmt_rate(t)}</text>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="black"/>')
    scale = "linear" if linear else "log scale"
    out.append(f'<text transform="translate(18,{top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
               f'rows per second (items_per_second, median; {scale})</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - legend_h - 12}" text-anchor="middle">'
               f'configuration</text>')
    # Bars.
    for gi, config in enumerate(configs):
        gx = left + gap / 2 + gi * group_w
        for ii, impl in enumerate(impls):
            v = values.get((config, impl))
            if v is None:
                continue
            bx = gx + ii * bar_w
            by = y(v)
            h = top + plot_h - by
            out.append(f'<rect x="{bx:.1f}" y="{by:.1f}" width="{bar_w - 1}" height="{h:.1f}" '
                       f'fill="{PALETTE[ii % len(PALETTE)]}"><title>{escape(impl)} {escape(config)}: '
                       f'{fmt_rate(v)} rows/s</title></rect>')
        lx = gx + (group_w - gap) / 2
        ly = top + plot_h + 8
        out.append(f'<text transform="translate({lx:.1f},{ly}) rotate(45)" text-anchor="start">'
                   f'{escape(labels[gi])}</text>')
    # Legend.
    for ii, impl in enumerate(impls):
        lx = left + (ii % 4) * 170
        ly = height - legend_h + (ii // 4) * 20
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{PALETTE[ii % len(PALETTE)]}"/>')
        out.append(f'<text x="{lx + 18}" y="{ly}">{escape(impl)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="Google Benchmark JSON output")
    ap.add_argument("output", help="SVG file to write")
    ap.add_argument("filter", nargs="?", help="regex: keep benchmarks whose name matches")
    ap.add_argument("--title", help="chart title (default: the benchmark family)")
    ap.add_argument("--linear", action="store_true", help="linear y axis instead of log")
    args = ap.parse_args()

    data = load(args.json)
    pattern = re.compile(args.filter) if args.filter else None
    values, configs, impls = collect(data, pattern)
    if not values:
        sys.exit("bench_chart: no benchmark with items_per_second"
                 + (f" matches {args.filter!r}" if args.filter else ""))
    title = args.title or configs[0].split("/")[0] + ": rows per second by implementation"
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(draw(values, configs, impls, title, args.linear))
    print(f"bench_chart: wrote {args.output}: {len(configs)} configurations, "
          f"{len(impls)} implementations")


if __name__ == "__main__":
    main()
