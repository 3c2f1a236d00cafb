"""Line charts with 95% intervals as inline SVG, drawn by Python: no script, no network, no chart library.

    svg_chart("held-out accuracy", [Series("run a", [Point(0, 0.4, 0.3, 0.5), ...])],
              markers=[Marker(1, "merge x", "merge")], bounds=(0.0, 1.0), x_names={-1: "base"})

Every chart carries its own text alternative: a ``<title>``/``<desc>`` for screen readers and a table
of the same numbers after it, so nothing is only in the picture.
"""

from __future__ import annotations

import html
from typing import NamedTuple

PALETTE = ("#1f5fa8", "#b3470f", "#2d7a2d", "#7a2d7a", "#8a6d00", "#444444")
"""Series colours, each at least 4.5:1 against white."""
MARKER_COLOURS = {"merge": "#2d7a2d", "revert": "#b3001b", "probation": "#8a6d00"}
MARKER_NAMES = {"merge": "merged (first trained this round)", "revert": "reverted",
                "probation": "merged on probation"}
W, H, LEFT, RIGHT, TOP, BOTTOM = 560, 220, 48, 12, 14, 34


class Point(NamedTuple):
    x: int
    value: float
    low: float | None = None
    high: float | None = None


class Series(NamedTuple):
    label: str
    points: list[Point]


class Marker(NamedTuple):
    x: int
    label: str
    kind: str  # "merge" | "revert" | "probation"


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _clip(p: Point, bounds: tuple[float, float] | None) -> Point:
    """``p`` with its interval kept inside what the figure can be (a share in [0, 1]): a normal band around a
    mean near a bound would otherwise put a reward of -0.054 on the axis."""
    if bounds is None:
        return p
    lo, hi = bounds

    def inside(v: float | None) -> float | None:
        return None if v is None else min(hi, max(lo, v))
    return Point(p.x, inside(p.value), inside(p.low), inside(p.high))


def svg_chart(title: str, series: list[Series], markers: list[Marker] = (), x_label: str = "round",
              bounds: tuple[float, float] | None = None, x_names: dict[int, str] | None = None) -> str:
    """A ``<figure>``: the chart (lines, interval bands, round markers) and a table of its numbers.

    ``bounds``: the range the figure can take (intervals are clipped to it, the axis never leaves it);
    ``x_names``: tick names for some x (``{-1: "base"}``). The x axis ends at the last point: a marker after
    it (a merge the next round would first train on) is listed, not drawn."""
    series = [Series(s.label, [_clip(p, bounds) for p in s.points]) for s in series]
    points = [p for s in series for p in s.points]
    esc = html.escape
    names = x_names or {}
    if not points:
        return f'<figure class="chart"><figcaption>{esc(title)}: no data recorded</figcaption></figure>'
    first, last = min(p.x for p in points), max(p.x for p in points)
    later = [m for m in markers if not first <= m.x <= last]
    markers = [m for m in markers if first <= m.x <= last]
    xs = [p.x for p in points]
    values = [v for p in points for v in (p.value, p.low, p.high) if v is not None]
    lo, hi = min(0.0, min(values)), max(1.0, max(values)) if max(values) <= 1.0 else max(values)
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    fx = _scale(first - 0.5, last + 0.5, LEFT, W - RIGHT)
    fy = _scale(lo, hi, H - BOTTOM, TOP)
    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="#fff" '
             'stroke="#888"/>']
    for tick in (lo, (lo + hi) / 2, hi):
        parts.append(f'<text x="{LEFT - 4}" y="{fy(tick) + 4:.1f}" text-anchor="end" class="tick">{tick:.2g}</text>')
    for x in sorted(set(xs)):
        parts.append(f'<text x="{fx(x):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle" class="tick">'
                     f'{esc(names.get(x, str(x)))}</text>')
    parts.append(f'<text x="{(LEFT + W) / 2:.0f}" y="{H - 4}" text-anchor="middle" class="tick">{esc(x_label)}</text>')
    for m in markers:
        colour = MARKER_COLOURS.get(m.kind, "#444")
        parts.append(f'<line class="marker marker-{m.kind}" x1="{fx(m.x):.1f}" x2="{fx(m.x):.1f}" y1="{TOP}" '
                     f'y2="{H - BOTTOM}" stroke="{colour}" stroke-dasharray="4 3"><title>{esc(m.kind)}: '
                     f'{esc(m.label)}</title></line>')
    for k, s in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        pts = sorted(s.points)
        band = [p for p in pts if p.low is not None and p.high is not None]
        if len(band) >= 2:
            outline = [f"{fx(p.x):.1f},{fy(p.high):.1f}" for p in band] + [
                f"{fx(p.x):.1f},{fy(p.low):.1f}" for p in reversed(band)]
            parts.append(f'<polygon class="band" points="{" ".join(outline)}" fill="{colour}" fill-opacity="0.15"/>')
        for p in band:  # whiskers: a band needs two points, a single round still shows its interval
            parts.append(f'<line class="whisker" x1="{fx(p.x):.1f}" x2="{fx(p.x):.1f}" y1="{fy(p.low):.1f}" '
                         f'y2="{fy(p.high):.1f}" stroke="{colour}"/>')
        if len(pts) >= 2:
            parts.append(f'<polyline class="curve" fill="none" stroke="{colour}" stroke-width="2" points="'
                         + " ".join(f"{fx(p.x):.1f},{fy(p.value):.1f}" for p in pts) + '"/>')
        for p in pts:
            parts.append(f'<circle class="point" cx="{fx(p.x):.1f}" cy="{fy(p.value):.1f}" r="3" fill="{colour}">'
                         f'<title>{esc(s.label)}, {x_label} {p.x}: {p.value:.3f}</title></circle>')
    legend = " ".join(f'<span class="key"><span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}">'
                      f'</span>{esc(s.label)}</span>' for k, s in enumerate(series))
    legend += "".join(f'<span class="key marker-key"><span class="swatch" style="background:{MARKER_COLOURS[kind]}">'
                      f"</span>{esc(MARKER_NAMES[kind])}</span>"
                      for kind in MARKER_COLOURS if any(m.kind == kind for m in markers))
    marks = "; ".join(f"{m.kind} at {x_label} {names.get(m.x, m.x)}: {m.label}" for m in markers) \
        or "no merges or reverts"
    if later:
        marks += "; after the last round: " + ", ".join(f"{m.kind} {m.label}" for m in later)
    desc = f"{title}; " + "; ".join(f"{s.label}: " + ", ".join(f"{names.get(p.x, p.x)}={p.value:.3f}"
                                                               for p in sorted(s.points))
                                   for s in series) + f"; {marks}"
    slug = "".join(c if c.isalnum() else "-" for c in title.lower())
    rows = "".join(f"<tr><td>{esc(s.label)}</td><td>{esc(names.get(p.x, str(p.x)))}</td><td>{p.value:.3f}</td><td>"
                   + (f"[{p.low:.3f}, {p.high:.3f}]" if p.low is not None and p.high is not None else "-")
                   + "</td></tr>" for s in series for p in sorted(s.points))
    return (f'<figure class="chart" id="chart-{slug}"><figcaption>{esc(title)} {legend}</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-labelledby="t-{slug} d-{slug}"><title id="t-{slug}">{esc(title)}</title>'
            f'<desc id="d-{slug}">{esc(desc)}</desc>{"".join(parts)}</svg>'
            f'<details><summary>numbers ({esc(marks)})</summary><table><thead><tr><th>series</th><th>{esc(x_label)}'
            f'</th><th>value</th><th>95% interval</th></tr></thead><tbody>{rows}</tbody></table></details></figure>')
