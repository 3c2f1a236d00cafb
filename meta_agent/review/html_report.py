"""``python -m meta_agent report``: a static HTML site of a run, or of several runs overlaid.

    <out>/index.html          per-round curves with 95% intervals and merge/revert/probation markers,
                              every intervention (status, predicted benefit, live outcome), the backtest
                              precision, each round's digest findings, the harness's git graph
    <out>/iv/<branch>.html    one page per intervention: what ``show`` prints, the diff rendered
    <out>/round-<n>.html      one page per round: findings with examples, proposals, exam

Self-contained: inline CSS and SVG, no script, no network; it opens from disk.  The intervals of the
per-round figures: the held-out exam's as the run recorded them (paired over tasks); for the train
shares, a Wilson interval counting GRPO groups as the sample size (rollouts of one group are not
independent, so counting them would overstate the evidence); for the mean reward, mean +- 1.96 sd/sqrt(groups).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from harness_repo.gitcmd import run_git
from harness_repo.repo import HarnessRepo
from meta_agent.review.learned import exam_rows, html_section
from meta_agent.review.losses import alarm_lines, loss_lines
from meta_agent.review.precision import checked_precision, describe, explain_change
from meta_agent.review.records import (digests, intervention_record, merged_findings, round_record, rounds,
                                       source_name)
from meta_agent.review.show import change_cell, fmt
from meta_agent.review.svg import Marker, Point, Series, svg_chart
from meta_agent.run_dir import RunDir, RunDirError, not_a_run_message
from rl_backend.archive import Archive

esc = html.escape
CSS = """body{font:15px/1.45 system-ui,sans-serif;color:#1a1a1a;background:#fff;\
max-width:1100px;margin:1em auto;padding:0 1em}
a{color:#0b4f9c}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 6px;\
text-align:left;
vertical-align:top}th{background:#eef}.charts{display:flex;flex-wrap:wrap;gap:1em}\
.chart{margin:0;flex:0 0 560px}.tick{font-size:10px;
fill:#333}.key{margin-left:.8em}.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}.add{color:#1b5e20;background:#e6f4e6}.del{color:#8b0000;
background:#fbe9e9}.hunk{color:#004d80}.missing{color:#8b0000}.status-merged{color:#1b5e20}.status-rejected,
.status-reverted{color:#8b0000}"""
CURVES = (("held-out accuracy (exam)", "heldout"), ("train verified accuracy", "verified_mean"),
          ("train reward (harness)", "reward_mean"), ("zero-variance group share", "zero_variance_share"),
          ("kept share (filters)", "kept_share"), ("truncation rate", "truncation_rate"),
          ("hack rate", "hack_rate"), ("failure pay", "failure_pay"))


def page(title: str, body: str, up: str = "") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>'
            + (f'<nav><a href="{up}index.html">run index</a></nav>' if up else "")
            + f"<h1>{esc(title)}</h1>{body}</body></html>")


def _wilson(share: float, n: int) -> tuple[float, float]:
    z = 1.96
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def round_point(d: dict, key: str) -> Point | None:
    """The digest's figure ``key`` for its round, with a 95% interval where one can be given honestly."""
    n, groups = d.get("round"), d.get("n_groups") or 0
    if key == "heldout":
        acc = (d.get("heldout") or {}).get("accuracy")
        if isinstance(acc, dict) and isinstance(acc.get("value"), (int, float)):
            return Point(n, acc["value"], acc.get("low"), acc.get("high"))
        value = d.get("heldout_accuracy")
        return Point(n, value) if isinstance(value, (int, float)) else None
    if key == "failure_pay":
        alarm = next((a for a in d.get("tripwire") or [] if isinstance(a, dict) and a.get("metric") == key), None)
        return Point(n, alarm["after"]) if alarm and isinstance(alarm.get("after"), (int, float)) else None
    value = d.get(key)
    if not isinstance(value, (int, float)) or not isinstance(n, int):
        return None
    if key == "reward_mean" and isinstance(d.get("reward_std"), (int, float)) and groups:
        half = 1.96 * d["reward_std"] / math.sqrt(groups)
        return Point(n, value, value - half, value + half)
    if groups and 0.0 <= value <= 1.0:
        return Point(n, value, *_wilson(value, groups))
    return Point(n, value)


def markers(repo: HarnessRepo) -> list[Marker]:
    """A merge shows at the round that first trained on it (n+1); a revert at the round whose check undid it."""
    out = []
    for iv in repo.interventions():
        if iv.merge_commit:
            kind = "probation" if iv.on_probation else "merge"
            out.append(Marker(iv.round + 1, iv.branch, kind))
        if iv.revert_commit:
            out.append(Marker(iv.round + 1, iv.branch, "revert"))
    return out


def iv_file(branch: str) -> str:
    return "iv/" + branch.replace("/", "_") + ".html"


def _diff_html(diff: str) -> str:
    cls = (("+++", ""), ("---", ""), ("@@", "hunk"), ("+", "add"), ("-", "del"))
    lines = []
    for line in diff.splitlines():
        c = next((k for prefix, k in cls if line.startswith(prefix)), "")
        lines.append(f'<span class="{c}">{esc(line)}</span>' if c else esc(line))
    return "<pre class=\"diff\">" + "\n".join(lines) + "</pre>"


def _missing(record: dict) -> str:
    return "".join(f'<p class="missing">missing: {esc(m)}</p>' for m in record["missing"])


def intervention_page(r: dict) -> str:
    a = r["author"]
    body = [f'<p>status <b class="status-{esc(r["status"])}">{esc(r["status"])}</b>, round {r["round"]}, head '
            f'<code>{esc(r["head"][:10])}</code>; by '
            f'{esc(", ".join(str(v) for v in (a["agent"], a["model"]) if v) or "unknown")}'
            + "".join(f", {k} {esc(str(a[k]))}" for k in ("tokens", "cost") if a[k]) + "</p>",
            f"<h2>Hypothesis</h2><p>{esc(r['hypothesis'] or '-')}</p><h2>Predicted effects</h2><ul>"
            + "".join(f"<li>{esc(e)}</li>" for e in r["predicted_effects"]) + "</ul>",
            f"<h2>Diff</h2><p>{esc(', '.join(r['files']))}</p>{_diff_html(r['diff'])}"]
    bt = r["backtest"]
    if bt:
        rows = "".join(f"<tr><td>{esc(m['name'])}</td><td>{fmt(m['main'])}</td><td>{fmt(m['candidate'])}</td><td>"
                       f"{esc(change_cell(m))}</td><td>"
                       f"{'unsure' if m['undecided'] else {True: 'pass', False: 'FAIL', None: ''}[m['passed']]}</td>"
                       f"<td>{esc(m['rule'] or '')}</td></tr>" for m in bt["metrics"])
        checks = "".join(f"<li>{esc(str(c.get('name')))}: {'pass' if c.get('passed') else 'FAIL'}, "
                         f"{esc(str(c.get('detail', '')))}</li>" for c in bt["checks"])
        body.append(f"<h2>Backtest: {esc(str(bt['decision']).upper())}</h2><p>{esc(bt['sample'] or '')}</p><table>"
                    "<thead><tr><th>metric</th><th>main</th><th>candidate</th><th>change [95% CI]</th><th>gate</th>"
                    f"<th>margin</th></tr></thead><tbody>{rows}</tbody></table><ul>{checks}</ul>")
    body.append(f"<h2>Verdict</h2><p>{esc(r['verdict'] or 'none recorded')}</p><ul>"
                + "".join(f"<li>{esc(x)}</li>" for x in (bt or {}).get("reasons", [])) + "</ul>")
    live = "".join(f"<li>round {c.get('round')}: {esc(str(c.get('outcome')))}<ul>" + "".join(
        f"<li>{esc(explain_change(t, str(v), (c.get('intervals') or {}).get(t), c.get('round')))}</li>"
        for t, v in (c.get("predictions") or {}).items()) + "</ul></li>" for c in r["live"])
    body.append("<h2>Live check</h2>" + (f"<ul>{live}</ul>" if live else "<p>not measured yet</p>"))
    if r["skill"]:
        body.append(f"<h2>Became skill</h2><p>{esc(str(r['skill']['name']))} ({esc(str(r['skill']['file']))})</p>")
    if r["revert"]:
        body.append(f"<h2>Reverted</h2><p><code>{esc(r['revert']['commit'][:10])}</code> "
                    f"{esc(r['revert']['reason'])}</p>"
                    + "".join(f"<p>{esc(k)}: {esc(v)}</p>" for k, vs in r["revert"]["evidence"].items() for v in vs))
    return page(r["branch"], "".join(body) + _missing(r), up="../")


def round_page(r: dict) -> str:
    findings = "".join(f"<h3>{esc(str(f['name']))} ({esc(str(f['severity']))}, rate {fmt(f['rate'])}, "
                       f"{esc(source_name(f))})</h3>"
                       f"<p>{esc(str(f.get('message') or ''))}</p><ul>" + "".join(
                           f"<li><code>{esc(str(e.get('traj_id')))}</code> reward {fmt(e.get('reward'))} verified "
                           f"{fmt(e.get('verified'))}<pre>{esc(str(e.get('response', ''))[:600])}</pre></li>"
                           for e in f["examples"]) + "</ul>" for f in r["findings"])
    props = "".join(f"<tr><td><a href=\"{iv_file(p['branch'])}\">{esc(p['branch'])}</a></td><td>{esc(p['status'])}</td>"
                    f"<td>{esc(p['verdict'] or '')}</td></tr>" for p in r["proposals"] if p["branch"])
    acc = r["exam"]["accuracy"]
    exam = (f"{fmt(acc.get('value'))} [{fmt(acc.get('low'))}, {fmt(acc.get('high'))}]" if isinstance(acc, dict)
            else fmt(acc))
    return page(f"Round {r['round']}", f"<h2>Findings</h2>{findings or '<p>none</p>'}<h2>Proposals</h2><table><thead>"
                f"<tr><th>branch</th><th>status</th><th>verdict</th></tr></thead><tbody>{props}</tbody></table>"
                f"<h2>Held-out exam</h2><p>{exam}</p>{_missing(r)}", up="")


BASE_X = -1
"""Where the untrained base policy sits on the held-out chart, before round 0."""


def curve_points(ds: list[dict], key: str) -> list[Point]:
    """One curve's points: each round's figure, and for the exam the base policy first; failure pay's round
    n-1 from round n's tripwire comparison (the only place the run records it)."""
    points = {p.x: p for d in ds if (p := round_point(d, key)) is not None}
    if key == "heldout":
        base = next(((d.get("heldout") or {}).get("base") for d in ds if d.get("round") == 0), None)
        if isinstance(base, dict) and isinstance(base.get("value"), (int, float)):
            points[BASE_X] = Point(BASE_X, base["value"], base.get("low"), base.get("high"))
    if key == "failure_pay":
        for d in ds:
            alarm = next((a for a in d.get("tripwire") or [] if isinstance(a, dict) and a.get("metric") == key), None)
            n = d.get("round")
            if alarm and isinstance(n, int) and n - 1 not in points and isinstance(alarm.get("before"), (int, float)):
                points[n - 1] = Point(n - 1, alarm["before"])
    return [points[x] for x in sorted(points)]


def _bounds(key: str, series: list[Series]) -> tuple[float, float]:
    """What the figure can be: a share or an accuracy lies in [0, 1]; a mean reward within the rewards seen
    (at least [0, 1])."""
    if key != "reward_mean":
        return 0.0, 1.0
    values = [p.value for s in series for p in s.points]
    return min([0.0, *values]), max([1.0, *values])


def _curves(runs: list[tuple[str, list[dict]]], marks: list[Marker]) -> str:
    charts = []
    for title, key in CURVES:
        series = [s for s in (Series(label, curve_points(ds, key)) for label, ds in runs) if s.points]
        charts.append(svg_chart(title, series, marks, bounds=_bounds(key, series), x_names={BASE_X: "base"}))
    return f'<div class="charts">{"".join(charts)}</div>'


def finding_text(f: dict) -> str:
    """``truncation 0.125 (trusted digest)``: the same mode from the digest and the harness's own diagnostic
    reads as two findings, so each names its source."""
    return f"{f.get('name')} {fmt(f.get('rate'))} ({source_name(f)})"


def findings_line(d: dict) -> str:
    """A round's findings, each mode once, naming who found it (the digest, the harness, or both)."""
    return "; ".join(esc(finding_text(f)) for f in merged_findings(d.get("failure_modes") or []))


def write_site(run_dir: Path, out: Path) -> Path:
    """The run's HTML report in ``out``; ``out/index.html``."""
    rd = RunDir(run_dir).require()
    repo = HarnessRepo.open(rd.harness)
    ds = digests(rd)
    ivs = repo.interventions()
    (out / "iv").mkdir(parents=True, exist_ok=True)
    missing = []
    if not ds:
        missing.append("no round digest: the run stopped before its first digest (killed mid-round?)")
    if not any(iv.merge_commit for iv in ivs):
        missing.append("no merges: main is still the seed harness (or the run line's starting branch)")
    run_id = str(rd.config().get("run_id") or rd.path.name)
    archived = set(Archive(rd.archive).rounds(run_id)) if rd.archive.is_dir() else set()
    for n in rounds(rd):
        if n not in archived and (rd.round_dir(n) / "digest.json").exists():
            missing.append(f"round {n}: no archive part under {rd.archive / f'run_id={run_id}' / f'round={n}'} "
                           "(its rollouts cannot be replayed or re-examined)")
    missing += loss_lines(rd.archive) + alarm_lines(ds)  # damaged or lost parts, and the alarms they caused
    state = rd.state()
    if state.get("status") == "failed" or (state and state.get("status") != "finished"):
        missing.append(f"the run stopped in round {state.get('round')} at phase {state.get('phase')} "
                       f"(status {state.get('status', 'running or killed')})")
    rows = []
    for iv in ivs:
        record = intervention_record(rd, repo, iv.branch)
        (out / iv_file(iv.branch)).write_text(intervention_page(record))
        benefit = "; ".join(iv.predicted_effects) or "-"
        live = "; ".join(str(c.get("outcome")) for c in record["live"]) or "not measured"
        rows.append(f"<tr><td><a href=\"{iv_file(iv.branch)}\">{esc(iv.branch)}</a></td><td class=\"status-"
                    f"{esc(iv.status)}\">{esc(iv.status)}</td><td>{esc(benefit)}</td><td>{esc(live)}</td><td>"
                    f"{esc(str((record['backtest'] or {}).get('decision', 'none')))}</td></tr>")
    for n in rounds(rd):
        (out / f"round-{n}.html").write_text(round_page(round_record(rd, repo, n)))
    findings = "".join(f"<li><a href=\"round-{d.get('round')}.html\">round {d.get('round')}</a>: "
                       + findings_line(d) + "</li>" for d in ds)
    graph = run_git(repo.path, "log", "--graph", "--oneline", "--decorate", "--all", "-n", "200")
    body = (f"<p>run folder <code>{esc(str(rd.path))}</code></p>"
            + "".join(f'<p class="missing">missing: {esc(m)}</p>' for m in missing)
            + html_section(exam_rows(ds))
            + f"<h2>Curves by round</h2>{_curves([(rd.path.name, ds)], markers(repo))}"
            f"<h2>Interventions</h2><p>{esc(describe(checked_precision(ivs, ds)))}</p>"
            "<table><thead><tr><th>branch</th><th>status</th><th>predicted benefit</th><th>live outcome</th>"
            f"<th>backtest</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<h2>Digest findings by round</h2><ul>{findings or '<li>none recorded</li>'}</ul>"
            f"<h2>Harness git graph</h2><pre>{esc(graph)}</pre>")
    index = out / "index.html"
    index.write_text(page(f"Run {rd.path.name}", body))
    return index


def run_folders(paths: list[Path]) -> list[RunDir]:
    """Each path that is a run, or the runs one level or two below it (a compare_arms output folder)."""
    found = []
    for path in paths:
        if (path / "run.json").exists():
            found.append(RunDir(path))
            continue
        below = sorted(p.parent for p in list(path.glob("*/run.json")) + list(path.glob("*/*/run.json")))
        if not below:
            raise RunDirError(not_a_run_message(path))
        found += [RunDir(p) for p in below]
    return found


def write_compare(paths: list[Path], out: Path) -> Path:
    """Several runs' per-round curves overlaid, with their intervals; ``out/index.html``."""
    runs = run_folders(paths)
    labels = [str(rd.path.relative_to(rd.path.parents[1])) if len(rd.path.parts) > 2 else rd.path.name for rd in runs]
    series = [(label, digests(rd)) for label, rd in zip(labels, runs)]
    rows = "".join(f"<tr><td>{esc(label)}</td><td><code>{esc(str(rd.path))}</code></td><td>{len(ds)}</td></tr>"
                   for (label, ds), rd in zip(series, runs))
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page("Runs compared", f"<table><thead><tr><th>run</th><th>folder</th><th>rounds with a digest"
                                           f"</th></tr></thead><tbody>{rows}</tbody></table>{_curves(series, [])}"))
    return index
